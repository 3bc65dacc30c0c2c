"""Progress bars for long stages (rich), silent when asked or when output is not a terminal."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

__all__ = ["Stages"]


class Stages:
    """One progress line per pipeline stage.

    Args:
        enabled: show bars (on stderr); ``False`` for ``--quiet`` and the Python API.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._progress: Progress | None = None

    @contextlib.contextmanager
    def stage(self, name: str, total: int) -> Iterator[None]:
        """Show ``name`` until the block ends."""
        if not self.enabled:
            yield
            return
        progress = Progress(TextColumn("{task.description:<28}"), BarColumn(),
                            TimeElapsedColumn(), console=Console(stderr=True), transient=False)
        with progress:
            task = progress.add_task(name, total=total)
            yield
            progress.update(task, completed=total)

    def note(self, message: str) -> None:
        """One line of what was decided and why (how the signals are read), dimmed."""
        if self.enabled:
            Console(stderr=True).print(f"[dim]{message}[/dim]", highlight=False)

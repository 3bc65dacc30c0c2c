"""The scratch folder of one run: regrouped signals and memory-mapped grids, removed after."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from sim2real._atomic import scratch_beside
from sim2real.errors import UsageError

__all__ = ["scratch_folder"]


@contextlib.contextmanager
def scratch_folder(folder: str | Path | None = None,
                   beside: str | Path | None = None) -> Iterator[Path]:
    """A new, empty folder for one run's temporary files, removed when the block ends.

    Args:
        folder: where to make it (``--scratch``); by default beside the output folder
            ``beside`` (the same disk as the results), else the system's temporary folder
            (``$TMPDIR``).

    Raises:
        UsageError: the folder cannot be made there.
    """
    with contextlib.ExitStack() as stack:
        try:
            if folder is None and beside is not None:
                # Beside the output, locked: the next run there removes it if this one is killed.
                path = stack.enter_context(scratch_beside(Path(beside)))
            else:
                if folder is not None:
                    Path(folder).mkdir(parents=True, exist_ok=True)
                path = Path(stack.enter_context(tempfile.TemporaryDirectory(
                    prefix=".sim2real-scratch-", dir=folder)))
        except OSError as err:
            where = folder if folder is not None else Path(beside or ".").absolute().parent
            raise UsageError(f"{where}: cannot make a scratch folder there: {err}") from err
        yield path

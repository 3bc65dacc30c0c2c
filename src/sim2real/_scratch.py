"""The scratch folder of one run: regrouped signals and memory-mapped grids, removed after."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

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
    where = Path(folder) if folder is not None else (
        Path(beside).absolute().parent if beside is not None else None)
    try:
        if where is not None:
            where.mkdir(parents=True, exist_ok=True)
        scratch = tempfile.TemporaryDirectory(prefix=".sim2real-scratch-", dir=where)
    except OSError as err:
        raise UsageError(f"{where}: cannot make a scratch folder there: {err}") from err
    with scratch as path:
        yield Path(path)

"""The scratch folder of one run: regrouped signals and memory-mapped grids, removed after."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from sim2real._atomic import SCRATCH_PREFIX, locked_folder, remove_dead
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
        # Locked while this run lives: a killed run's folder is removed by the next run.
        path = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=where))
        lock = locked_folder(path)
    except OSError as err:
        raise UsageError(f"{where}: cannot make a scratch folder there: {err}") from err
    remove_dead(path.parent, f"{SCRATCH_PREFIX}*")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        if lock is not None:
            os.close(lock)

"""Write a set of files so that readers see all of them or none of them."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_files", "link_tree"]


@contextlib.contextmanager
def atomic_files(target: Path, *, replace: bool = False) -> Iterator[Path]:
    """Yield a staging folder whose files land in ``target`` only if the block succeeds.

    The staging folder lies beside ``target`` (same filesystem, so landing is a rename). On
    an exception it is removed and ``target`` stays exactly as it was.

    Args:
        target: the folder to write.
        replace: swap the whole folder for the staging one (a dataset); otherwise move the
            staged files into ``target`` and keep the others there (an output folder that
            may hold a user's other files).
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        yield staging
        if replace:
            _swap(staging, target)
        else:
            _move_in(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def link_tree(source: Path, dest: Path, *, skip: frozenset[str] = frozenset()) -> None:
    """Mirror ``source`` into ``dest`` with hard links (copies where links are refused).

    Files named in ``skip`` (paths relative to ``source``) are left out: those are the ones
    the caller rewrites, and writing through a hard link would change the original too.
    """
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if rel.as_posix() in skip:
            continue
        out = dest / rel
        if path.is_dir():
            out.mkdir(parents=True, exist_ok=True)
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, out)
        except OSError:
            shutil.copy2(path, out)


def _swap(staging: Path, target: Path) -> None:
    if not target.exists():
        staging.rename(target)
        return
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    target.rename(old)
    try:
        staging.rename(target)
    except BaseException:
        old.rename(target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _move_in(staging: Path, target: Path) -> None:
    created = not target.exists()
    target.mkdir(exist_ok=True)
    try:
        for path in sorted(staging.rglob("*")):
            if path.is_dir():
                continue
            dest = target / path.relative_to(staging)
            dest.parent.mkdir(parents=True, exist_ok=True)
            path.replace(dest)
    except BaseException:
        if created:
            shutil.rmtree(target, ignore_errors=True)
        raise

"""Write a set of files so that readers see all of them or none of them.

Files are written into a hidden staging folder beside the target; landing swaps the two
folders in one ``renameat2(RENAME_EXCHANGE)`` where the system has it (Linux), so a reader,
a crash or a kill at any instant finds the whole old folder or the whole new one. Where
there is no such call, two renames: a kill between them leaves the old folder under a
hidden name, which the next write puts back. A staging folder is locked while its run
lives; the next write beside it removes those whose run died, and so do the scratch
folders of killed runs (:func:`locked_folder`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import glob
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from sim2real.errors import UsageError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no locks, stale folders are left alone
    fcntl = None  # type: ignore[assignment]

__all__ = ["SCRATCH_PREFIX", "atomic_files", "check_target", "link_tree", "locked_folder",
           "remove_dead"]

_STAGING = ".tmp"
# A run's temporary files (sim2real._scratch); beside the output folder by default.
SCRATCH_PREFIX = ".sim2real-scratch-"
_OLD = ".old"
_RENAME_EXCHANGE = 2


@contextlib.contextmanager
def atomic_files(target: Path, *, replace: bool = False) -> Iterator[Path]:
    """Yield a staging folder whose files land in ``target`` only if the block succeeds.

    The staging folder lies beside ``target`` (same filesystem, so landing is a rename). On
    an exception, a Ctrl-C or a kill, ``target`` stays exactly as it was.

    Args:
        target: the folder to write.
        replace: the staging folder becomes the whole new ``target`` (a dataset);
            otherwise the files already in ``target`` and not staged are kept (an output
            folder that holds other runs' outputs), still landing in one swap.
    """
    target = _real(Path(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    _clean_stale(target)
    staging, lock = _new_staging(target)
    try:
        yield staging
        staged = list(staging.iterdir())
        if not target.exists():
            staging.rename(target)
        elif not replace and len(staged) == 1 and staged[0].is_file():
            staged[0].replace(target / staged[0].name)  # one file: its rename is atomic
        else:
            if not replace:
                link_tree(target, staging, skip=_relative_files(staging))
            _swap(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # after a swap it holds the old target
        if lock is not None:
            os.close(lock)


def check_target(target: Path, known: frozenset[str]) -> None:
    """Check before any work that ``target`` can receive a run's outputs.

    ``target`` may be missing (it is created), empty, or an earlier run's folder: every
    file in it (subfolders included) one of the ``known`` output names. Its stale staging
    folders are removed on the way.

    Raises:
        UsageError: ``target`` is a file or under one, cannot be written, holds the current
            folder, or holds files that sim2real did not write.
    """
    target = _real(Path(target).absolute())
    if target.exists() and not target.is_dir():
        raise UsageError(f"output folder {target} is a file; give a folder")
    parent = next(p for p in target.parents if p.exists())  # where the staging folder goes
    if not parent.is_dir():
        raise UsageError(f"output folder {target} is under the file {parent}; give a folder")
    if Path.cwd().resolve().is_relative_to(target.resolve()):
        msg = f"output folder {target} holds the current folder; give a folder below it"
        raise UsageError(msg)
    try:
        probe = parent / f".sim2real-probe-{secrets.token_hex(4)}"
        probe.mkdir()
        probe.rmdir()
    except OSError as err:
        raise UsageError(f"output folder {target} cannot be written: {err.strerror}") from err
    _clean_stale(target)
    if target.exists():
        foreign = sorted(p for p in _relative_files(target)
                         if Path(p).name not in known and not Path(p).name.startswith("."))
        if foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            msg = (f"output folder {target} holds files sim2real did not write ({shown}); "
                   "give a new folder or an earlier run's folder")
            raise UsageError(msg)


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


def _real(target: Path) -> Path:
    """A target given through a symbolic link (``latest -> runs/w09``) is the folder it
    names: the link stays, the folder is swapped."""
    return target.resolve() if target.is_symlink() else target


def _relative_files(root: Path) -> frozenset[str]:
    return frozenset(p.relative_to(root).as_posix() for p in root.rglob("*")
                     if not p.is_dir() or p.is_symlink())


def _new_staging(target: Path) -> tuple[Path, int | None]:
    """A fresh hidden folder beside ``target`` (made like any folder, so the umask applies;
    an existing target's permissions carry over), locked for as long as this run lives."""
    while True:
        staging = target.with_name(f".{target.name}.{secrets.token_hex(6)}{_STAGING}")
        try:
            staging.mkdir()
            break
        except FileExistsError:
            continue
    if target.is_dir():
        staging.chmod(target.stat().st_mode & 0o7777)
    return staging, locked_folder(staging)


def locked_folder(folder: Path) -> int | None:
    """Lock ``folder`` for as long as this process lives (or until the returned descriptor
    is closed): :func:`remove_dead` leaves it alone meanwhile, and removes it once the
    process died without cleaning up (a kill)."""
    if fcntl is None:  # pragma: no cover
        return None
    lock = os.open(folder, os.O_RDONLY)
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return lock


def remove_dead(parent: Path, pattern: str) -> None:
    """Remove the folders of ``parent`` matching ``pattern`` that no live run has locked."""
    if fcntl is None:  # pragma: no cover
        return
    for folder in parent.glob(pattern):
        try:
            fd = os.open(folder, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # a live run's
        finally:
            os.close(fd)
        shutil.rmtree(folder, ignore_errors=True)


def _clean_stale(target: Path) -> None:
    """Remove the staging and scratch folders of dead runs beside ``target``; put back a
    target that a kill between the two renames of :func:`_swap`'s fallback left under its
    hidden name."""
    if fcntl is None:  # pragma: no cover
        return
    for old in sorted(target.parent.glob(f".{glob.escape(target.name)}.*{_OLD}")):
        if target.exists():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.rename(target)
    remove_dead(target.parent, f".{glob.escape(target.name)}.*{_STAGING}")
    remove_dead(target.parent, f"{SCRATCH_PREFIX}*")


def _swap(staging: Path, target: Path) -> None:
    """Exchange the two folders: ``target`` gets the staged content, ``staging`` the old."""
    if _exchange(staging, target):
        return
    old = target.with_name(f".{target.name}.{secrets.token_hex(6)}{_OLD}")
    target.rename(old)
    try:
        staging.rename(target)
    except BaseException:
        old.rename(target)
        raise
    old.rename(staging)  # removed with the staging folder


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one system call; ``False`` where the system cannot."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    at_fdcwd = -100
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):  # kernel or filesystem lacks it
        return False
    raise OSError(code, os.strerror(code), str(b))


@functools.cache
def _renameat2() -> Callable[..., int] | None:
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                         ctypes.c_uint]
    function.restype = ctypes.c_int
    return function

"""Find the run folders under a workspace and load them, reading only.

A run is a folder holding ``report.json`` or ``validation.json``. Runs are found by
walking the workspace without following symbolic links and are looked up by name from
that list, so no part of a URL is ever joined onto a filesystem path.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sim2real.errors import ReportError
from sim2real.report import Report, Validation
from sim2real.report.snapshot import REPORT_JSON, SIGNATURES, TRACES, VALIDATION_JSON

__all__ = ["REPORT_FILES", "Run", "RunStore"]

# The files a report is read from.
REPORT_FILES = (REPORT_JSON, SIGNATURES, TRACES)

_SKIP = {"__pycache__", "node_modules", "site-packages"}
_MAX_DEPTH = 3


@dataclass(frozen=True)
class Run:
    """One run folder: its URL name, where it is, and what it holds."""

    name: str
    path: Path
    has_report: bool
    has_validation: bool
    mtime: float


def _plain_file(path: Path) -> bool:
    """A regular file that is not a link (a link could point outside the workspace)."""
    return path.is_file() and not path.is_symlink()


def _as_run(name: str, path: Path) -> Run | None:
    report, validation = _plain_file(path / REPORT_JSON), _plain_file(path / VALIDATION_JSON)
    if not (report or validation):
        return None
    stamps = [
        (path / f).stat().st_mtime for f in (REPORT_JSON, VALIDATION_JSON) if (path / f).exists()
    ]
    return Run(name, path, report, validation, max(stamps))


def discover(root: Path) -> list[Run]:
    """Every run under ``root`` (``root`` itself may be one), newest first."""
    root = root.resolve()
    found: list[Run] = []
    own = _as_run(root.name or "run", root)
    if own:
        found.append(own)
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            # hidden folders include the half-written staging folders of a run being saved
            if entry.name.startswith(".") or entry.name in _SKIP:
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
            path = Path(entry.path)
            run = _as_run(path.relative_to(root).as_posix(), path)
            if run:
                found.append(run)
            elif depth + 1 < _MAX_DEPTH:
                stack.append((path, depth + 1))
    names: set[str] = set()
    unique = []
    for run in found:
        if run.name not in names:  # the root's own name may repeat a child's: first wins
            names.add(run.name)
            unique.append(run)
    return sorted(unique, key=lambda r: (-r.mtime, r.name))


class RunStore:
    """The runs of one workspace, loaded on demand and reloaded when their files change.

    What is built from a run's files (its models, its rendered pages) is kept until one of
    those files changes; concurrent requests for the same thing wait for one build.
    """

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], tuple[tuple[tuple[int, int, int], ...], object]] = {}
        self._building: dict[tuple[str, str], threading.Lock] = {}

    def runs(self) -> list[Run]:
        """The runs as they are on disk now."""
        return discover(self.root)

    def get(self, name: str) -> Run | None:
        """The run called ``name`` in the current list, else ``None``."""
        return next((r for r in self.runs() if r.name == name), None)

    def latest_report(self) -> Run | None:
        """The newest run that holds a report."""
        return next((r for r in self.runs() if r.has_report), None)

    def _stamp(self, run: Run, files: tuple[str, ...]) -> tuple[tuple[int, int, int], ...]:
        stamps: list[tuple[int, int, int]] = []
        for f in files:
            path = run.path / f
            if path.is_symlink():
                msg = f"{run.name}/{f}: a symbolic link; the dashboard reads only plain files"
                raise ReportError(msg)
            try:
                stat = path.stat()
            except OSError:  # absent, or removed between the listing and now
                stamps.append((-1, -1, -1))
                continue
            # the inode too: a run saved again is a new folder of new files (or links)
            stamps.append((stat.st_mtime_ns, stat.st_ino, stat.st_size))
        return tuple(stamps)

    def cached(
        self, run: Run, kind: str, files: tuple[str, ...], build: Callable[[], object]
    ) -> object:
        """``build()``'s result for ``run``, built again only once one of ``files`` changed."""
        stamp = self._stamp(run, files)
        key = (run.name, kind)
        with self._lock:
            hit = self._cache.get(key)
            if hit and hit[0] == stamp:
                return hit[1]
            gate = self._building.setdefault(key, threading.Lock())
        with gate:
            with self._lock:
                hit = self._cache.get(key)
            if hit and hit[0] == stamp:  # built by the request this one waited for
                return hit[1]
            value = build()
            with self._lock:
                self._cache[key] = (stamp, value)
        return value

    def report(self, run: Run) -> Report:
        """The run's report (raises :class:`ReportError` when it cannot be read)."""
        value = self.cached(run, "report", REPORT_FILES, lambda: Report.load(run.path))
        assert isinstance(value, Report)
        return value

    def validation(self, run: Run) -> Validation:
        """The run's validation (raises :class:`ReportError` when it cannot be read)."""
        value = self.cached(run, "validation", (VALIDATION_JSON,),
                            lambda: Validation.load(run.path))
        assert isinstance(value, Validation)
        return value

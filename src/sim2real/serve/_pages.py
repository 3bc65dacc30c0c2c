"""Pages rendered in a worker process, so that the API never waits on a render.

Rendering a big report takes seconds of pure-Python work; in the server's own process it
would hold the interpreter's lock and slow every API request meanwhile. One worker
process (started on the first page, shared by every app of this process) renders from the
run's folder; the app keeps what it returns until the run's files change.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from sim2real.errors import ReportError

__all__ = ["render_page"]

_POOL: ProcessPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def render_page(folder: Path, kind: str, nav: Sequence[tuple[str, str]],
                plotly_src: str) -> str:
    """The ``report`` or ``validation`` page of the run in ``folder``, rendered elsewhere.

    Raises:
        ReportError: the run cannot be read.
    """
    try:
        return _pool().submit(_render, folder, kind, tuple(nav), plotly_src).result()
    except BrokenProcessPool as err:
        _reset()
        raise ReportError(f"{folder}: the page renderer stopped ({err}); reload the page") \
            from err


def _reset() -> None:
    global _POOL
    with _POOL_LOCK:
        _POOL = None


def _pool() -> ProcessPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            # spawned, not forked: the server runs threads, and a fork copies their locks
            _POOL = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"))
        return _POOL


def _render(folder: Path, kind: str, nav: tuple[tuple[str, str], ...], plotly_src: str) -> str:
    from sim2real.report.html import render_report, render_validation
    from sim2real.report.snapshot import Report, Validation

    if kind == "report":
        return render_report(Report.load(folder), plotly_src=plotly_src, nav=nav)
    return render_validation(Validation.load(folder), plotly_src=plotly_src, nav=nav)

"""Processes on this machine: forked workers that inherit the shared object for free."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

__all__ = ["LocalExecutor"]

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")

# Set just before the pool forks, so the children see it without pickling it.
_SHARED: dict[str, Any] = {}


class LocalExecutor:
    """Runs calls in forked worker processes (serially where only one CPU or one item).

    Fork is used, where the platform has it, because the shared object (a rollout bank of
    hundreds of megabytes) is then inherited copy-on-write instead of pickled per worker.

    Args:
        workers: processes; default ``os.cpu_count()``.
    """

    def __init__(self, workers: int | None = None) -> None:
        self._workers = workers or os.cpu_count() or 1

    @property
    def workers(self) -> int:
        return self._workers

    @property
    def remote(self) -> bool:
        return False

    def map_shared(self, fn: Callable[[S, T], R], shared: S, items: Sequence[T]) -> list[R]:
        """``[fn(shared, item) for item in items]``, in item order."""
        n = min(self._workers, len(items))
        if n <= 1 or "fork" not in mp.get_all_start_methods():
            return [fn(shared, item) for item in items]
        _SHARED["value"] = shared
        ctx = mp.get_context("fork")
        pool = ProcessPoolExecutor(n, mp_context=ctx, initializer=_ignore_interrupts)
        try:
            return list(pool.map(_call, [fn] * len(items), items))
        except BaseException:
            # A Ctrl-C (or any failure) stops the workers now, not after the queued items.
            pool.shutdown(wait=False, cancel_futures=True)
            for process in list(getattr(pool, "_processes", {}).values()):
                process.terminate()
            raise
        finally:
            pool.shutdown(wait=True)
            _SHARED.clear()


def _ignore_interrupts() -> None:
    """Workers leave a Ctrl-C to their parent, which stops them (and prints one line)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _call(fn: Callable[[Any, Any], Any], item: Any) -> Any:
    return fn(_SHARED["value"], item)

"""Run episode specs over worker processes, in order, with a progress bar."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor

import mujoco
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sim2real.demo.episode import EpisodeResult
from sim2real.demo.plan import EpisodeSpec, run_spec

__all__ = ["EpisodeRunner"]

_CHUNK = 12  # episodes per task: amortises pickling without starving a worker


def _run_chunk(specs: Sequence[EpisodeSpec]) -> list[EpisodeResult]:
    return [run_spec(s) for s in specs]


def _silence_mujoco() -> None:
    # The episode monitor reads MuJoCo's warning counters itself (an unstable object is
    # a failure), so the printed warnings would only scribble over the progress bar.
    mujoco.set_mju_user_warning(lambda _msg: None)


@contextlib.contextmanager
def _silenced() -> Iterator[None]:
    previous = mujoco.get_mju_user_warning()
    _silence_mujoco()
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)


class EpisodeRunner:
    """Runs batches of episodes in-process (``workers=1``) or over a process pool.

    Every episode carries its own seed, so the results are the same for any worker count.
    Use as a context manager so the pool is shut down.
    """

    def __init__(self, workers: int | None = None, progress: bool = True) -> None:
        self.workers = max(1, workers if workers is not None else (os.cpu_count() or 1))
        self.progress = progress
        self._pool: Executor | None = None

    def __enter__(self) -> EpisodeRunner:
        if self.workers > 1:
            # fork: workers inherit the imported modules, which start-up dominates otherwise
            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx,
                                             initializer=_silence_mujoco)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)

    def run(self, specs: Sequence[EpisodeSpec], label: str) -> list[EpisodeResult]:
        """Run ``specs`` and return their results in the same order."""
        chunks = [specs[i:i + _CHUNK] for i in range(0, len(specs), _CHUNK)]
        if self._pool is None:
            futures: list[Future[list[EpisodeResult]]] | None = None
        else:
            # Submitted before the progress bar starts its thread: workers fork first.
            futures = [self._pool.submit(_run_chunk, c) for c in chunks]
        results: list[EpisodeResult] = []
        with _silenced(), Progress(TextColumn("{task.description}"), BarColumn(),
                                   MofNCompleteColumn(), TimeElapsedColumn(),
                                   disable=not self.progress) as bar:
            task = bar.add_task(label, total=len(specs))
            for i, chunk in enumerate(chunks):
                done = _run_chunk(chunk) if futures is None else futures[i].result()
                results.extend(done)
                bar.advance(task, len(done))
        return results

"""Nearest simulation rollouts of a real failure: near in context, start and trajectory."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numba
import numpy as np

from sim2real.match.context import ContextTable
from sim2real.match.grid import SignalGrid
from sim2real.match.index import PREFILTER_MIN_ROLLOUTS, CandidateQuery, DescriptorIndex

__all__ = ["Match", "RolloutBank", "RolloutMatcher", "context_scale", "family_weights",
           "window_times"]

# Candidate values (pairs x points x channels) interpolated at once when scoring pairs:
# ~16 MB of float32, a few times that in float64 temporaries.
_BLOCK_VALUES = 1 << 22


@dataclass(frozen=True)
class RolloutBank:
    """Simulation rollouts ready to be matched.

    Attributes:
        grid: the rollouts' channels on the shared time grid.
        tasks: ``(n,)`` task of each rollout.
        failed: ``(n,)`` whether the rollout failed.
        failure_time: ``(n,)`` seconds; NaN where it did not fail or the time is unknown.
        context: the rollouts' ``ctx.*`` columns.
        families: each grid channel's family (perception, dynamics...); empty: one family.
    """

    grid: SignalGrid
    tasks: np.ndarray
    failed: np.ndarray
    failure_time: np.ndarray
    context: ContextTable
    families: tuple[str, ...] = ()

    def end_times(self, rows: np.ndarray, query_end: float | np.ndarray) -> np.ndarray:
        """Where each rollout's comparison window ends for a failure at ``query_end`` (one
        time, or one per row of ``rows``, broadcast).

        A failed rollout is compared at its own failure (a real failure that looks like
        it then scores low); a successful one at the same time since start as the query.
        """
        dur = self.grid.durations[rows]
        own = np.where(np.isfinite(self.failure_time[rows]), self.failure_time[rows], dur)
        return np.where(self.failed[rows], own, np.minimum(query_end, dur))

    def task_rows(self, task: str) -> np.ndarray:
        """The rows of ``task``'s rollouts, ascending (none for a task sim never ran)."""
        return self._task_rows.get(task, np.zeros(0, np.int64))

    @cached_property
    def _task_rows(self) -> dict[str, np.ndarray]:
        tasks, task_of = np.unique(self.tasks.astype(str), return_inverse=True)
        return {str(t): np.flatnonzero(task_of == k) for k, t in enumerate(tasks)}


@dataclass(frozen=True)
class Match:
    """The ``k`` nearest rollouts of one query, nearest first.

    Attributes:
        rows: ``(k,)`` rows of the bank.
        distances: ``(k,)`` combined distances.
        windows: ``(k, n_points, n_channels)`` the rollouts' values over their windows.
    """

    rows: np.ndarray
    distances: np.ndarray
    windows: np.ndarray


def window_times(end: np.ndarray, length: float | np.ndarray, n_points: int) -> np.ndarray:
    """``(*end.shape, n_points)`` sample times of windows of ``length`` seconds (one length,
    or one per window, broadcast against ``end``) ending at ``end``."""
    start = np.maximum(np.asarray(end, dtype=float) - length, 0.0)
    frac = np.linspace(0.0, 1.0, n_points)
    return start[..., None] + (np.asarray(end, dtype=float) - start)[..., None] * frac


class RolloutMatcher:
    """k-nearest simulation rollouts of the same task, by a combined distance.

    The distance adds three mean squared differences, each in units of the sim's own spread:
    the trajectory over the window before the failure (channels sim records), the initial
    state (first grid sample), and the context (a categorical mismatch counts 1). Every
    channel family weighs the same in the first two, however many channels it has: a robot
    that logs a dozen joint signals and four camera statistics is not matched on its joints
    alone, so the matches are near in what the camera saw too.

    Args:
        n_neighbors: rollouts returned per query.
        n_points: samples per window.
        context_weight: weight of the context term.
        initial_weight: weight of the initial-state term.
        symptom_weight: penalty for a rollout whose failure label differs from the query's.
    """

    def __init__(
        self,
        n_neighbors: int = 5,
        n_points: int = 32,
        context_weight: float = 1.0,
        initial_weight: float = 0.5,
        symptom_weight: float = 0.25,
    ) -> None:
        self.n_neighbors = n_neighbors
        self.n_points = n_points
        self.context_weight = context_weight
        self.initial_weight = initial_weight
        self.symptom_weight = symptom_weight

    def fit(self, bank: RolloutBank) -> RolloutMatcher:
        """Learn each channel's spread and each context number's spread over the rollouts."""
        values = bank.grid.values
        if values.shape[0] > PREFILTER_MIN_ROLLOUTS:
            scale, self.initial_ = _spread_and_start(bank.grid)
        else:
            scale = np.nanstd(values.reshape(-1, values.shape[-1]), axis=0)
            self.initial_ = np.array(values[:, 0, :])
        self.scale_ = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
        self.weights_ = family_weights(bank.families, values.shape[-1])
        self.numeric_scale_ = context_scale(bank.context)
        self.bank_ = bank
        # Only a bank with a large task gets the prefilter; smaller ones keep the exact scan.
        tasks, per_task = np.unique(bank.tasks.astype(str), return_counts=True)
        self.large_tasks_ = frozenset(
            str(t) for t, n in zip(tasks, per_task, strict=True) if n > PREFILTER_MIN_ROLLOUTS)
        self.index_ = DescriptorIndex().fit(self) if self.large_tasks_ else None
        return self

    def uses_index(self, task: str) -> bool:
        """Whether queries of ``task`` go through the prefilter (its rollouts are many)."""
        return task in self.large_tasks_

    def query(
        self,
        window: np.ndarray,
        initial: np.ndarray,
        context: ContextTable,
        context_row: int,
        task: str,
        end: float,
        length: float,
        exclude: int | None = None,
        candidates: np.ndarray | None = None,
    ) -> Match:
        """The nearest rollouts of one failure.

        Args:
            window: ``(n_points, n_channels)`` the query over its window, bank channel order.
            initial: ``(n_channels,)`` the query's first grid sample.
            context: a context table holding the query at ``context_row``.
            task: rollouts of other tasks are never matched.
            end: failure time, seconds from the query's start.
            length: window length in seconds.
            exclude: a bank row to leave out (the query itself, when calibrating on sim).
            candidates: bank rows of ``task`` to score, in increasing order (from
                :meth:`DescriptorIndex.candidates`); ``None`` scores every rollout.

        Returns:
            The :class:`Match`; empty when the task has no rollouts.
        """
        ask = CandidateQuery(window, initial, context_row, task, end, length, exclude)
        return self.query_many([ask], context, [candidates])[0]

    def query_many(self, queries: Sequence[CandidateQuery], context: ContextTable,
                   candidates: Sequence[np.ndarray | None]) -> list[Match]:
        """:meth:`query` for many failures (the same numbers, query by query).

        Every (query, rollout) pair is measured by :meth:`pair_distances`.

        Args:
            queries: the failures, as the prefilter takes them.
            context: a context table holding every query at its ``context_row``.
            candidates: per query, the bank rows to score (``None``: every rollout of its
                task).
        """
        bank = self.bank_
        rows_of = []
        for q, rows in zip(queries, candidates, strict=True):
            if rows is None:
                rows = bank.task_rows(q.task)
            rows_of.append(rows if q.exclude is None else rows[rows != q.exclude])
        which = np.repeat(np.arange(len(queries)), [rows.size for rows in rows_of])
        totals = self.pair_distances(queries, context, which,
                                     np.concatenate([np.zeros(0, np.int64), *rows_of]))
        bounds = np.cumsum([0] + [rows.size for rows in rows_of])
        return [self.nearest(q, rows, totals[a:b])
                for q, rows, a, b in zip(queries, rows_of, bounds[:-1], bounds[1:], strict=True)]

    def nearest(self, query: CandidateQuery, rows: np.ndarray, totals: np.ndarray) -> Match:
        """The :class:`Match` of ``query`` among ``rows`` (increasing bank rows) at the
        combined distances ``totals``: the ``n_neighbors`` smallest, ties to the lower row."""
        nearest = np.argsort(totals, kind="stable")[: min(self.n_neighbors, rows.size)]
        found = rows[nearest]
        return Match(found, totals[nearest], self.windows(found, query.end, query.length))

    def windows(self, rows: np.ndarray, end: float | np.ndarray,
                length: float | np.ndarray) -> np.ndarray:
        """``(len(rows), n_points, n_channels)`` the windows of bank ``rows`` that a failure
        at ``end`` with a window of ``length`` seconds is compared with (one of each, or
        one per row)."""
        times = window_times(self.bank_.end_times(rows, end), length, self.n_points)
        return self.bank_.grid.at(rows, times)

    def pair_distances(self, queries: Sequence[CandidateQuery], context: ContextTable,
                       which: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``(n_pairs,)`` the combined distance (the class docstring) of each query
        ``queries[which[p]]`` to bank row ``rows[p]``; every pair's number depends on that
        pair alone. Interpolated in blocks of bounded size."""
        bank = self.bank_
        n_ch = bank.grid.values.shape[-1]
        out = np.empty(rows.size)
        if rows.size == 0:
            return out
        windows = np.stack([q.window for q in queries])
        initials = np.stack([q.initial for q in queries])
        ends = np.array([q.end for q in queries], dtype=float)
        lengths = np.array([q.length for q in queries], dtype=float)
        context_rows = np.array([q.context_row for q in queries], dtype=np.int64)
        bank_symptoms = bank.context.symptom
        symptoms = (None if context.symptom is None or bank_symptoms is None
                    else context.symptom[context_rows])
        unit = np.sqrt(self.weights_) / self.scale_
        step = max(1, _BLOCK_VALUES // (self.n_points * n_ch))
        for start in range(0, rows.size, step):
            r, w = rows[start : start + step], which[start : start + step]
            times = window_times(bank.end_times(r, ends[w]), lengths[w], self.n_points)
            traj = _mean_sq(((bank.grid.at(r, times) - windows[w]) * unit).reshape(r.size, -1))
            init = _mean_sq(((self.initial_[r] - initials[w]) * unit).reshape(r.size, 1, n_ch))
            ctx = context.pair_distances(context_rows[w], bank.context, r, self.numeric_scale_)
            total = traj + self.initial_weight * init + self.context_weight * ctx
            if symptoms is not None and bank_symptoms is not None:
                # A real failure that sim also shows (the same symptom, a similar run) must
                # meet those sim failures, so that only what sim cannot explain remains.
                mine = symptoms[w]
                labelled = np.array([m is not None for m in mine], dtype=bool)
                penalty = self.symptom_weight * (bank_symptoms[r] != mine)
                total = np.where(labelled, total + penalty, total)
            out[start : start + r.size] = total
        return out


def context_scale(context: ContextTable) -> dict[str, float]:
    """Each numeric context column's spread over the rollouts (1 where it has none)."""
    return {k: float(np.nanstd(v)) or 1.0 for k, v in context.numeric.items()}


def family_weights(families: tuple[str, ...], n_channels: int) -> np.ndarray:
    """``(n_channels,)`` weights, mean 1, that give every family the same total weight."""
    if not families:
        return np.ones(n_channels)
    names = np.array(families)
    _, inverse, counts = np.unique(names, return_inverse=True, return_counts=True)
    weights = 1.0 / counts[inverse]
    return weights / weights.mean()


def _mean_sq(diff: np.ndarray) -> np.ndarray:
    """Mean of squares over all but the first axis, ignoring NaN (unrecorded) entries."""
    rows = np.ascontiguousarray(diff.reshape(diff.shape[0], -1))
    total, count = _finite_square_sums(rows)
    return np.where(count > 0, total / np.maximum(count, 1), np.inf)


@numba.njit(nogil=True, cache=True)
def _finite_square_sums(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    # Per row: the finite squares summed as NumPy's sum does (pairwise, below), their count.
    # In the input's precision, as NumPy squares and sums it.
    n, m = rows.shape
    total, count = np.empty(n, dtype=rows.dtype), np.zeros(n, dtype=np.int64)
    square = np.empty(m, dtype=rows.dtype)
    for r in range(n):
        for i in range(m):
            v = rows[r, i] * rows[r, i]
            if np.isfinite(v):
                square[i] = v
                count[r] += 1
            else:
                square[i] = 0.0
        total[r] = _pairwise_sum(square, 0, m)
    return total, count


@numba.njit(nogil=True, cache=True)
def _pairwise_sum(a: np.ndarray, lo: int, n: int) -> np.floating:  # pragma: no cover
    # NumPy's pairwise summation of a contiguous run (numpy/_core/src/umath/loops_utils.h):
    # runs of at most 128 summed with eight running sums, longer runs split in halves (at
    # a multiple of 8) and the halves' sums added. The same additions in the same order,
    # so the same bits as ``a[lo:lo + n].sum()``. The halving is walked with an explicit
    # stack: numba's cache does not reload recursive functions safely.
    starts, sizes, states = np.empty(64, np.int64), np.empty(64, np.int64), np.empty(64, np.int64)
    sums = np.empty(64, dtype=a.dtype)
    depth, filled = 0, 0
    starts[0], sizes[0], states[0] = lo, n, 0
    while depth >= 0:
        first, size = starts[depth], sizes[depth]
        if size <= 128:
            sums[filled] = _block_sum(a, first, size)
            filled += 1
            depth -= 1
            continue
        half = size // 2
        half -= half % 8
        if states[depth] == 0:
            states[depth] = 1
            depth += 1
            starts[depth], sizes[depth], states[depth] = first, half, 0
        elif states[depth] == 1:
            states[depth] = 2
            depth += 1
            starts[depth], sizes[depth], states[depth] = first + half, size - half, 0
        else:
            filled -= 1
            sums[filled - 1] = sums[filled - 1] + sums[filled]
            depth -= 1
    return sums[0]


@numba.njit(nogil=True, cache=True)
def _block_sum(a: np.ndarray, lo: int, n: int) -> np.floating:  # pragma: no cover
    if n < 8:
        res = a.dtype.type(0.0)
        for i in range(n):
            res += a[lo + i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    while i < n - (n % 8):
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


def _spread_and_start(grid: SignalGrid, chunk: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """``(n_channels,)`` NaN-ignoring standard deviation of a large grid's values, and a
    copy of every row's first sample, in one scan of the rows (:meth:`SignalGrid.scan`).

    Float64 sums over chunks of rollouts in one compiled pass, instead of ``np.nanstd``'s
    several full-size temporaries (same value up to rounding). The first samples are a
    copy: a view would read a page of every row of a bank mapped from disk at every use.
    """
    n_ch = grid.values.shape[2]
    count, total, squares = np.zeros(n_ch), np.zeros(n_ch), np.zeros(n_ch)
    starts = []
    for rows in grid.scan(chunk):
        _chunk_sums(grid.values[rows], chunk, count, total, squares)
        starts.append(np.array(grid.values[rows, 0, :]))
    mean = total / np.maximum(count, 1)
    var = np.maximum(squares / np.maximum(count, 1) - mean**2, 0.0)
    return (np.where(count > 0, np.sqrt(var), np.nan),
            np.concatenate([np.zeros((0, n_ch), grid.values.dtype), *starts]))


@numba.njit(nogil=True, cache=True)
def _chunk_sums(values: np.ndarray, chunk: int, count: np.ndarray, total: np.ndarray,
                squares: np.ndarray) -> None:  # pragma: no cover
    # Per chunk of rollouts, finite entries summed in row order, then the chunk sums added
    # to the running sums: the additions, in order, of the NumPy version it replaced.
    n_ch = values.shape[2]
    for start in range(0, values.shape[0], chunk):
        part_count, part_total, part_squares = np.zeros(n_ch), np.zeros(n_ch), np.zeros(n_ch)
        for i in range(start, min(start + chunk, values.shape[0])):
            for s in range(values.shape[1]):
                for c in range(n_ch):
                    v = np.float64(values[i, s, c])
                    if np.isfinite(v):
                        part_count[c] += 1.0
                        part_total[c] += v
                        part_squares[c] += v * v
        count += part_count
        total += part_total
        squares += part_squares

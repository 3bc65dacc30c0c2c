"""Prefilter for the matcher: coarse windows of every rollout, searched by a matrix product.

The exact matcher scores every rollout of a task on ``n_points`` interpolated samples of
every channel. For a bank of tens of thousands of rollouts that is most of the analysis, so
above :data:`PREFILTER_MIN_ROLLOUTS` the matcher first ranks rollouts by the same distance
computed on ``n_coarse`` of those samples (a flat L2 index over per-rollout descriptors:
the scaled coarse window, the scaled initial state and an embedding of the context) and
scores exactly only the best ``n_candidates``. Queries are grouped by their window (rounded
to ``end_quantum`` seconds), because a rollout's window depends on the query's failure time.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numba
import numpy as np
from threadpoolctl import ThreadpoolController

from sim2real.match.context import ContextTable

if TYPE_CHECKING:
    from sim2real.match.matcher import RolloutMatcher

__all__ = [
    "PREFILTER_MIN_ROLLOUTS",
    "CandidateQuery",
    "DescriptorIndex",
    "FlatIndex",
    "coarse_descriptors",
    "merge_shortlists",
    "paa_descriptors",
]

# Below this many rollouts of a task the exact scan is cheap and stays the only path, so
# small datasets give byte-identical results with or without the index.
PREFILTER_MIN_ROLLOUTS = 2000

# Queries whose approximate distances to a group's rollouts are computed together.
_QUERY_BLOCK = 64

_BLAS = ThreadpoolController()


class CandidateQuery(NamedTuple):
    """One query, as the index needs it.

    Attributes:
        window: ``(n_points, n_channels)`` the query's window, bank channel order.
        initial: ``(n_channels,)`` its first grid sample.
        context_row: its row in the query context table.
        task: rollouts of other tasks are never candidates.
        end: failure time, seconds.
        length: window length, seconds.
        exclude: a bank row to leave out, or ``None``.
    """

    window: np.ndarray
    initial: np.ndarray
    context_row: int
    task: str
    end: float
    length: float
    exclude: int | None


class DescriptorIndex:
    """Candidate rollouts per query from coarse descriptors (see the module docstring).

    Args:
        n_coarse: window samples kept in a descriptor (of the matcher's ``n_points``).
        n_candidates: rollouts handed to the exact distance per query.
        end_quantum: queries whose failure times round to the same multiple of this many
            seconds share one descriptor matrix.
    """

    def __init__(self, n_coarse: int = 8, n_candidates: int = 64,
                 end_quantum: float = 0.2) -> None:
        self.n_coarse = n_coarse
        self.n_candidates = n_candidates
        self.end_quantum = end_quantum

    def fit(self, matcher: RolloutMatcher) -> DescriptorIndex:
        """Remember the fitted matcher (its bank, spreads and weights)."""
        self.matcher_ = matcher
        return self

    def group_key(self, task: str, end: float, length: float) -> tuple[str, int, int]:
        """Queries with the same key (task, failure time and window length rounded to
        ``end_quantum``) share one matrix of rollout descriptors."""
        return (task, round(end / self.end_quantum), round(length / self.end_quantum))

    def shortlist(self, queries: Sequence[CandidateQuery], context: ContextTable,
                  rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each query's ``n_candidates`` nearest of ``rows`` (rollouts of the queries' one
        task, a block of them) by the approximate distance.

        Returns:
            ``(n_queries, k)`` bank rows and ``(n_queries, k)`` their approximate
            distances (a query's own ``exclude`` row at infinity), ``k`` the smaller of
            ``n_candidates`` and ``rows.size``; merge blocks with :func:`merge_shortlists`.
        """
        k = min(self.n_candidates, rows.size)
        best_rows = np.empty((len(queries), k), dtype=np.int64)
        best = np.empty((len(queries), k))
        groups: dict[tuple[str, int, int], list[int]] = {}
        for i, q in enumerate(queries):
            groups.setdefault(self.group_key(q.task, q.end, q.length), []).append(i)
        bank_context = self.matcher_.bank_.context.take(rows)
        vectors = self._query_vectors(queries)
        for (_, end_q, length_q), members in sorted(groups.items()):
            end, length = end_q * self.end_quantum, length_q * self.end_quantum
            base = self._descriptors(rows, end, max(length, self.end_quantum))
            norms = np.einsum("ij,ij->i", base, base)
            # Blocks of queries: each product reads the descriptors once for the block, and
            # the (block, n_rows) distance matrices stay small.
            for start in range(0, len(members), _QUERY_BLOCK):
                block = members[start : start + _QUERY_BLOCK]
                total = self._approximate([queries[i] for i in block], vectors[block],
                                          context, rows, bank_context, base, norms)
                pick = (np.argpartition(total, k - 1, axis=1)[:, :k] if k < rows.size
                        else np.broadcast_to(np.arange(rows.size), total.shape))
                best_rows[block] = rows[pick]
                best[block] = np.take_along_axis(total, pick, axis=1)
        return best_rows, best

    def _coarse_fractions(self) -> np.ndarray:
        n_points = self.matcher_.n_points
        return np.linspace(0.0, 1.0, n_points)[self._coarse()]

    def _coarse(self) -> np.ndarray:
        n_points = self.matcher_.n_points
        return np.unique(np.linspace(0, n_points - 1, self.n_coarse).round().astype(np.int64))

    def _descriptors(self, rows: np.ndarray, end: float, length: float) -> np.ndarray:
        """``(n_rows, n_features)`` float32 coarse windows then initial states, scaled."""
        m = self.matcher_
        bank = m.bank_
        stop = bank.end_times(rows, end)
        start = np.maximum(stop - length, 0.0)
        times = start[:, None] + (stop - start)[:, None] * self._coarse_fractions()[None, :]
        # Interpolated, as the exact distance reads the window: the nearest grid sample
        # (off by up to half a step) missed twice as many of the exact nearest rollouts
        # (recall@5 0.86 against 0.93 on bench fleet s, `bench.prefilter`), same reads.
        windows = bank.grid.at(rows, times)
        scale = (np.sqrt(m.weights_) / m.scale_).astype(np.float32)
        return _scaled_descriptors(windows, m.initial_, rows, scale,
                                   np.float32(self._traj_weight()),
                                   np.float32(self._init_weight()))

    def _query_vectors(self, queries: Sequence[CandidateQuery]) -> np.ndarray:
        """``(n_queries, n_features)`` the queries' descriptors, as :meth:`_descriptors`."""
        m = self.matcher_
        unit = np.sqrt(m.weights_) / m.scale_
        n_ch = unit.size
        windows = np.stack([q.window for q in queries]).reshape(len(queries), -1, n_ch)
        initials = np.stack([q.initial for q in queries]).reshape(len(queries), n_ch)
        coarse = windows[:, self._coarse()] * unit
        vecs = np.concatenate([self._traj_weight() * coarse.reshape(len(queries), -1),
                               self._init_weight() * (initials * unit)],
                              axis=1).astype(np.float32)
        vecs[~np.isfinite(vecs)] = 0.0
        return vecs

    def _traj_weight(self) -> float:
        # The exact distance averages over n_points x n_channels: weight so that the
        # descriptor's squared L2 norm approximates that mean.
        n_ch = self.matcher_.scale_.shape[0]
        return float(1.0 / np.sqrt(self._coarse().size * n_ch))

    def _init_weight(self) -> float:
        n_ch = self.matcher_.scale_.shape[0]
        return float(np.sqrt(self.matcher_.initial_weight / n_ch))

    def _approximate(self, block: list[CandidateQuery], vecs: np.ndarray, context: ContextTable,
                     rows: np.ndarray, bank_context: ContextTable, base: np.ndarray,
                     norms: np.ndarray) -> np.ndarray:
        """``(len(block), rows.size)`` approximate distances of the queries (descriptors
        ``vecs``) to ``rows``: descriptors plus context."""
        m = self.matcher_
        # One BLAS thread: OpenBLAS sums a product in another order with more threads, so
        # the candidates would depend on the machine's cores and on the engine (a Ray
        # worker runs one thread, this process as many as there are cores).
        with _BLAS.limit(limits=1, user_api="blas"):
            products = vecs @ base.T
        approx = norms[None, :] - 2.0 * products + np.einsum("ij,ij->i", vecs, vecs)[:, None]
        own = np.array([q.context_row for q in block], dtype=np.int64)
        total = approx + m.context_weight * context.take(own).distances(bank_context,
                                                                        m.numeric_scale_)
        for j, q in enumerate(block):
            if q.exclude is not None:
                total[j, rows == q.exclude] = np.inf
        return total


def merge_shortlists(parts: Sequence[tuple[np.ndarray, np.ndarray]],
                     k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest per query over several :meth:`DescriptorIndex.shortlist` results
    (blocks of the same task for the same queries): rows and approximate distances."""
    rows = np.concatenate([p[0] for p in parts], axis=1)
    approx = np.concatenate([p[1] for p in parts], axis=1)
    if rows.shape[1] <= k:
        return rows, approx
    pick = np.argpartition(approx, k - 1, axis=1)[:, :k]
    return np.take_along_axis(rows, pick, axis=1), np.take_along_axis(approx, pick, axis=1)


@numba.njit(nogil=True, cache=True)
def _scaled_descriptors(windows: np.ndarray, initial: np.ndarray, rows: np.ndarray,
                        scale: np.ndarray, traj_weight: np.float32,
                        init_weight: np.float32) -> np.ndarray:  # pragma: no cover
    # One pass writing each descriptor: the float32 products of
    # ``traj_weight * (windows[i, j] * scale)``, then ``init_weight * (initial * scale)``,
    # non-finite entries 0 (a channel a rollout lacks says nothing about rank).
    n_ch, n_steps = windows.shape[2], windows.shape[1]
    out = np.empty((rows.size, (n_steps + 1) * n_ch), dtype=np.float32)
    for i in range(rows.size):
        for j in range(n_steps):
            for c in range(n_ch):
                v = traj_weight * (windows[i, j, c] * scale[c])
                out[i, j * n_ch + c] = v if np.isfinite(v) else np.float32(0.0)
        for c in range(n_ch):
            v = init_weight * (initial[rows[i], c] * scale[c])
            out[i, n_steps * n_ch + c] = v if np.isfinite(v) else np.float32(0.0)
    return out


class FlatIndex:
    """Exact L2 search over fixed per-episode descriptors, by one matrix-vector product.

    For banks whose windows do not depend on the query (whole episodes, fixed windows);
    the matcher's own prefilter is :class:`DescriptorIndex`.
    """

    def fit(self, descriptors: np.ndarray) -> FlatIndex:
        """Index ``(n, n_features)`` descriptors (NaN counts as 0)."""
        self.data_ = np.nan_to_num(np.asarray(descriptors, dtype=np.float64))
        self.norms_ = np.einsum("ij,ij->i", self.data_, self.data_)
        return self

    def search_batch(self, queries: np.ndarray, k: int) -> np.ndarray:
        """``(n_queries, k)`` rows of the nearest descriptors, nearest first, by one matrix
        product for all queries (row ``i`` depends on query ``i`` alone up to rounding)."""
        q = np.nan_to_num(np.asarray(queries, dtype=np.float64).reshape(len(queries), -1))
        dist = self.norms_[None, :] - 2.0 * (q @ self.data_.T)
        k = min(k, dist.shape[1])
        best = np.argpartition(dist, k - 1, axis=1)[:, :k]
        order = np.argsort(np.take_along_axis(dist, best, axis=1), axis=1, kind="stable")
        return np.take_along_axis(best, order, axis=1)

    def search(self, query: np.ndarray, k: int) -> np.ndarray:
        """Rows of the ``k`` nearest descriptors to ``query``, nearest first."""
        q = np.nan_to_num(np.asarray(query, dtype=np.float64).ravel())
        dist = self.norms_ - 2.0 * (self.data_ @ q)
        k = min(k, dist.size)
        best = np.argpartition(dist, k - 1)[:k]
        return best[np.argsort(dist[best], kind="stable")]


def coarse_descriptors(windows: np.ndarray, n_coarse: int = 8) -> np.ndarray:
    """``(n, n_coarse * n_channels)`` every ``windows`` ``(n, n_points, n_channels)`` sampled
    at ``n_coarse`` evenly spaced points: the descriptor the prefilter ranks by."""
    idx = np.unique(np.linspace(0, windows.shape[1] - 1, n_coarse).round().astype(np.int64))
    return windows[:, idx, :].reshape(windows.shape[0], -1)


def paa_descriptors(windows: np.ndarray, n_segments: int = 8) -> np.ndarray:
    """``(n, n_segments * n_channels)`` piecewise means of ``windows`` ``(n, n_points, n_ch)``.

    Segment means move little when a trajectory is shifted by a few samples, so their L2
    distance ranks candidates much as DTW does (the usual prefilter for DTW search).
    """
    n, p, c = windows.shape
    edges = np.linspace(0, p, n_segments + 1).round().astype(np.int64)
    parts = [np.nanmean(windows[:, a:b, :], axis=1) for a, b in itertools.pairwise(edges)]
    return np.stack(parts, axis=1).reshape(n, n_segments * c)

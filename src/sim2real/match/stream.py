"""Many failures matched against a large bank, the bank read block by block of rows.

Above :data:`~sim2real.match.index.PREFILTER_MIN_ROLLOUTS` rollouts per task the matcher
shortlists candidates by descriptors, then scores them exactly. Done failure by failure,
both steps read rows from all over the task's bank, and a bank mapped from disk that is
larger than the memory left for it is then read from disk again and again. Here a batch of
failures goes through the bank in row order, one block of rows at a time, twice: each
block's shortlist for every failure (merged over the blocks), then the exact distance of
every (failure, candidate) pair whose row the block holds. What has to stay in memory is
one block per worker, whatever the size of the task.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from sim2real.engine import run_shared
from sim2real.match.context import ContextTable
from sim2real.match.index import CandidateQuery, merge_shortlists

if TYPE_CHECKING:
    from sim2real.engine import Executor
    from sim2real.match.matcher import RolloutMatcher

__all__ = ["Neighbors", "nearest_streamed"]

# Bank bytes per block: two workers' blocks stay in the page cache beside the analysis
# in a few hundred megabytes.
_BLOCK_BYTES = 128 << 20
# Work items per task: consecutive stripes of its rows, each read block by block, so a
# bank of a few hundred megabytes still spreads over the workers.
_STRIPES = 8


class Neighbors(NamedTuple):
    """The nearest rollouts of one query, nearest first.

    Attributes:
        rows: ``(k,)`` rows of the bank.
        distances: ``(k,)`` their combined distances.
    """

    rows: np.ndarray
    distances: np.ndarray


class _Batch(NamedTuple):
    matcher: RolloutMatcher
    queries: Sequence[CandidateQuery]
    context: ContextTable


class _Stripe(NamedTuple):
    """Consecutive rows of one task's rollouts, in blocks, and the numbers of that task's
    queries in the batch."""

    task: str
    blocks: list[np.ndarray]
    queries: np.ndarray


class _Pairs(NamedTuple):
    """(query, candidate) pairs of one stripe, in increasing row order, and the stripe's
    blocks."""

    which: np.ndarray
    rows: np.ndarray
    blocks: list[np.ndarray]


def nearest_streamed(matcher: RolloutMatcher, queries: Sequence[CandidateQuery],
                     context: ContextTable, executor: Executor | None = None) -> list[Neighbors]:
    """The rows and distances :meth:`RolloutMatcher.query` finds through the prefilter, for
    queries of tasks the matcher prefilters, reading the bank block by block.

    Args:
        matcher: fitted, with its :class:`~sim2real.match.index.DescriptorIndex`.
        queries: failures of tasks with many rollouts (:meth:`RolloutMatcher.uses_index`).
        context: a context table holding every query at its ``context_row``.
        executor: runs the stripes in parallel; ``None`` runs them here. Stripes and blocks
            are fixed by the bank alone and a query's result depends on it alone, never on
            how the work was split.
    """
    index = matcher.index_
    assert index is not None, "nearest_streamed needs a matcher with a prefilter"
    batch = _Batch(matcher, queries, context)
    stripes = _stripes(matcher, queries)
    lists = run_shared(executor, _shortlist, batch, stripes)
    candidates: list[np.ndarray] = [np.zeros(0, np.int64)] * len(queries)
    for task in dict.fromkeys(s.task for s in stripes):
        mine = [(s, found) for s, found in zip(stripes, lists, strict=True) if s.task == task]
        rows, _ = merge_shortlists([found for _, found in mine], index.n_candidates)
        for j, found in zip(mine[0][0].queries, rows, strict=True):
            own = queries[j].exclude
            candidates[j] = np.sort(found if own is None else found[found != own])
    which = np.repeat(np.arange(len(queries)), [c.size for c in candidates])
    rows = np.concatenate([np.zeros(0, np.int64), *candidates])
    positions = [_in_stripe(stripe, which, rows) for stripe in stripes]
    totals = np.empty(rows.size)
    scored = run_shared(executor, _pair_totals, batch,
                        [_Pairs(which[at], rows[at], stripe.blocks)
                         for stripe, at in zip(stripes, positions, strict=True)])
    for at, part in zip(positions, scored, strict=True):
        totals[at] = part
    bounds = np.cumsum([0] + [c.size for c in candidates])
    out = []
    for found, a, b in zip(candidates, bounds[:-1], bounds[1:], strict=True):
        nearest = np.argsort(totals[a:b], kind="stable")[: min(matcher.n_neighbors, b - a)]
        out.append(Neighbors(found[nearest], totals[a:b][nearest]))
    return out


def _stripes(matcher: RolloutMatcher, queries: Sequence[CandidateQuery]) -> list[_Stripe]:
    """Every task's rollouts in :data:`_STRIPES` stripes of blocks of at most
    :data:`_BLOCK_BYTES`."""
    values = matcher.bank_.grid.values
    row_bytes = max(1, int(np.prod(values.shape[1:])) * values.itemsize)
    block = max(1, _BLOCK_BYTES // row_bytes)
    by_task: dict[str, list[int]] = {}
    for j, q in enumerate(queries):
        by_task.setdefault(q.task, []).append(j)
    out = []
    for task, numbers in sorted(by_task.items()):
        rows = matcher.bank_.task_rows(task)
        members = np.array(numbers, dtype=np.int64)
        for stripe in np.array_split(rows, min(_STRIPES, max(1, rows.size))):
            blocks = [stripe[s : s + block] for s in range(0, stripe.size, block)]
            out.append(_Stripe(task, blocks, members))
    return out


def _in_stripe(stripe: _Stripe, which: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Positions of the pairs whose row the stripe holds, in increasing row order."""
    first, last = stripe.blocks[0][0], stripe.blocks[-1][-1]
    at = np.flatnonzero(np.isin(which, stripe.queries) & (rows >= first) & (rows <= last))
    return at[np.argsort(rows[at], kind="stable")]


def _shortlist(batch: _Batch, stripe: _Stripe) -> tuple[np.ndarray, np.ndarray]:
    """The stripe's shortlist for its task's queries, merged block by block."""
    index = batch.matcher.index_
    assert index is not None
    queries = [batch.queries[j] for j in stripe.queries]
    found = None
    for rows in _read_ahead(batch, stripe.blocks):
        part = index.shortlist(queries, batch.context, rows)
        found = part if found is None else merge_shortlists([found, part], index.n_candidates)
    assert found is not None
    return found


def _pair_totals(batch: _Batch, pairs: _Pairs) -> np.ndarray:
    """The exact distances of the stripe's pairs, block by block."""
    bounds = np.searchsorted(pairs.rows, [b[0] for b in pairs.blocks[1:]])
    parts = np.split(np.arange(pairs.rows.size), bounds)
    scored = [batch.matcher.pair_distances(batch.queries, batch.context, pairs.which[at],
                                           pairs.rows[at])
              for at, _ in zip(parts, _read_ahead(batch, pairs.blocks), strict=True)]
    return np.concatenate([np.zeros(0), *scored])


def _read_ahead(batch: _Batch, blocks: list[np.ndarray]) -> Iterator[np.ndarray]:
    """The blocks in order, each next one read from disk while this one is processed."""
    spans = [(int(rows[0]), int(rows[-1]) + 1) for rows in blocks]
    for rows, _ in zip(blocks, batch.matcher.bank_.grid.read_ahead(spans), strict=True):
        yield rows

"""Signatures of a set of queries (real failures, or null sim/success samples)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from sim2real.drift.evidence import Novelty, SysFinding
from sim2real.drift.signature import SCORE_FAMILIES, DriftScorer, SegmentDiff, segment_diffs
from sim2real.engine import run_shared
from sim2real.match.context import ContextTable
from sim2real.match.grid import SignalGrid
from sim2real.match.index import CandidateQuery
from sim2real.match.matcher import RolloutMatcher, window_times

if TYPE_CHECKING:
    from sim2real.engine import Executor

__all__ = ["QuerySet", "Reference", "Signatures", "compare", "signatures"]


@dataclass(frozen=True)
class QuerySet:
    """Episodes to compare, each at its own window.

    Attributes:
        grid: where the episodes' values live (rows below index it).
        rows: ``(n,)`` grid rows.
        tasks: ``(n,)`` task of each query.
        ends: ``(n,)`` failure (or pseudo-failure) time, seconds from start.
        length: window length in seconds (shortened where ``ends`` is smaller).
        context: the queries' ``ctx.*`` columns, in query order.
        exclude_self: the grid is the one compared against (the matcher's bank for a null
            sample on sim, the success reference for one on successes): a query must not
            be compared with itself.
    """

    grid: SignalGrid
    rows: np.ndarray
    tasks: np.ndarray
    ends: np.ndarray
    length: float
    context: ContextTable
    exclude_self: bool = False


@dataclass(frozen=True)
class Reference:
    """Real successes against which channels that sim lacks are compared.

    Attributes:
        grid: the successes on the shared grid, only the channels sim lacks.
        tasks: ``(n,)`` task of each success.
    """

    grid: SignalGrid
    tasks: np.ndarray


@dataclass(frozen=True)
class Signatures:
    """Drift signatures of ``n`` events.

    Attributes:
        episode_ids: the events, in row order.
        channels: sim-compared channels first, then success-compared ones.
        channel_families: family of each channel.
        z: ``(n, n_segments, n_channels)`` standardised segment differences.
        rough: ``(n, n_channels)`` standardised roughness differences (how much more a
            channel jitters or spikes than in the matches, whatever its level).
        effects: ``(n, n_channels)`` signed per-channel effect.
        family_scores: ``(n, 5)`` calibrated scores in :data:`SCORE_FAMILIES` order.
        onset: ``(n, 4)`` first deviating segment per channel family.
        novelty: the task-scope part.
        sys_values: per event, the over-represented ``sys.*`` values it carries.
        sys_evidence: ``(n,)`` the strongest of those values' evidence (0 for none).
        system_channels: ``(n,)`` the system family's score from its channels alone; the
            system family score is the larger of this and ``sys_evidence``.
        drift_score: ``(n,)``.
        nearest: per event, the matched sim episode IDs, nearest first.
        null_effects: ``(n_null, n_channels)`` channel effects of the sim-vs-sim (and
            success-vs-success) comparisons the scores were calibrated on: how far a
            comparison strays where there is no gap.
        null_z: ``(n_null, n_segments, n_channels)`` the same comparisons' segment scores.
        null_rough: ``(n_null, n_channels)`` and their roughness scores.
        null_failed: ``(n_null,)`` whether each of them ends at a sim failure.
    """

    episode_ids: tuple[str, ...]
    channels: tuple[str, ...]
    channel_families: tuple[str, ...]
    z: np.ndarray
    rough: np.ndarray
    effects: np.ndarray
    family_scores: np.ndarray
    onset: np.ndarray
    novelty: Novelty
    sys_values: list[list[str]]
    sys_evidence: np.ndarray
    system_channels: np.ndarray
    drift_score: np.ndarray
    nearest: list[list[str]]
    null_effects: np.ndarray
    null_z: np.ndarray
    null_rough: np.ndarray
    null_failed: np.ndarray

    def family(self, name: str) -> np.ndarray:
        """``(n,)`` one column of :attr:`family_scores`."""
        return self.family_scores[:, SCORE_FAMILIES.index(name)]


def compare(
    queries: QuerySet,
    sim_channels: Sequence[int],
    ref_channels: Sequence[int],
    matcher: RolloutMatcher,
    reference: Reference | None,
    n_segments: int,
    executor: Executor | None = None,
) -> tuple[list[SegmentDiff], list[list[str]]]:
    """Match every query and compare its window with its matches, segment by segment.

    Args:
        queries: the episodes to compare.
        sim_channels: columns of ``queries.grid`` that sim records, in bank order.
        ref_channels: columns of ``queries.grid`` compared against real successes, in
            ``reference.grid`` order.
        matcher: fitted on the sim rollouts.
        reference: real successes, or ``None`` when every channel is in sim.
        n_segments: parts of the window.
        executor: runs chunks of queries in parallel; ``None`` runs them here. Each query's
            result depends on it alone, so the output is the same either way.

    Returns:
        One :class:`SegmentDiff` per query (all channels) and its matched sim IDs.
    """
    job = _CompareJob(queries, tuple(sim_channels), tuple(ref_channels), matcher, reference,
                      n_segments)
    n = len(queries.rows)
    chunks = _chunks(queries, matcher)
    parts = run_shared(executor, _compare_chunk, job, chunks)
    diffs: list[SegmentDiff] = [None] * n  # type: ignore[list-item]
    nearest: list[list[str]] = [[] for _ in range(n)]
    for chunk, part in zip(chunks, parts, strict=True):
        for j, i in enumerate(chunk):
            diffs[i] = SegmentDiff(part.diff[j], part.spread[j], part.n_ref[j],
                                   part.rough[j], part.rough_spread[j])
            nearest[i] = part.nearest[j]
    return diffs, nearest


# Queries per task handed to a worker: large enough to amortise shipping, small enough
# that two workers share the load evenly.
_CHUNK_QUERIES = 64


def _chunks(queries: QuerySet, matcher: RolloutMatcher) -> list[tuple[int, ...]]:
    """Query numbers per work item: runs of the original order, or (with the prefilter)
    the queries of one prefilter window group, so each group's descriptors are built once.
    Fixed by the data alone, never by the executor."""
    n = len(queries.rows)
    index = matcher.index_
    if index is None:
        return [tuple(range(s, min(s + _CHUNK_QUERIES, n))) for s in range(0, n, _CHUNK_QUERIES)]
    ends = queries.ends.astype(float)
    lengths = np.where(ends > 0, np.minimum(queries.length, ends), queries.length)
    keys = [(str(queries.tasks[i]), round(ends[i] / index.end_quantum),
             round(lengths[i] / index.end_quantum)) for i in range(n)]
    groups: dict[tuple[str, int, int], list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    return [tuple(members[s:s + _CHUNK_GROUP]) for _, members in sorted(groups.items())
            for s in range(0, len(members), _CHUNK_GROUP)]


# Queries compared with the real successes at once (bounds the interpolated windows).
_SUCCESS_BLOCK = 128

# With the prefilter, at most this many queries of one window group per work item (each
# item builds its group's descriptors once; a multiple of the index's query block).
_CHUNK_GROUP = 2048


class _ChunkResult(NamedTuple):
    """One chunk's comparisons, stacked: a worker sends back a few arrays, not thousands
    of small ones (unpickling those cost the parent seconds on bench m).

    Attributes:
        diff, spread: ``(m, n_segments, n_channels)``.
        n_ref, rough, rough_spread: ``(m, n_channels)``.
        nearest: per query, the matched sim IDs.
    """

    diff: np.ndarray
    spread: np.ndarray
    n_ref: np.ndarray
    rough: np.ndarray
    rough_spread: np.ndarray
    nearest: list[list[str]]


class _CompareJob(NamedTuple):
    """Everything :func:`_compare_chunk` needs besides its slice of queries."""

    queries: QuerySet
    sim_channels: tuple[int, ...]
    ref_channels: tuple[int, ...]
    matcher: RolloutMatcher
    reference: Reference | None
    n_segments: int


def _compare_chunk(job: _CompareJob, chunk: tuple[int, ...]) -> _ChunkResult:
    """:func:`compare` for the queries numbered in ``chunk``, in that order.

    Windows are interpolated and compared for the whole chunk at once; only the matching
    itself runs query by query.
    """
    queries = job.queries
    sim_channels, ref_channels = list(job.sim_channels), list(job.ref_channels)
    matcher, n_segments = job.matcher, job.n_segments
    sim_ids = matcher.bank_.grid.episode_ids
    numbers = np.asarray(chunk, dtype=np.int64)
    ends = queries.ends[numbers].astype(float)
    lengths = np.where(ends > 0, np.minimum(queries.length, ends), queries.length)
    windows = queries.grid.at(queries.rows[numbers],
                              window_times(ends, lengths, matcher.n_points))
    prepared = [(i, int(queries.rows[i]), float(ends[j]), float(lengths[j]), windows[j],
                 int(queries.rows[i]) if queries.exclude_self else None)
                for j, i in enumerate(chunk)]
    parts: list[list[SegmentDiff]] = [[] for _ in chunk]
    nearest: list[list[str]] = [[] for _ in chunk]
    if sim_channels:
        asks = [CandidateQuery(window[:, sim_channels], queries.grid.values[row, 0, sim_channels],
                               i, str(queries.tasks[i]), end, length, own)
                for i, row, end, length, window, own in prepared]
        candidates = _candidates(matcher, asks, queries.context)
        matches = matcher.query_many(asks, queries.context, candidates)
        nearest = [[sim_ids[r] for r in match.rows] for match in matches]
        own_windows = windows[:, :, sim_channels]
        for j, diff in enumerate(_diffs(own_windows, [m.windows for m in matches], n_segments)):
            parts[j].append(diff)
    if ref_channels:
        for j, diff in enumerate(_against_successes(job, prepared, windows[:, :, ref_channels])):
            parts[j].append(diff)
    joined = [SegmentDiff.join(p) for p in parts]

    def stacked(field: str) -> np.ndarray:
        return np.stack([getattr(d, field) for d in joined])

    return _ChunkResult(stacked("diff"), stacked("spread"), stacked("n_ref"), stacked("rough"),
                        stacked("rough_spread"), nearest)


def _diffs(windows: np.ndarray, references: list[np.ndarray],
           n_segments: int) -> list[SegmentDiff]:
    """``segment_diff(windows[j], references[j])`` for every ``j``, batched by reference
    count (the same numbers as one call each)."""
    out: list[SegmentDiff] = [None] * len(references)  # type: ignore[list-item]
    by_count: dict[int, list[int]] = {}
    for j, refs in enumerate(references):
        by_count.setdefault(refs.shape[0], []).append(j)
    for members in by_count.values():
        stacked = np.stack([references[j] for j in members])
        for j, diff in zip(members, segment_diffs(windows[members], stacked, n_segments),
                           strict=True):
            out[j] = diff
    return out


def _candidates(matcher: RolloutMatcher, asks: list[CandidateQuery],
                context: ContextTable) -> list[np.ndarray | None]:
    """Prefiltered bank rows for the queries whose task has many rollouts (others: ``None``,
    every rollout of the task)."""
    found: list[np.ndarray | None] = [None] * len(asks)
    index = matcher.index_
    if index is None:
        return found
    picked = [j for j, q in enumerate(asks) if matcher.uses_index(q.task)]
    for j, rows in zip(picked, index.candidates([asks[j] for j in picked], context),
                       strict=True):
        found[j] = rows
    return found


def signatures(
    episode_ids: Sequence[str],
    diffs: list[SegmentDiff],
    nearest: list[list[str]],
    channels: Sequence[str],
    channel_families: Sequence[str],
    scorer: DriftScorer,
    novelty: Novelty,
    tasks: np.ndarray,
    sys_rows: list[dict[str, str | None]],
    findings: list[SysFinding],
) -> Signatures:
    """Score the comparisons of real failures into :class:`Signatures`."""
    n, n_seg, n_ch = len(diffs), scorer.floor_.shape[0], len(channels)
    system = SCORE_FAMILIES.index("system")
    family = np.zeros((n, len(SCORE_FAMILIES)))
    if n:
        z, effects, family[:, :system + 1], onset = scorer.score_many(diffs)
    else:
        z, effects = np.zeros((0, n_seg, n_ch)), np.zeros((0, n_ch))
        onset = np.zeros((0, len(SCORE_FAMILIES) - 1), dtype=np.int64)
    drift = np.zeros(n)
    task_scope = novelty.total
    flagged: list[list[str]] = []
    evidence = np.zeros(n)
    channel_system = np.zeros(n)
    for i in range(n):
        hits = [f for f in findings if f.task == tasks[i] and sys_rows[i].get(f.column) == f.value]
        flagged.append([f"{f.column}={f.value}" for f in hits])
        evidence[i] = max((f.evidence for f in hits), default=0.0)
        channel_system[i] = family[i, system]
        family[i, system] = max(family[i, system], evidence[i])
        family[i, -1] = task_scope[i]
        drift[i] = scorer.drift(family[i, :system + 1], float(task_scope[i]))
    return Signatures(tuple(episode_ids), tuple(channels), tuple(channel_families), z,
                      scorer.rough_scores(diffs), effects, family, onset, novelty, flagged,
                      evidence, channel_system, drift, nearest, scorer.null_effects_,
                      scorer.null_z_, scorer.null_rough_, scorer.null_failed_)


def _against_successes(
    job: _CompareJob,
    prepared: list[tuple[int, int, float, float, np.ndarray, int | None]],
    windows: np.ndarray,
) -> list[SegmentDiff]:
    """Each query's success-compared channels (``windows``, ``(m, n_points, n_ref)``)
    against every real success of its task over the same window, in one interpolation
    per task and reference count."""
    reference = job.reference
    assert reference is not None
    n_points = job.matcher.n_points
    queries = job.queries
    rows_of: dict[str, np.ndarray] = {}
    chosen = []
    for i, _, _, _, _, own in prepared:
        task = str(queries.tasks[i])
        if task not in rows_of:
            rows_of[task] = np.flatnonzero(reference.tasks == task)
        rows = rows_of[task]
        chosen.append(rows if own is None else rows[rows != own])
    out: list[SegmentDiff] = [None] * len(prepared)  # type: ignore[list-item]
    by_count: dict[int, list[int]] = {}
    for j, rows in enumerate(chosen):
        by_count.setdefault(rows.size, []).append(j)
    for count, same in by_count.items():
        # Blocks of queries: 2,048 queries x 300 successes of interpolated windows would
        # take over a gigabyte; each query's numbers do not depend on its block.
        for start in range(0, len(same), _SUCCESS_BLOCK):
            members = same[start : start + _SUCCESS_BLOCK]
            if count == 0:  # a task with no real success: nothing to compare against
                refs = np.empty((len(members), 0, n_points, windows.shape[2]), np.float32)
                diffs = segment_diffs(windows[members], refs, job.n_segments)
                for j, diff in zip(members, diffs, strict=True):
                    out[j] = diff
                continue
            rows = np.stack([chosen[j] for j in members]).reshape(len(members), count)
            end = np.array([prepared[j][2] for j in members])[:, None]
            length = np.array([prepared[j][3] for j in members])[:, None]
            ends = np.minimum(end, reference.grid.durations[rows])
            times = window_times(ends, length, n_points).reshape(rows.size, n_points)
            refs = reference.grid.at(rows.ravel(), times).reshape(len(members), count,
                                                                  n_points, -1)
            diffs = segment_diffs(windows[members], refs, job.n_segments)
            for j, diff in zip(members, diffs, strict=True):
                out[j] = diff
    return out

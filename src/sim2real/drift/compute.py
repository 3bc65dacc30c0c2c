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
from sim2real.match.matcher import Match, RolloutMatcher, window_times
from sim2real.match.stream import Neighbors, nearest_streamed

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
    streamed = (_nearest_streamed(queries, list(sim_channels), matcher, executor)
                if sim_channels and matcher.index_ is not None else {})
    job = _CompareJob(queries, tuple(sim_channels), tuple(ref_channels), matcher, reference,
                      n_segments, streamed)
    n = len(queries.rows)
    chunks = [tuple(range(s, min(s + _CHUNK_QUERIES, n))) for s in range(0, n, _CHUNK_QUERIES)]
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

# Queries compared with the real successes at once (bounds the interpolated windows).
_SUCCESS_BLOCK = 128

# Queries matched per pass over the bank when it is read block by block: what the passes
# keep per query (64 candidates from each stripe) stays near 70 MB.
_WAVE = 8192


def _nearest_streamed(queries: QuerySet, sim_channels: list[int], matcher: RolloutMatcher,
                      executor: Executor | None) -> dict[int, Neighbors]:
    """The matches of every query whose task the matcher prefilters, by query number:
    waves of queries, each matched in one pass over the bank (:mod:`sim2real.match.stream`).
    Waves hold queries of the same window together, so that each stripe builds few
    descriptor matrices."""
    index = matcher.index_
    assert index is not None
    ends, lengths = _windows(queries, np.arange(len(queries.rows)))
    numbers = [i for i in range(len(queries.rows)) if matcher.uses_index(str(queries.tasks[i]))]
    keys = {i: index.group_key(str(queries.tasks[i]), float(ends[i]), float(lengths[i]))
            for i in numbers}
    numbers.sort(key=lambda i: (keys[i], i))
    found: dict[int, Neighbors] = {}
    for start in range(0, len(numbers), _WAVE):
        wave = np.array(numbers[start : start + _WAVE], dtype=np.int64)
        windows = queries.grid.at(queries.rows[wave],
                                  window_times(ends[wave], lengths[wave], matcher.n_points))
        asks = _asks(queries, wave, ends[wave], lengths[wave], windows, sim_channels)
        for i, neighbors in zip(wave, nearest_streamed(matcher, asks, queries.context, executor),
                                strict=True):
            found[int(i)] = neighbors
    return found


def _windows(queries: QuerySet, numbers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Queries ``numbers``' failure times and window lengths (shortened where the episode
    is)."""
    ends = queries.ends[numbers].astype(float)
    return ends, np.where(ends > 0, np.minimum(queries.length, ends), queries.length)


def _asks(queries: QuerySet, numbers: np.ndarray, ends: np.ndarray, lengths: np.ndarray,
          windows: np.ndarray, sim_channels: list[int]) -> list[CandidateQuery]:
    """The queries ``numbers`` as the matcher takes them, from their failure times, window
    lengths and ``windows`` (all channels): the channels sim records."""
    rows = queries.rows[numbers]
    return [CandidateQuery(windows[j][:, sim_channels],
                           queries.grid.values[row, 0, sim_channels], int(i),
                           str(queries.tasks[i]), float(ends[j]), float(lengths[j]),
                           int(row) if queries.exclude_self else None)
            for j, (i, row) in enumerate(zip(numbers, rows, strict=True))]


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
    streamed: dict[int, Neighbors]


def _compare_chunk(job: _CompareJob, chunk: tuple[int, ...]) -> _ChunkResult:
    """:func:`compare` for the queries numbered in ``chunk``, in that order.

    Windows are interpolated and compared for the whole chunk at once.
    """
    queries = job.queries
    sim_channels, ref_channels = list(job.sim_channels), list(job.ref_channels)
    matcher, n_segments = job.matcher, job.n_segments
    sim_ids = matcher.bank_.grid.episode_ids
    numbers = np.asarray(chunk, dtype=np.int64)
    ends, lengths = _windows(queries, numbers)
    windows = queries.grid.at(queries.rows[numbers],
                              window_times(ends, lengths, matcher.n_points))
    prepared = [(i, int(queries.rows[i]), float(ends[j]), float(lengths[j]), windows[j],
                 int(queries.rows[i]) if queries.exclude_self else None)
                for j, i in enumerate(chunk)]
    parts: list[list[SegmentDiff]] = [[] for _ in chunk]
    nearest: list[list[str]] = [[] for _ in chunk]
    if sim_channels:
        matches = _matches(job, numbers, ends, lengths, windows)
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


def _matches(job: _CompareJob, numbers: np.ndarray, ends: np.ndarray, lengths: np.ndarray,
             windows: np.ndarray) -> list[Match]:
    """The matches of queries ``numbers`` (their failure times, window lengths and
    ``windows``, all channels): streamed ones completed with their rollouts' windows, the
    others (tasks with few rollouts) scanned here."""
    matcher = job.matcher
    out: list[Match] = [None] * len(numbers)  # type: ignore[list-item]
    found = {j: job.streamed[int(i)] for j, i in enumerate(numbers) if int(i) in job.streamed}
    scan = [j for j in range(len(numbers)) if j not in found]
    if found:
        # One interpolation for every matched rollout of the chunk.
        owner = np.concatenate([np.full(f.rows.size, j) for j, f in found.items()])
        rows = np.concatenate([f.rows for f in found.values()])
        windows_of = matcher.windows(rows, ends[owner], lengths[owner])
        bounds = np.cumsum([0] + [f.rows.size for f in found.values()])
        for (j, f), a, b in zip(found.items(), bounds[:-1], bounds[1:], strict=True):
            out[j] = Match(f.rows, f.distances, windows_of[a:b])
    asks = _asks(job.queries, numbers[scan], ends[scan], lengths[scan], windows[scan],
                 list(job.sim_channels))
    for j, match in zip(scan, matcher.query_many(asks, job.queries.context, [None] * len(asks)),
                        strict=True):
        out[j] = match
    return out


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

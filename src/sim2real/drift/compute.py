"""Signatures of a set of queries (real failures, or null sim/success samples)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim2real.drift.evidence import Novelty, SysFinding
from sim2real.drift.signature import SCORE_FAMILIES, DriftScorer, SegmentDiff, segment_diff
from sim2real.match.context import ContextTable
from sim2real.match.grid import SignalGrid
from sim2real.match.matcher import RolloutMatcher, window_times

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
        effects: ``(n, n_channels)`` signed per-channel effect.
        family_scores: ``(n, 5)`` calibrated scores in :data:`SCORE_FAMILIES` order.
        onset: ``(n, 4)`` first deviating segment per channel family.
        novelty: the task-scope part.
        sys_values: per event, the over-represented ``sys.*`` values it carries.
        drift_score: ``(n,)``.
        nearest: per event, the matched sim episode IDs, nearest first.
    """

    episode_ids: tuple[str, ...]
    channels: tuple[str, ...]
    channel_families: tuple[str, ...]
    z: np.ndarray
    effects: np.ndarray
    family_scores: np.ndarray
    onset: np.ndarray
    novelty: Novelty
    sys_values: list[list[str]]
    drift_score: np.ndarray
    nearest: list[list[str]]

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

    Returns:
        One :class:`SegmentDiff` per query (all channels) and its matched sim IDs.
    """
    diffs: list[SegmentDiff] = []
    nearest: list[list[str]] = []
    n_points = matcher.n_points
    sim_ids = matcher.bank_.grid.episode_ids
    for i, row in enumerate(queries.rows):
        end = float(queries.ends[i])
        length = min(queries.length, end) if end > 0 else queries.length
        times = window_times(np.array([end]), length, n_points)
        window = queries.grid.at(np.array([row]), times)[0]
        own = int(row) if queries.exclude_self else None
        parts: list[SegmentDiff] = []
        ids: list[str] = []
        if sim_channels:
            initial = queries.grid.values[row, 0, sim_channels]
            match = matcher.query(window[:, sim_channels], initial, queries.context, i,
                                  str(queries.tasks[i]), end, length, exclude=own)
            parts.append(segment_diff(window[:, sim_channels], match.windows, n_segments))
            ids = [sim_ids[r] for r in match.rows]
        if ref_channels:
            assert reference is not None
            parts.append(_against_successes(window[:, ref_channels], str(queries.tasks[i]),
                                            end, length, reference, n_points, n_segments,
                                            own))
        diffs.append(SegmentDiff.join(parts))
        nearest.append(ids)
    return diffs, nearest


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
    z = np.zeros((n, n_seg, n_ch))
    effects = np.zeros((n, n_ch))
    family = np.zeros((n, len(SCORE_FAMILIES)))
    onset = np.zeros((n, len(SCORE_FAMILIES) - 1), dtype=np.int64)
    drift = np.zeros(n)
    task_scope = novelty.total
    flagged: list[list[str]] = []
    system = SCORE_FAMILIES.index("system")
    for i, d in enumerate(diffs):
        z[i], effects[i], family[i, :system + 1], onset[i] = scorer.score(d)
        hits = [f for f in findings if f.task == tasks[i] and sys_rows[i].get(f.column) == f.value]
        flagged.append([f"{f.column}={f.value}" for f in hits])
        if hits:
            family[i, system] = max(family[i, system], max(f.evidence for f in hits))
        family[i, -1] = task_scope[i]
        drift[i] = scorer.drift(family[i, :system + 1], float(task_scope[i]))
    return Signatures(tuple(episode_ids), tuple(channels), tuple(channel_families), z, effects,
                      family, onset, novelty, flagged, drift, nearest)


def _against_successes(
    window: np.ndarray,
    task: str,
    end: float,
    length: float,
    reference: Reference,
    n_points: int,
    n_segments: int,
    self_row: int | None,
) -> SegmentDiff:
    rows = np.flatnonzero(reference.tasks == task)
    if self_row is not None:
        rows = rows[rows != self_row]
    if rows.size == 0:
        empty = np.full((0, n_points, window.shape[-1]), np.nan, dtype=np.float32)
        return segment_diff(window, empty, n_segments)
    ends = np.minimum(end, reference.grid.durations[rows])
    times = window_times(ends, length, n_points)
    return segment_diff(window, reference.grid.at(rows, times), n_segments)

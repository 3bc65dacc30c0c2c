"""Drift signatures: per-channel standardised differences between a window and its matches.

Layouts: a window is ``(n_points, n_channels)``; its matched rollouts ``(k, n_points,
n_channels)``; the window is split into ``n_segments`` equal parts, and a signature's
segment scores are ``(n_segments, n_channels)``.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numba
import numpy as np

__all__ = [
    "SCORE_FAMILIES",
    "SIGNIFICANT",
    "DriftScorer",
    "SegmentDiff",
    "roughness",
    "routine",
    "segment_diff",
    "segment_diffs",
    "segment_means",
]

CHANNEL_FAMILIES = ("perception", "dynamics", "policy", "system")
_MIN_RELATIVE_SPREAD = 0.1
SCORE_FAMILIES = (*CHANNEL_FAMILIES, "task_scope")
# Calibrated scores: 1 is sim's own variability. 2.5x is where a family "deviates".
SIGNIFICANT = 2.5
# Share of sim-vs-sim comparisons allowed to read as a deviation in any one family.
_NULL_TAIL = 0.05


@dataclass(frozen=True)
class SegmentDiff:
    """A window against its reference, per segment and channel.

    Attributes:
        diff: ``(n_segments, n_channels)`` window mean minus reference mean.
        spread: ``(n_segments, n_channels)`` standard deviation among the references.
        n_ref: ``(n_channels,)`` how many reference episodes each spread comes from.
        rough: ``(n_channels,)`` the window's roughness (:func:`roughness`) minus the
            references' mean roughness.
        rough_spread: ``(n_channels,)`` standard deviation of the references' roughness.
    """

    diff: np.ndarray
    spread: np.ndarray
    n_ref: np.ndarray
    rough: np.ndarray
    rough_spread: np.ndarray

    @staticmethod
    def join(parts: list[SegmentDiff]) -> SegmentDiff:
        """Side by side along the channel axis (sim-compared, then success-compared)."""
        return SegmentDiff(
            np.concatenate([p.diff for p in parts], axis=1),
            np.concatenate([p.spread for p in parts], axis=1),
            np.concatenate([p.n_ref for p in parts]),
            np.concatenate([p.rough for p in parts]),
            np.concatenate([p.rough_spread for p in parts]),
        )


def segment_diff(window: np.ndarray, references: np.ndarray, n_segments: int) -> SegmentDiff:
    """Compare a window with reference windows segment by segment (NaN where unrecorded)."""
    return segment_diffs(window[None], references[None], n_segments)[0]


def segment_diffs(windows: np.ndarray, references: np.ndarray,
                  n_segments: int) -> list[SegmentDiff]:
    """:func:`segment_diff` of many windows at once, each with as many references.

    Args:
        windows: ``(m, n_points, n_channels)``.
        references: ``(m, k, n_points, n_channels)``: window ``i``'s references are
            ``references[i]``.
    """
    m, k = references.shape[:2]
    mine = segment_means(windows, n_segments)
    flat = references.reshape(m * k, *references.shape[2:])
    refs = segment_means(flat, n_segments).reshape(m, k, n_segments, flat.shape[-1])
    ref_rough = roughness(flat).reshape(m, k, flat.shape[-1])
    diff, spread = _centred(mine, refs)
    rough, rough_spread = _centred(roughness(windows), ref_rough)
    return [SegmentDiff(diff[i], spread[i], np.full(windows.shape[-1], k), rough[i],
                        rough_spread[i]) for i in range(m)]


def _centred(mine: np.ndarray, refs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``mine`` ``(m, ...)`` less the mean of its references ``refs`` ``(m, k, ...)``, and
    their standard deviation (0 with fewer than two)."""
    with _quiet():
        centre = np.nanmean(refs, axis=1)
        spread = np.nanstd(refs, axis=1, ddof=1) if refs.shape[1] > 1 else np.zeros_like(centre)
    return mine - centre, np.nan_to_num(spread)


def roughness(windows: np.ndarray) -> np.ndarray:
    """``(n, n_points, c)`` -> ``(n, c)`` the RMS of each channel's step changes
    (consecutive samples), NaN where a channel has no two consecutive samples.

    What segment means average away: a contact spike of a few samples, a sensor's jitter.
    Two windows of one level and shape but different roughness (an impact against a slow
    push, a noisy sensor against a clean one) differ here.
    """
    return _step_rms(np.asarray(windows, dtype=np.float64))


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _step_rms(windows: np.ndarray) -> np.ndarray:  # pragma: no cover
    # np.sqrt(np.nanmean(np.diff(windows, axis=1) ** 2, axis=1)) without its copies and
    # masks; to the bit where there are several channels (numpy then sums in order too; a
    # single channel it sums pairwise, which may differ in the last bit).
    n, n_points, n_ch = windows.shape
    out = np.empty((n, n_ch))
    for i in range(n):
        for c in range(n_ch):
            total = 0.0
            count = 0
            for p in range(1, n_points):
                step = windows[i, p, c] - windows[i, p - 1, c]
                if not np.isnan(step):
                    total += step * step
                    count += 1
            out[i, c] = np.sqrt(total / np.float64(count))
    return out


class DriftScorer:
    """Standardises segment differences and aggregates them into family and drift scores.

    Fitted on null comparisons (sim rollouts against other sim rollouts, real successes
    against other successes), so every score reads "multiples of sim's own variability":
    about 1 under no gap. Some families are heavy-tailed under no gap (a discrete counter
    of dropped messages, contact forces that spike); their unit widens until at most
    5% of the null comparisons reach :data:`SIGNIFICANT` (and the onset threshold), so
    that "deviates" means the same rarity in every family.

    Args:
        channel_families: family of each channel, in channel order.
        shrinkage: weight, in pseudo-episodes, of the pooled null spread mixed into the
            spread among a query's few matches (which alone is too noisy with k ~ 5).
        top_channels: a family's score is the RMS of its this-many largest channel effects
            (1: the largest), so one strongly drifting channel is not diluted by quiet
            siblings.
        onset_threshold: a family "deviates" in a segment once its score passes this.
    """

    def __init__(
        self,
        channel_families: tuple[str, ...],
        shrinkage: float = 3.0,
        top_channels: int = 1,
        onset_threshold: float = 3.0,
    ) -> None:
        self.channel_families = channel_families
        self.shrinkage = shrinkage
        self.top_channels = top_channels
        self.onset_threshold = onset_threshold

    def fit(self, null: list[SegmentDiff], channel_scale: np.ndarray,
            failed: np.ndarray | None = None) -> DriftScorer:
        """Learn the pooled spread and the null medians that calibrate every score.

        Args:
            null: comparisons where no gap exists (sim vs sim, success vs success).
            failed: ``(len(null),)`` whether each comparison's window ends at a sim
                failure (kept as ``null_failed_``); ``None``: none does.
            channel_scale: ``(n_channels,)`` each channel's spread over all of the
                reference data. A tenth of it bounds the pooled spread from below: where sim
                is nearly deterministic (a closed gripper's force), a tiny spread would
                turn any difference into hundreds of sigma.
        """
        floor = _median_positive(np.stack([d.spread for d in null]))
        lower = _MIN_RELATIVE_SPREAD * np.where(channel_scale > 0, channel_scale, 1.0)
        self.floor_ = np.maximum(floor, lower[None, :])
        self.rough_floor_ = np.maximum(
            _median_positive(np.stack([d.rough_spread for d in null])), lower)
        self.family_scale_ = np.ones(len(CHANNEL_FAMILIES))
        self.segment_scale_ = np.ones((len(CHANNEL_FAMILIES), self.floor_.shape[0]))
        self.drift_scale_ = 1.0
        self.null_z_, self.null_effects_, fam, seg = self._raw(null)
        self.null_rough_ = self.rough_scores(null)
        self.null_failed_ = (np.zeros(len(null), dtype=bool) if failed is None
                             else np.asarray(failed, dtype=bool))
        self.family_scale_ = _widened(_positive(np.nanmedian(fam, axis=0)), fam, SIGNIFICANT)
        # Onset is decided by a family's strongest segment: widen on the segments' maxima.
        median = _positive(np.nanmedian(seg, axis=0))
        widen = _widened(np.ones(seg.shape[1]), np.nanmax(seg / median, axis=2),
                         self.onset_threshold)
        self.segment_scale_ = median * widen[:, None]
        base = np.stack([self._base_drift(f / self.family_scale_) for f in fam])
        self.drift_scale_ = float(_positive(np.nanmedian(base)))
        return self

    def zscores(self, d: SegmentDiff) -> np.ndarray:
        """``(n_segments, n_channels)`` differences in units of the pooled spread."""
        return self._zscores([d])[0]

    def score(self, d: SegmentDiff) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Score one comparison.

        Returns:
            ``z`` ``(n_segments, n_channels)``, channel effects ``(n_channels,)`` (the
            strongest segment, signed), calibrated family scores ``(4,)`` and the first
            deviating segment of each family ``(4,)`` (``n_segments`` when it never does).
        """
        z, effects, family, onset = self.score_many([d])
        return z[0], effects[0], family[0], onset[0]

    def score_many(
        self, diffs: list[SegmentDiff]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`score` of many comparisons at once (the same numbers, stacked).

        Returns:
            ``z`` ``(n, n_segments, n_channels)``, effects ``(n, n_channels)``, family
            scores ``(n, 4)`` and onsets ``(n, 4)``.
        """
        z, effects, family, segments = self._raw(diffs)
        family = family / self.family_scale_
        segments = segments / self.segment_scale_
        deviates = segments > self.onset_threshold
        onset = np.where(deviates.any(axis=2), deviates.argmax(axis=2), z.shape[1])
        return z, effects, family, onset

    def drift(self, family: np.ndarray, task_scope: float) -> float:
        """One drift score from calibrated family scores and the task-scope novelty."""
        base = self._base_drift(family) / self.drift_scale_
        return float(np.hypot(base, task_scope))

    def _zscores(self, diffs: list[SegmentDiff]) -> np.ndarray:
        """``(n, n_segments, n_channels)``: :meth:`zscores` of each comparison."""
        n_ref = np.stack([d.n_ref for d in diffs])[:, None, :]
        return np.nan_to_num(_pooled_ratio(np.stack([d.diff for d in diffs]),
                                           np.stack([d.spread for d in diffs]), n_ref,
                                           self.floor_, self.shrinkage))

    def rough_scores(self, diffs: list[SegmentDiff]) -> np.ndarray:
        """``(n, n_channels)`` each comparison's roughness difference in units of the
        pooled spread of the references' roughness (0 where unrecorded)."""
        if not diffs:
            return np.zeros((0, self.rough_floor_.shape[0]))
        return np.nan_to_num(_pooled_ratio(
            np.stack([d.rough for d in diffs]), np.stack([d.rough_spread for d in diffs]),
            np.stack([d.n_ref for d in diffs]), self.rough_floor_, self.shrinkage))

    def _raw(
        self, diffs: list[SegmentDiff]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """z, effects, uncalibrated family scores ``(n, 4)`` and per-segment family scores
        ``(n, 4, n_segments)`` of each comparison."""
        z = self._zscores(diffs)
        effects = _effects(z)
        fams = np.array(self.channel_families)
        family = np.zeros((len(diffs), len(CHANNEL_FAMILIES)))
        segments = np.zeros((len(diffs), len(CHANNEL_FAMILIES), z.shape[1]))
        for i, name in enumerate(CHANNEL_FAMILIES):
            cols = np.flatnonzero(fams == name)
            if cols.size == 0:
                continue
            family[:, i] = _top_rms(effects[:, cols], self.top_channels)
            segments[:, i] = _top_rms(z[:, :, cols], self.top_channels)
        return z, effects, family, segments

    def _base_drift(self, family: np.ndarray) -> float:
        """The family that drifts most: a gap in one family is not diluted by the others."""
        present = [i for i, name in enumerate(CHANNEL_FAMILIES) if name in self.channel_families]
        return float(np.max(family[present])) if present else 0.0


def routine(null: np.ndarray, tail: float) -> np.ndarray:
    """``(n_channels,)`` per channel, the size that only ``tail`` of the no-gap comparisons'
    values ``null`` ``(n_null, n_channels)`` exceed: what a channel shows routinely where no
    gap exists."""
    return np.quantile(np.abs(null), 1.0 - tail, axis=0)


def segment_means(windows: np.ndarray, n_segments: int) -> np.ndarray:
    """``(n, n_points, c)`` -> ``(n, n_segments, c)`` means, NaN-aware, over the parts of
    ``np.array_split``: one compiled pass instead of ``np.nanmean``'s copies and masks
    (whose numbers it gives where the channel axis is the innermost, ``c > 1``)."""
    sizes = [len(p) for p in np.array_split(np.arange(windows.shape[1]), n_segments)]
    return _nan_means(windows, np.cumsum([0, *sizes]))


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _nan_means(windows: np.ndarray, edges: np.ndarray) -> np.ndarray:  # pragma: no cover
    # The arithmetic of np.nanmean, to the bit: NaN read as 0, the sum from 0 in the input's
    # precision in order, divided by the count in float64 (0 / 0: NaN) and rounded back.
    n, n_ch = windows.shape[0], windows.shape[2]
    out = np.empty((n, edges.size - 1, n_ch), dtype=windows.dtype)
    zero = windows.dtype.type(0.0)
    for i in range(n):
        for b in range(edges.size - 1):
            for c in range(n_ch):
                total = zero
                count = 0
                for p in range(edges[b], edges[b + 1]):
                    v = windows[i, p, c]
                    if np.isnan(v):
                        total += zero
                    else:
                        total += v
                        count += 1
                out[i, b, c] = np.float64(total) / np.float64(count)
    return out


def _effects(z: np.ndarray) -> np.ndarray:
    """The segment with the largest deviation, signed: a slip that shows only in the last
    second before the failure must not be averaged away by the calm seconds before it.

    ``z`` ``(..., n_segments, n_channels)`` -> ``(..., n_channels)``.
    """
    strongest = np.abs(z).argmax(axis=-2)
    return np.take_along_axis(z, strongest[..., None, :], axis=-2)[..., 0, :]


def _top_rms(values: np.ndarray, m: int) -> np.ndarray:
    """RMS of the ``m`` largest magnitudes along the last axis (``(..., k)`` -> ``(...)``)."""
    top = np.sort(np.abs(values), axis=-1)[..., ::-1][..., : max(1, min(m, values.shape[-1]))]
    return np.sqrt(np.mean(top**2, axis=-1))


def _widened(scale: np.ndarray, null: np.ndarray, threshold: float) -> np.ndarray:
    """``scale`` ``(n_families,)``, widened where more than :data:`_NULL_TAIL` of the
    ``null`` scores ``(n_null, n_families)`` would reach ``threshold`` in its units."""
    tail = np.nanquantile(null / scale, 1.0 - _NULL_TAIL, axis=0)
    return scale * np.maximum(1.0, np.nan_to_num(tail / threshold, nan=1.0))


def _pooled_ratio(diff: np.ndarray, spread: np.ndarray, n_ref: np.ndarray, floor: np.ndarray,
                  shrinkage: float) -> np.ndarray:
    """``diff`` over the references' ``spread`` shrunk towards the pooled ``floor`` by
    ``shrinkage`` pseudo-references (a spread among ~5 matches alone is too noisy)."""
    dof = np.maximum(n_ref - 1, 0)
    return diff / np.sqrt((dof * spread**2 + shrinkage * floor**2) / (dof + shrinkage))


def _median_positive(spreads: np.ndarray) -> np.ndarray:
    """``(n, ..., c)`` -> ``(..., c)`` the median of the positive spreads (0 where none)."""
    with _quiet():
        floor = np.nanmedian(np.where(spreads > 0, spreads, np.nan), axis=0)
    return np.where(np.isfinite(floor) & (floor > 0), floor, 0.0)


def _positive(x: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(x) & (x > 0), x, 1.0)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Unrecorded channels are NaN by design: their empty-slice warnings say nothing."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        yield

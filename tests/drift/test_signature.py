"""Calibration: about 1 under no gap, and "deviates" equally rare in every family."""

from __future__ import annotations

import numpy as np

from sim2real.drift.signature import SIGNIFICANT, DriftScorer, SegmentDiff


def _null(rng: np.random.Generator, n: int) -> list[SegmentDiff]:
    """A Gaussian dynamics channel and a heavy-tailed system counter (mostly 0, now and
    then a burst of dropped messages), 4 segments, 5 references each."""
    out = []
    for _ in range(n):
        gauss = rng.normal(0.0, 1.0, 4)
        bursts = np.where(rng.random(4) < 0.1, rng.integers(3, 8, 4), 0).astype(float)
        out.append(SegmentDiff(np.column_stack([gauss, bursts]), np.ones((4, 2)),
                               np.full(2, 5)))
    return out


def test_heavy_tailed_family_reads_significant_no_more_often_than_five_percent() -> None:
    rng = np.random.default_rng(0)
    scorer = DriftScorer(("dynamics", "system")).fit(_null(rng, 400), np.ones(2))
    fresh = np.stack([scorer.score(d)[2] for d in _null(rng, 2000)])
    dynamics, system = fresh[:, 1], fresh[:, 3]
    # 5% by construction, plus a fresh sample's noise and the counter's ties at the quantile
    # (in the median unit alone, a third of these comparisons would read significant).
    assert np.mean(system >= SIGNIFICANT) <= 0.09
    assert np.mean(dynamics >= SIGNIFICANT) <= 0.07
    assert 0.8 < np.median(dynamics) < 1.25  # a light-tailed family keeps its unit


def test_null_effects_are_kept_for_the_clustering() -> None:
    rng = np.random.default_rng(1)
    null = _null(rng, 50)
    scorer = DriftScorer(("dynamics", "system")).fit(null, np.ones(2))
    assert scorer.null_effects_.shape == (50, 2)

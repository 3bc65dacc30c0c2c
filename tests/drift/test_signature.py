"""Calibration: about 1 under no gap, "deviates" equally rare in every family; an
impact and a push of one level told apart by roughness."""

from __future__ import annotations

import numpy as np

from sim2real.drift.signature import SIGNIFICANT, DriftScorer, SegmentDiff, segment_diff


def _null(rng: np.random.Generator, n: int) -> list[SegmentDiff]:
    """A Gaussian dynamics channel and a heavy-tailed system counter (mostly 0, now and
    then a burst of dropped messages), 4 segments, 5 references each."""
    out = []
    for _ in range(n):
        gauss = rng.normal(0.0, 1.0, 4)
        bursts = np.where(rng.random(4) < 0.1, rng.integers(3, 8, 4), 0).astype(float)
        out.append(SegmentDiff(np.column_stack([gauss, bursts]), np.ones((4, 2)),
                               np.full(2, 5), rng.normal(0.0, 1.0, 2), np.ones(2)))
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


def test_an_impact_and_a_push_of_one_level_differ_in_roughness() -> None:
    rng = np.random.default_rng(2)
    t = np.linspace(0.0, 1.0, 32)

    def runs(n: int) -> np.ndarray:  # a smooth force with sensor noise, one channel
        return (5.0 * t + rng.normal(0.0, 0.1, (n, 32)))[..., None]

    null = [segment_diff(w, runs(5), 4) for w in runs(300)]
    scorer = DriftScorer(("dynamics",)).fit(null, np.ones(1))
    impact, refs = runs(1)[0], runs(5)
    push = impact.copy()
    impact[-2] += 4.0  # one sample of an impact, just before the failure
    push[-8:] += 0.5  # a steady push over the last segment: the same segment mean
    diffs = [segment_diff(w, refs, 4) for w in (impact, push)]
    level = np.stack([scorer.zscores(d)[-1, 0] for d in diffs])
    rough = scorer.rough_scores(diffs)[:, 0]
    assert abs(level[0] - level[1]) < 0.01 * level.min()
    routine = np.quantile(np.abs(scorer.null_rough_), 0.95)
    assert rough[0] > 5.0 * routine and rough[0] > 10.0 * abs(rough[1])

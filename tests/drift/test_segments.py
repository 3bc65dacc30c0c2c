"""Segment means: np.nanmean's numbers, whatever the segments."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from sim2real.drift.signature import segment_means


@pytest.mark.parametrize(("n_points", "n_segments"), [(32, 4), (30, 4), (7, 3), (32, 1)])
def testsegment_means_are_nanmeans_of_the_array_split_parts(n_points: int,
                                                             n_segments: int) -> None:
    rng = np.random.default_rng(n_points)
    windows = rng.normal(size=(200, n_points, 5)).astype(np.float32) * 100
    windows[rng.random(windows.shape) < 0.2] = np.nan
    windows[:3, :, 1] = np.nan  # a channel never recorded: NaN, as np.nanmean says
    parts = np.array_split(windows, n_segments, axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.stack([np.nanmean(p, axis=1) for p in parts], axis=1)
    np.testing.assert_array_equal(segment_means(windows, n_segments), expected)

"""The compiled kernels give the bits of the NumPy expressions they replaced."""

from __future__ import annotations

import numpy as np
import pytest

from sim2real.match.grid import SignalGrid
from sim2real.match.index import _scaled_descriptors
from sim2real.match.matcher import _mean_sq, _pairwise_sum, _spread_and_start


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def _with_gaps(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    values[rng.random(values.shape) < 0.1] = np.nan
    return values


def test_at_interpolates_like_the_numpy_expression(rng: np.random.Generator) -> None:
    values = _with_gaps(rng.normal(size=(40, 50, 6)).astype(np.float32), rng)
    grid = SignalGrid(tuple(f"e{i}" for i in range(40)), tuple("abcdef"), 0.03,
                      values[:, :, :5], np.full(40, 1.5))  # a strided view, as narrow makes
    rows = rng.integers(0, 40, size=30)
    times = rng.uniform(-0.1, 1.6, size=(30, 32))
    pos = np.clip(times / grid.dt, 0, 49)
    left = np.floor(pos).astype(np.int64)
    right = np.minimum(left + 1, 49)
    weight = (pos - left)[..., None].astype(np.float32)
    r = rows[:, None]
    expected = grid.values[r, left] * (1 - weight) + grid.values[r, right] * weight
    np.testing.assert_array_equal(grid.at(rows, times), expected)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mean_square_and_pairwise_sum_match_numpy(dtype: type,
                                                  rng: np.random.Generator) -> None:
    for n in (1, 7, 8, 9, 128, 129, 960, 5000):
        x = (rng.normal(size=n) * 10.0 ** rng.normal(size=n)).astype(dtype)
        assert _pairwise_sum(x, 0, n) == x.sum()
    diff = _with_gaps((rng.normal(size=(50, 32, 30)) * 3).astype(dtype), rng)
    diff[0] = np.nan
    sq = np.square(diff.reshape(50, -1))
    valid = np.isfinite(sq)
    count = valid.sum(axis=1)
    expected = np.where(count > 0, np.where(valid, sq, 0.0).sum(axis=1) / np.maximum(count, 1),
                        np.inf)
    np.testing.assert_array_equal(_mean_sq(diff), expected)


def test_chunked_std_adds_like_numpy(rng: np.random.Generator) -> None:
    values = _with_gaps(rng.normal(size=(300, 40, 5)).astype(np.float32), rng)
    count, total, squares = np.zeros(5), np.zeros(5), np.zeros(5)
    for start in range(0, 300, 64):
        block = values[start : start + 64].reshape(-1, 5).astype(np.float64)
        finite = np.isfinite(block)
        block[~finite] = 0.0
        count += finite.sum(axis=0)
        total += block.sum(axis=0)
        squares += np.square(block).sum(axis=0)
    mean = total / count
    expected = np.sqrt(np.maximum(squares / count - mean**2, 0.0))
    grid = SignalGrid(tuple(map(str, range(300))), tuple("abcde"), 0.1, values,
                      np.full(300, 3.9))
    spread, start = _spread_and_start(grid, 64)
    np.testing.assert_array_equal(spread, expected)
    np.testing.assert_array_equal(start, values[:, 0, :])


def test_descriptors_of_interpolated_windows_like_numpy(rng: np.random.Generator) -> None:
    values = _with_gaps(rng.normal(size=(60, 80, 4)).astype(np.float32), rng)
    initial = values[:, 0, :]
    rows = np.sort(rng.choice(60, size=25, replace=False))
    # Fractional grid steps, some whole, the last step included.
    steps = np.sort(rng.uniform(0, 79, size=(25, 8)), axis=1)
    steps[:, 0], steps[:, -1] = np.floor(steps[:, 0]), 79.0
    scale = rng.uniform(0.5, 2.0, size=4).astype(np.float32)
    w_traj, w_init = np.float32(0.2), np.float32(0.7)
    left = np.floor(steps).astype(np.int64)
    right = np.minimum(left + 1, 79)
    w = (steps - left).astype(np.float32)[:, :, None]
    at = (values[rows[:, None], left] * (np.float32(1.0) - w)
          + values[rows[:, None], right] * w)
    expected = np.concatenate([w_traj * (at * scale).reshape(25, -1),
                               w_init * (initial[rows] * scale)], axis=1)
    expected[~np.isfinite(expected)] = 0.0
    grid = SignalGrid(tuple(map(str, range(60))), ("a", "b", "c", "d"), 0.1, values,
                      np.full(60, 7.9))
    windows = grid.at(rows, steps * 0.1)
    np.testing.assert_array_equal(
        _scaled_descriptors(windows, initial, rows, scale, w_traj, w_init), expected)

"""Resampling onto the shared grid: sources of different rates land on the same values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from sim2real.dataset import Channel, load_dataset, write_dataset
from sim2real.match.grid import build_grid, grid_step
from sim2real.match.matcher import window_times


def _dataset(tmp_path: Path) -> Path:
    rows: dict[str, list[object]] = {"episode_id": [], "t": [], "x": []}
    for episode, rate, duration in (("fast", 50.0, 2.0), ("slow", 20.0, 1.0)):
        t = np.arange(0, duration + 1e-9, 1 / rate)
        rows["episode_id"] += [episode] * len(t)
        rows["t"] += t.tolist()
        rows["x"] += (3.0 * t + 1.0).tolist()
    episodes = pa.table({"episode_id": ["fast", "slow"], "source": ["sim", "sim"],
                         "task": ["pick", "pick"]})
    return write_dataset(tmp_path / "ds", episodes, pa.table(rows),
                         channels=[Channel("x", "dynamics")])


def test_linear_signal_resamples_exactly_at_any_rate(tmp_path: Path) -> None:
    ds = load_dataset(_dataset(tmp_path))
    assert grid_step(ds, ["fast"]) == 0.02
    dt = grid_step(ds, ["slow"])
    assert dt == 0.05
    grid = build_grid(ds, ["fast", "slow"], ["x"], dt, 2.0)
    expected = 3.0 * np.arange(grid.values.shape[1]) * dt + 1.0
    np.testing.assert_allclose(grid.values[0, :, 0], expected, rtol=1e-5)
    slow = grid.values[1, :, 0]
    assert np.isnan(slow[grid.values.shape[1] // 2 + 2 :]).all()  # past its 1 s end
    np.testing.assert_allclose(slow[:21], expected[:21], rtol=1e-5)
    np.testing.assert_allclose(grid.durations, [2.0, 1.0])


def test_windows_interpolate_between_grid_points(tmp_path: Path) -> None:
    ds = load_dataset(_dataset(tmp_path))
    grid = build_grid(ds, ["fast"], ["x"], 0.05, 2.0)
    times = window_times(np.array([1.5]), 1.0, 11)
    np.testing.assert_allclose(times[0], np.linspace(0.5, 1.5, 11))
    values = grid.at(np.array([0]), times)[0, :, 0]
    np.testing.assert_allclose(values, 3.0 * times[0] + 1.0, rtol=1e-5)
    short = window_times(np.array([0.4]), 1.0, 5)
    assert short[0, 0] == 0.0  # a window never starts before the episode

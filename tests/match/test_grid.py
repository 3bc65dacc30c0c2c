"""Resampling onto the shared grid: sources of different rates land on the same values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sim2real.dataset import Channel, load_dataset, write_dataset
from sim2real.match.grid import build_grid
from sim2real.match.matcher import window_times
from sim2real.match.timebase import channel_periods


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
    assert channel_periods(ds, ["fast"], ["x"]) == {"x": 0.02}
    dt = channel_periods(ds, ["slow"], ["x"])["x"]
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


def _expected(t: np.ndarray, x: np.ndarray, dt: float, n_steps: int) -> np.ndarray:
    """The grid of one episode by numpy.interp: the reference the kernel must match."""
    grid_t = np.arange(n_steps) * dt
    out = np.interp(grid_t, t, x)
    out[grid_t > t[-1] + 1e-9] = np.nan
    return out.astype(np.float32)


def test_many_episodes_across_row_groups_and_parts_match_numpy_interp(tmp_path: Path) -> None:
    """2,300 episodes: the sharded read, episodes that straddle shards and parts, and
    episodes whose rows interleave (read by ID), all against numpy.interp."""
    rng = np.random.default_rng(0)
    ids = [f"e{i:05d}" for i in range(2300)]
    samples = {e: np.sort(rng.uniform(0, 2, rng.integers(2, 12))) for e in ids}
    table = pa.table({"episode_id": [e for e in ids for _ in samples[e]],
                      "t": np.concatenate([samples[e] for e in ids]),
                      "x": rng.normal(size=sum(len(s) for s in samples.values()))})
    root = write_dataset(tmp_path / "ds", pa.table({"episode_id": ids, "source": ["sim"] * 2300,
                                                    "task": ["pick"] * 2300}), table.slice(0, 1),
                         channels=[Channel("x", "dynamics")])
    half = table.num_rows // 2 + 3  # inside an episode: it continues in the next part
    for part in (root / "signals").glob("*.parquet"):
        part.unlink()
    pq.write_table(table.slice(0, half), root / "signals" / "part-0.parquet", row_group_size=97)
    pq.write_table(table.slice(half), root / "signals" / "part-1.parquet", row_group_size=97)
    ds = load_dataset(root)
    wanted = ids[::-1]
    grid = build_grid(ds, wanted, ["x"], 0.05, 2.0)
    xs = table["x"].to_numpy()
    starts = np.cumsum([0] + [len(samples[e]) for e in ids])
    for row, e in enumerate(wanted):
        k = ids.index(e)
        expected = _expected(samples[e], xs[starts[k]:starts[k + 1]], 0.05, grid.values.shape[1])
        np.testing.assert_allclose(grid.values[row, :, 0], expected, rtol=1e-6, atol=1e-6)
        assert grid.durations[row] == samples[e][-1]
    # Rows in time order across episodes (each episode's rows between the others'), in two
    # parts that both span every episode: no shards, the read by ID.
    by_time = table.take(np.argsort(table["t"].to_numpy(), kind="stable"))
    pq.write_table(by_time.slice(0, half), root / "signals" / "part-0.parquet")
    pq.write_table(by_time.slice(half), root / "signals" / "part-1.parquet")
    by_id = build_grid(load_dataset(root), ["e00007", "e00003", "no-samples"], ["x", "absent"],
                       0.05, 2.0)
    np.testing.assert_array_equal(by_id.values[:2, :, 0], grid.values[[-8, -4], :, 0])
    assert np.isnan(by_id.values[:, :, 1]).all() and np.isnan(by_id.values[2]).all()
    assert by_id.durations[2] == 0.0


def test_narrow_keeps_the_kept_channels_in_place(tmp_path: Path) -> None:
    ds = load_dataset(_dataset(tmp_path))
    grid = build_grid(ds, ["fast", "slow"], ["absent", "x", "missing_too"], 0.05, 2.0)
    assert grid.recorded().tolist() == [False, True, False]
    x = grid.values[:, :, 1].copy()
    narrow = grid.narrow(["x"])
    assert narrow.channels == ("x",)
    np.testing.assert_array_equal(narrow.values[:, :, 0], x)


def test_a_grid_mapped_from_scratch_holds_the_same_values(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Given a scratch folder, a large grid is a file there, memory-mapped: same values, and
    the file is gone from the folder at once (the mapping keeps it until freed)."""
    import mmap

    import sim2real.match.grid as grid_module

    ds = load_dataset(_dataset(tmp_path))
    held = build_grid(ds, ["fast", "slow"], ["x"], 0.05, 2.0)
    monkeypatch.setattr(grid_module, "_MAPPED_BYTES", 0)
    mapped = build_grid(ds, ["fast", "slow"], ["x"], 0.05, 2.0, scratch=tmp_path / "scratch")
    base: object = mapped.values
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base, mmap.mmap)
    np.testing.assert_array_equal(mapped.values, held.values)
    assert list((tmp_path / "scratch").iterdir()) == []


def test_scans_of_a_mapped_grid_read_ahead_and_see_every_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mapped grid is read at random by default; scans ask for their rows ahead (any
    range, aligned or not, even past the end) and cover every row: the narrowed grid and
    what is recorded are those of the same grid in memory."""
    import sim2real.match.grid as grid_module

    ds = load_dataset(_dataset(tmp_path))
    channels = ["absent", "x", "missing_too"]
    held = build_grid(ds, ["fast", "slow", "fast"], channels, 0.05, 2.0)
    monkeypatch.setattr(grid_module, "_MAPPED_BYTES", 0)
    mapped = build_grid(ds, ["fast", "slow", "fast"], channels, 0.05, 2.0,
                        scratch=tmp_path / "scratch")
    for first, stop in [(0, 1), (1, 2), (2, 9), (3, 3)]:
        mapped.prefetch(first, stop)
    assert [(s.start, s.stop) for s in mapped.scan(2)] == [(0, 2), (2, 3)]
    assert mapped.recorded().tolist() == held.recorded().tolist() == [False, True, False]
    np.testing.assert_array_equal(mapped.narrow(["x"]).values, held.narrow(["x"]).values)

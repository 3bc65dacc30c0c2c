"""Per-channel time bases: each channel's own rate sets the grid, gaps stay gaps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner

from sim2real.cli import main
from sim2real.dataset import Channel, load_dataset, write_dataset
from sim2real.dataset.layout import to_wide
from sim2real.errors import DatasetError
from sim2real.match.grid import build_grid
from sim2real.match.timebase import TimeBase, check_grid_fits, time_base

EPISODES = pa.table({"episode_id": ["e1", "e2"], "source": ["sim", "sim"],
                     "task": ["dock", "dock"]})
CHANNELS = [Channel("odom", "dynamics"), Channel("dock_pose", "perception")]


def _long(series: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]) -> pa.Table:
    """``{episode: {channel: (t, values)}}`` as long-layout rows."""
    parts = [pa.table({"episode_id": [e] * len(t), "t": t, "channel": [c] * len(t), "value": v})
             for e, channels in series.items() for c, (t, v) in channels.items()]
    return pa.concat_tables(parts)


def _two_rates(dropout: tuple[float, float] | None = None
               ) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Odometry at 50 Hz; a pose estimate at 10 Hz stamped 1 µs later (another topic's
    clock): linear signals, so the exact value at any time is known."""
    out = {}
    for e, length in (("e1", 4.0), ("e2", 3.0)):
        fast = np.arange(0, length + 1e-9, 0.02)
        slow = np.arange(0, length - 0.05, 0.1) + 1e-6
        if dropout is not None:
            slow = slow[(slow < dropout[0]) | (slow > dropout[1])]
        out[e] = {"odom": (fast, 2.0 * fast), "dock_pose": (slow, 5.0 * slow + 1.0)}
    return out


@pytest.mark.parametrize("layout", ["long", "wide"])
def test_two_rates_in_one_episode_each_interpolated_within_its_own_samples(
        tmp_path: Path, layout: str) -> None:
    rows = _long(_two_rates())
    signals = rows if layout == "long" else to_wide(rows, ["odom", "dock_pose"])
    if layout == "wide":  # every pose row sits between two odometry rows: nulls between
        assert signals["dock_pose"].null_count > signals.num_rows // 2
    ds = load_dataset(write_dataset(tmp_path / "ds", EPISODES, signals, channels=CHANNELS))
    assert ds.layout == layout
    base = time_base(ds, {"sim": ["e1", "e2"]}, ["odom", "dock_pose"])
    # The step is the fastest channel's own period, never the 1 µs between topics.
    assert base.dt == 0.02
    assert base.periods == {"sim": {"odom": 0.02, "dock_pose": 0.1}}
    assert "'odom'" in base.step_from and "50 Hz" in base.step_from
    grid = build_grid(ds, ["e1", "e2"], ["odom", "dock_pose"], base.dt, 4.0,
                      periods=base.periods["sim"])
    g = np.arange(grid.values.shape[1]) * base.dt
    inside = g <= 3.9 + 1e-5  # e1's last pose; then held, for 1.5 of its periods
    np.testing.assert_allclose(grid.values[0, :, 0], 2.0 * g, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(grid.values[0, inside, 1], 5.0 * np.maximum(g[inside], 1e-6)
                               + 1.0, rtol=1e-5)
    assert np.isfinite(grid.values[0, :, 1]).all()
    assert np.isnan(grid.values[1, g > 3.0 + 1e-9]).all()  # past e2's end
    np.testing.assert_allclose(grid.durations, [4.0, 3.0])


def test_both_layouts_give_the_same_grid_and_signals(tmp_path: Path) -> None:
    rows = _long(_two_rates())
    long = load_dataset(write_dataset(tmp_path / "long", EPISODES, rows, channels=CHANNELS))
    wide = load_dataset(write_dataset(tmp_path / "wide", EPISODES,
                                      to_wide(rows, ["odom", "dock_pose"]), channels=CHANNELS))
    periods = {"odom": 0.02, "dock_pose": 0.1}
    grids = [build_grid(ds, ["e2", "e1"], ["dock_pose", "odom"], 0.05, 4.0, periods=periods)
             for ds in (long, wide)]
    np.testing.assert_array_equal(grids[0].values, grids[1].values)
    assert list(long.channels) == ["dock_pose", "odom"]  # long: sorted by name
    columns = ["odom", "dock_pose"]
    assert long.read_signals(["e1"], columns).equals(wide.read_signals(["e1"], columns))
    assert long.durations == wide.durations


def test_a_dropout_is_not_bridged_but_a_missed_sample_is(tmp_path: Path) -> None:
    rows = _long(_two_rates(dropout=(1.95, 3.05)))  # 10 Hz pose: nothing from 2.0 to 3.0
    ds = load_dataset(write_dataset(tmp_path / "ds", EPISODES, rows, channels=CHANNELS))
    grid = build_grid(ds, ["e1"], ["dock_pose"], 0.02, 4.0, periods={"dock_pose": 0.1})
    g = np.arange(grid.values.shape[1]) * 0.02
    pose = grid.values[0, :, 0]
    # A sample speaks for 1.5 of its periods where it has no neighbour within three.
    assert np.isfinite(pose[(g > 1.9) & (g <= 2.0)]).all()
    assert np.isnan(pose[(g > 2.06) & (g < 2.94)]).all()
    assert np.isfinite(pose[(g >= 2.96) & (g < 3.5)]).all()
    # Without the channel's period, the old rule: a straight line across any gap.
    bridged = build_grid(ds, ["e1"], ["dock_pose"], 0.02, 4.0).values[0, :, 0]
    assert np.isfinite(bridged[g < 3.95]).all()
    # One missed sample (two periods apart) is still a line.
    one_missed = _two_rates(dropout=(1.95, 2.05))
    ds2 = load_dataset(write_dataset(tmp_path / "ds2", EPISODES, _long(one_missed),
                                     channels=CHANNELS))
    line = build_grid(ds2, ["e1"], ["dock_pose"], 0.02, 4.0,
                      periods={"dock_pose": 0.1}).values[0, :, 0]
    np.testing.assert_allclose(line[(g > 1.9) & (g < 2.1)], 5.0 * g[(g > 1.9) & (g < 2.1)] + 1,
                               rtol=1e-5)


def test_rate_option_sets_the_step(tmp_path: Path) -> None:
    ds = load_dataset(write_dataset(tmp_path / "ds", EPISODES, _long(_two_rates()),
                                    channels=CHANNELS))
    base = time_base(ds, {"sim": ["e1"]}, ["odom", "dock_pose"], rate_hz=25.0)
    assert base.dt == 0.04 and base.step_from == "--rate 25"


def test_a_grid_too_large_names_channel_rate_and_episode() -> None:
    base = TimeBase(1e-6, {"real": {"imu": 1e-6}}, "channel 'imu' (real) at 1e+06 Hz")
    durations = {"a": 5.0, "b": 3600.0}
    with pytest.raises(DatasetError) as err:
        check_grid_fits(base, durations, ["a", "b"], 20, "fleet/")
    text = str(err.value)
    assert "channel 'imu' (real) at 1e+06 Hz" in text and "'b'" in text and "--rate" in text
    check_grid_fits(TimeBase(0.05, {}, "x"), durations, ["a", "b"], 20, "fleet/")  # fits


def test_analyze_refuses_a_grid_too_large_with_exit_2(tmp_path: Path) -> None:
    """Topics stamped microseconds apart used to give a 1 µs step and a MemoryError."""
    episodes = pa.table({
        "episode_id": ["s1", "s2", "r1", "r2"], "source": ["sim", "sim", "real", "real"],
        "task": ["dock"] * 4, "outcome": [None, None, "failure", "success"],
        "deployment": [None, None, "w1", "w1"],
        "started_at": [None, None, "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"]})
    rows = _long({e: {"imu": (np.array([0.0, 1e-6, 2e-6, 5e4]), np.arange(4.0))}
                  for e in ("s1", "s2", "r1", "r2")})
    root = write_dataset(tmp_path / "ds", episodes, rows)
    result = CliRunner().invoke(main, ["analyze", str(root), "-o", str(tmp_path / "out"),
                                       "-q"])
    assert result.exit_code == 2, result.output
    assert "channel 'imu'" in result.output and "Hz" in result.output
    assert "--rate" in result.output and not (tmp_path / "out").exists()

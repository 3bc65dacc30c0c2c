"""The MuJoCo demo fleet: format, determinism, cache, injected causes, the command."""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from sim2real.demo import DemoPaths, InitState, generate, simulate_episode
from sim2real.demo.fleet import CAUSES
from sim2real.demo.telemetry import SYSTEM_CHANNELS
from sim2real.demo.world import PARAM_RANGES, TRAINING_OBJECTS

_SYMPTOMS = {"missed_pick", "dropped_object", "collision", "timeout"}


@pytest.fixture(scope="module")
def small(small_demo: Callable[[int], DemoPaths]) -> DemoPaths:
    """The small demo of seed 0, the session's shared one."""
    return small_demo(0)


@pytest.fixture(scope="module")
def episodes(small: DemoPaths) -> pa.Table:
    return pq.read_table(small.dataset / "episodes.parquet")


@pytest.fixture(scope="module")
def signals(small: DemoPaths) -> pa.Table:
    return pq.read_table(small.dataset / "signals")


@pytest.fixture(scope="module")
def key(small: DemoPaths) -> dict[str, object]:
    return json.loads(small.answer_key.read_text())


def _rows(table: pa.Table, source: str) -> pa.Table:
    return table.filter(pc.equal(table["source"], source))


def test_episodes_follow_the_format(episodes: pa.Table) -> None:
    ids = episodes["episode_id"].to_pylist()
    assert len(ids) == len(set(ids))
    assert set(episodes["source"].to_pylist()) == {"sim", "real"}
    real, sim = _rows(episodes, "real"), _rows(episodes, "sim")
    assert real["deployment"].null_count == 0 and real["started_at"].null_count == 0
    assert pa.types.is_timestamp(episodes.schema.field("started_at").type)
    assert episodes.schema.field("started_at").type.tz == "UTC"
    assert set(real["deployment"].to_pylist()) == {f"w{i:02d}" for i in range(1, 9)}
    for name in PARAM_RANGES:
        assert real[f"param.{name}"].null_count == real.num_rows
        assert sim[f"param.{name}"].null_count == 0
    labels = set(episodes["failure_label"].drop_null().to_pylist())
    assert labels <= _SYMPTOMS
    failed = pc.equal(episodes["outcome"], "failure")
    assert pc.all(pc.is_valid(episodes.filter(failed)["failure_time"])).as_py()
    assert real["sys.config_hash"].null_count == 0


def test_sim_covers_the_training_catalogue_only(episodes: pa.Table) -> None:
    sim_objects = set(_rows(episodes, "sim")["ctx.object_type"].to_pylist())
    real_objects = set(_rows(episodes, "real")["ctx.object_type"].to_pylist())
    assert sim_objects == set(TRAINING_OBJECTS)
    assert real_objects - sim_objects == {"bottle"}


def test_signals_are_ordered_and_sampled_at_their_rates(
    signals: pa.Table, episodes: pa.Table
) -> None:
    ids = np.asarray(signals["episode_id"].to_pylist())
    t = signals["t"].to_numpy()
    same = ids[1:] == ids[:-1]
    assert np.all(np.diff(t)[same] > 0)
    assert set(ids) == set(episodes["episode_id"].to_pylist())
    steps = np.diff(t)[same]
    is_sim = np.char.startswith(ids[1:][same], "sim-")
    assert np.median(steps[is_sim]) == pytest.approx(1 / 25, abs=1e-6)
    assert np.median(steps[~is_sim]) == pytest.approx(1 / 50, abs=1e-6)
    durations = pc.max(signals["t"]).as_py()
    assert 4.0 < durations <= 6.0


def test_sim_has_no_system_channels(signals: pa.Table) -> None:
    sim = signals.filter(pc.starts_with(signals["episode_id"], "sim-"))
    real = signals.filter(pc.starts_with(signals["episode_id"], "real-"))
    for name in SYSTEM_CHANNELS:
        assert sim[name].null_count == sim.num_rows
        assert real[name].null_count == 0


def test_channels_and_params_csv(small: DemoPaths, signals: pa.Table) -> None:
    with (small.dataset / "channels.csv").open() as f:
        channels = {r["channel"]: r["family"] for r in csv.DictReader(f)}
    assert set(channels) == set(signals.column_names) - {"episode_id", "t"}
    assert set(channels.values()) == {"perception", "dynamics", "policy", "system"}
    with (small.dataset / "params.csv").open() as f:
        params = {r["param"]: r for r in csv.DictReader(f)}
    assert set(params) == set(PARAM_RANGES)
    assert all(float(p["low"]) <= float(p["nominal"]) <= float(p["high"]) for p in params.values())


def test_loads_with_the_dataset_validator(small: DemoPaths) -> None:
    from sim2real.dataset import load_dataset

    dataset = load_dataset(small.dataset)
    assert dataset.deployments == tuple(f"w{i:02d}" for i in range(1, 9))
    assert not dataset.warnings


def test_answer_key_is_beside_the_dataset(small: DemoPaths) -> None:
    assert small.answer_key.parent == small.root
    assert not any("answer" in p.name for p in small.dataset.rglob("*"))
    columns = pq.read_schema(small.dataset / "episodes.parquet").names
    assert not any("cause" in c for c in columns)


def test_every_cause_has_failures(key: dict[str, object], episodes: pa.Table) -> None:
    real = _rows(episodes, "real")
    failed = set(real.filter(pc.equal(real["outcome"], "failure"))["episode_id"].to_pylist())
    events = key["events"]
    assert isinstance(events, dict)
    assert set(events) == failed
    counts = {name: list(events.values()).count(name) for name in {c.name for c in CAUSES}}
    assert all(n >= 10 for n in counts.values()), counts
    assert list(events.values()).count("background") >= 10
    assert key["fastest_growing"] == "site_b_dim_lighting"
    assert key["fixed"] == "r07_stale_config"


def test_real_failure_rate_is_reasonable(episodes: pa.Table) -> None:
    def rate(source: str) -> float:
        rows = _rows(episodes, source)
        return pc.sum(pc.equal(rows["outcome"], "failure")).as_py() / rows.num_rows

    assert 0.03 < rate("real") < 0.25
    assert 0.0 < rate("sim") < rate("real")


def test_stale_config_is_fixed_in_the_last_deployments(episodes: pa.Table) -> None:
    r07 = episodes.filter(pc.equal(episodes["robot_id"], "r07"))
    others = episodes.filter(pc.equal(episodes["robot_id"], "r01"))
    fleet = set(others["sys.config_hash"].to_pylist())
    assert len(fleet) == 1
    for deployment, config in zip(r07["deployment"].to_pylist(),
                                  r07["sys.config_hash"].to_pylist(), strict=True):
        assert (config in fleet) == (deployment in ("w07", "w08"))


def test_cache_is_reused(small: DemoPaths) -> None:
    before = (small.dataset / "episodes.parquet").stat().st_mtime_ns
    start = time.perf_counter()
    again = generate(small.root, size="small", seed=0, progress=False)
    assert time.perf_counter() - start < 2.0
    assert again == small
    assert (small.dataset / "episodes.parquet").stat().st_mtime_ns == before


def _digest(paths: DemoPaths) -> dict[str, bytes]:
    files = [*sorted(paths.dataset.rglob("*.*")), paths.answer_key]
    return {p.relative_to(paths.root).as_posix(): p.read_bytes() for p in files}


def test_same_seed_same_bytes_whatever_the_workers(tmp_path: Path) -> None:
    one = generate(tmp_path / "one", size="tiny", seed=5, workers=1, progress=False)
    two = generate(tmp_path / "two", size="tiny", seed=5, workers=2, progress=False)
    other = generate(tmp_path / "other", size="tiny", seed=6, workers=2, progress=False)
    assert _digest(one) == _digest(two)
    a, b = _digest(one), _digest(other)
    assert a["dataset/episodes.parquet"] != b["dataset/episodes.parquet"]
    assert a["dataset/signals/part-00000.parquet"] != b["dataset/signals/part-00000.parquet"]


def test_simulate_episode_fails_for_physical_reasons() -> None:
    init = InitState((0.05, -0.03), 0.3)
    ok = simulate_episode({}, {"object_type": "box_m"}, init, seed=1, rate_hz=25)
    assert ok.outcome == "success" and ok.failure_label is None
    assert "loop_latency_ms" not in ok.telemetry.column_names
    slippery = simulate_episode({"friction": 0.05, "object_mass_scale": 1.4},
                                {"object_type": "box_l"}, init, seed=1, rate_hz=25)
    assert slippery.outcome == "failure"
    assert slippery.failure_label in {"missed_pick", "dropped_object"}
    dark = simulate_episode({"light_level": 0.1}, {"object_type": "box_m"}, init, seed=1)
    assert dark.outcome == "failure"


def test_cli_generate_only_reuses_the_cache(small: DemoPaths) -> None:
    from sim2real.cli import main

    result = CliRunner().invoke(main, ["demo", "--generate-only", "--size", "small", "--quiet",
                                       "-o", str(small.root)])
    assert result.exit_code == 0, result.output
    assert str(small.answer_key) in result.output
    assert "--generate-only" in CliRunner().invoke(main, ["demo", "--help"]).output

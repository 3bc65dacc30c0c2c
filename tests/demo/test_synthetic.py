"""The synthetic fleet generator: presets follow the dataset format and their answer keys."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from sim2real.dataset import load_dataset
from sim2real.demo.synthetic import (
    PRESETS,
    CauseSpec,
    WorldPaths,
    WorldSpec,
    generate_world,
    standard_world,
    widened,
)
from sim2real.errors import UsageError

KEY_FIELDS = ["generator", "version", "seed", "size", "causes", "fastest_growing", "fixed",
              "events"]
CAUSE_FIELDS = ["name", "taxonomy", "key_param", "true_value", "robots", "sites", "deployments",
                "fixed_in"]


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[WorldSpec, WorldPaths]]:
    """Every preset generated once, at its default size, seed 0."""
    root = tmp_path_factory.mktemp("worlds")
    out = {}
    for name, preset in PRESETS.items():
        spec = preset()
        out[name] = (spec, generate_world(spec, root / name))
    return out


def _episodes(paths: WorldPaths) -> pa.Table:
    return pq.read_table(paths.dataset / "episodes.parquet")


def _signals(paths: WorldPaths) -> pa.Table:
    return pq.read_table(paths.dataset / "signals")


def _key(paths: WorldPaths) -> dict:
    return json.loads(paths.answer_key.read_text())


@pytest.mark.parametrize("name", list(PRESETS))
def test_preset_is_a_valid_dataset(worlds, name):
    spec, paths = worlds[name]
    dataset = load_dataset(paths.dataset)  # the project's own validator of the format
    assert dataset.deployments == spec.deployments
    assert {c.name: c.family for c in dataset.channels.values()} == {
        c.name: c.family for c in spec.channels}
    assert not any(c.inferred for c in dataset.channels.values())
    assert set(dataset.params) == {p.name for p in spec.params}


@pytest.mark.parametrize("name", list(PRESETS))
def test_episodes_follow_the_spec(worlds, name):
    spec, paths = worlds[name]
    ep = _episodes(paths)
    ids = ep["episode_id"].to_pylist()
    assert len(ids) == len(set(ids))
    real = pc.equal(ep["source"], "real")
    sim = pc.invert(real)
    n_real, n_sim = pc.sum(real).as_py(), pc.sum(sim).as_py()
    assert 800 <= n_real <= 1500 and 400 <= n_sim <= 800
    for column in ("deployment", "started_at", "robot_id", "site", "outcome"):
        assert ep.filter(real)[column].null_count == 0, column
    for p in spec.params:
        assert ep.filter(sim)[f"param.{p.name}"].null_count == 0
        assert ep.filter(real)[f"param.{p.name}"].null_count == n_real  # hidden on real rows
        values = ep.filter(sim)[f"param.{p.name}"].to_numpy()
        assert p.low <= values.min() and values.max() <= p.high
    failed = ep.filter(pc.equal(ep["outcome"], "failure"))
    assert failed["failure_time"].null_count == 0 and failed["failure_label"].null_count == 0


@pytest.mark.parametrize("name", list(PRESETS))
def test_signals_follow_the_spec(worlds, name):
    spec, paths = worlds[name]
    sig = _signals(paths)
    ids = sig["episode_id"].to_numpy(zero_copy_only=False)
    t = sig["t"].to_numpy()
    same = ids[1:] == ids[:-1]
    assert (np.diff(t)[same] > 0).all()  # strictly increasing within an episode
    assert (t[np.r_[True, ~same]] == 0).all()
    is_sim = np.char.startswith(ids.astype(str), "sim-")
    system = [c.name for c in spec.channels if c.family == "system"]
    for ch in spec.channels:
        column = sig[ch.name].to_numpy(zero_copy_only=False)
        finite = np.isfinite(column)
        expected = ~is_sim if ch.name in system else np.ones_like(finite)
        assert (finite == expected).all(), ch.name
    # Each source keeps its own sample rate.
    dt_sim = np.median(np.diff(t)[same & is_sim[1:]])
    dt_real = np.median(np.diff(t)[same & ~is_sim[1:]])
    assert dt_sim == pytest.approx(1 / spec.sim_rate_hz, rel=0.05)
    assert dt_real == pytest.approx(1 / spec.real_rate_hz, rel=0.05)
    # Failures happen inside their episode.
    ends = sig.group_by("episode_id").aggregate([("t", "max")]).to_pydict()
    last = dict(zip(ends["episode_id"], ends["t_max"], strict=True))
    ep = _episodes(paths)
    ep = ep.filter(pc.equal(ep["outcome"], "failure"))
    for e, tf in zip(ep["episode_id"].to_pylist(), ep["failure_time"].to_pylist(), strict=True):
        assert 0 < tf <= last[e]


@pytest.mark.parametrize("name", list(PRESETS))
def test_answer_key_matches_the_dataset(worlds, name):
    spec, paths = worlds[name]
    assert paths.answer_key.parent == paths.dataset.parent
    assert not list(paths.dataset.rglob("answer_key*"))
    key = _key(paths)
    assert list(key) == KEY_FIELDS
    assert key["generator"] == "sim2real.demo.synthetic" and key["version"] == 1
    assert [list(c) for c in key["causes"]] == [CAUSE_FIELDS] * len(spec.causes)
    ep = _episodes(paths)
    real_failures = ep.filter(pc.and_(pc.equal(ep["source"], "real"),
                                      pc.equal(ep["outcome"], "failure")))
    assert set(key["events"]) == set(real_failures["episode_id"].to_pylist())
    assert set(key["events"].values()) <= {c.name for c in spec.causes} | {"background"}


@pytest.mark.parametrize("name", ["standard", "renamed", "unchanged"])
def test_every_cause_fails_in_its_scope(worlds, name):
    _spec, paths = worlds[name]
    key = _key(paths)
    counts = Counter(key["events"].values())
    assert 15 <= counts["background"] <= 40
    ep = _episodes(paths)
    where = {e: (d, r) for e, d, r in zip(ep["episode_id"].to_pylist(),
                                          ep["deployment"].to_pylist(),
                                          ep["robot_id"].to_pylist(), strict=True)}
    for cause in key["causes"]:
        assert 20 <= counts[cause["name"]] <= 50, cause["name"]
        events = [e for e, c in key["events"].items() if c == cause["name"]]
        assert {where[e][0] for e in events} <= set(cause["deployments"])
        assert {where[e][1] for e in events} <= set(cause["robots"])


def test_fixed_cause_stops_at_its_fix(worlds):
    _spec, paths = worlds["standard"]
    key = _key(paths)
    fixed = next(c for c in key["causes"] if c["name"] == key["fixed"])
    assert fixed["fixed_in"] == "w07" and fixed["deployments"] == [f"w0{i}" for i in range(1, 7)]
    ep = _episodes(paths)
    dep = dict(zip(ep["episode_id"].to_pylist(), ep["deployment"].to_pylist(), strict=True))
    assert not [e for e, c in key["events"].items() if c == fixed["name"] and dep[e] >= "w07"]


def test_fastest_growing(worlds):
    assert _key(worlds["standard"][1])["fastest_growing"] == "dim_lighting"
    assert _key(worlds["renamed"][1])["fastest_growing"] == "heavy_payloads"
    assert _key(worlds["unchanged"][1])["fastest_growing"] is None


def test_no_gap_world_has_only_background_failures(worlds):
    _spec, paths = worlds["no_gap"]
    key = _key(paths)
    assert key["causes"] == [] and key["fastest_growing"] is None and key["fixed"] is None
    assert set(key["events"].values()) == {"background"}


def test_system_cause_marks_its_robot(worlds):
    _spec, paths = worlds["standard"]
    ep = _episodes(paths)
    stale = ep.filter(pc.equal(ep["sys.config_hash"], "cfg-stale-0badc0de"))
    assert set(stale["robot_id"].to_pylist()) == {"r07"}
    assert max(stale["deployment"].to_pylist()) < "w07"


def test_causes_leave_their_trace_in_telemetry(worlds):
    """Cause failures sit outside what sim shows on the channels their family predicts."""
    _spec, paths = worlds["standard"]
    key = _key(paths)
    sig = _signals(paths)
    means = sig.group_by("episode_id").aggregate(
        [(c, "mean") for c in ("img_brightness", "obj_slip", "loop_latency_ms")]).to_pydict()
    per_ep = {e: i for i, e in enumerate(means["episode_id"])}
    sim_rows = [i for e, i in per_ep.items() if e.startswith("sim-")]

    def mean_of(cause: str, column: str) -> float:
        rows = [per_ep[e] for e, c in key["events"].items() if c == cause]
        return float(np.mean(np.array(means[f"{column}_mean"])[rows]))

    sim_brightness = np.array(means["img_brightness_mean"])[sim_rows]
    sim_slip = np.array(means["obj_slip_mean"])[sim_rows]
    assert mean_of("dim_lighting", "img_brightness") < np.percentile(sim_brightness, 1)
    assert mean_of("slippery_pads", "obj_slip") > np.percentile(sim_slip, 99)
    assert mean_of("stale_config", "loop_latency_ms") > 2 * mean_of("background", "loop_latency_ms")


def test_same_seed_same_bytes(tmp_path):
    spec = standard_world()
    a = generate_world(spec, tmp_path / "a", seed=3, scale=0.3)
    b = generate_world(spec, tmp_path / "b", seed=3, scale=0.3)
    c = generate_world(spec, tmp_path / "c", seed=4, scale=0.3)
    files = sorted(p.relative_to(a.root) for p in a.root.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b.root) for p in b.root.rglob("*") if p.is_file())
    for rel in files:
        assert (a.root / rel).read_bytes() == (b.root / rel).read_bytes(), rel
    assert (a.root / "answer_key.json").read_bytes() != (c.root / "answer_key.json").read_bytes()


def test_scale_and_parts(tmp_path):
    spec = widened(standard_world(), 32)
    assert len(spec.channels) == 32
    whole = generate_world(spec, tmp_path / "whole", scale=0.5)
    parts = generate_world(spec, tmp_path / "parts", scale=0.5, part_rows=50_000)
    n_parts = len(list((parts.dataset / "signals").glob("*.parquet")))
    assert n_parts >= 3
    # Splitting into parts changes nothing but the files.
    assert _signals(whole).equals(_signals(parts))
    n_real = pc.sum(pc.equal(_episodes(whole)["source"], "real")).as_py()
    assert n_real == round(sum(np.round(np.array(spec.episodes_per_deployment) * 0.5)))
    assert _key(whole)["size"] == "standard@0.5"
    load_dataset(parts.dataset)


def test_bad_specs_are_refused(tmp_path):
    spec = standard_world()
    with pytest.raises(UsageError, match="unknown kinds"):
        dataclasses.replace(spec, channels=(*spec.channels[:-1],
                                            dataclasses.replace(spec.channels[-1], kind="x")))
    bad_cause = CauseSpec("c", "dynamics_mismatch", "slip_drop", key_param="nope", true_value=1)
    with pytest.raises(UsageError, match="key_param"):
        dataclasses.replace(spec, causes=(bad_cause,))
    with pytest.raises(UsageError, match="scale"):
        generate_world(spec, tmp_path / "x", scale=0)


def test_default_size_is_fast(tmp_path):
    import time

    start = time.perf_counter()
    generate_world(standard_world(), Path(tmp_path) / "w")
    assert time.perf_counter() - start < 5

"""The world zoo's generator: deterministic, valid datasets, keys out of the analysis' sight."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from sim2real.dataset import load_dataset
from sim2real.demo.scoring import yardstick_ari
from sim2real.demo.zoo import TRAP_CLASSES, WorldKey, draw_world, generate_world
from sim2real.errors import UsageError

_SMALL = 0.35


def _digest(folder: Path) -> dict[str, str]:
    return {str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(folder.rglob("*")) if f.is_file()}


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, WorldKey]:
    """One small world per layout, and one without a gap."""
    root = tmp_path_factory.mktemp("zoo")
    out = {}
    traps = ["same_place_modes", "system_via_perception"]
    for seed in range(40):  # the first seeds that give each layout
        layout = draw_world(seed, traps=traps).layout
        if layout not in out:
            out[layout] = generate_world(seed, root / layout, size=_SMALL, traps=traps)
        if len(out) == 2:
            break
    out["no_gap"] = generate_world(7, root / "no_gap", size=_SMALL, no_gap=True)
    return out


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    a = generate_world(3, tmp_path / "a", size=0.2)
    b = generate_world(3, tmp_path / "b", size=0.2)
    assert _digest(a.root) == _digest(b.root)
    c = generate_world(4, tmp_path / "c", size=0.2)
    assert _digest(a.dataset) != _digest(c.dataset)


@pytest.mark.parametrize("name", ["parts", "one_file", "no_gap"])
def test_world_is_a_valid_dataset(worlds: dict[str, WorldKey], name: str) -> None:
    key = worlds[name]
    dataset = load_dataset(key.dataset)  # sim2real's own validation of the format
    assert list(dataset.deployments) == list(key.document["real_episodes_per_deployment"])
    episodes = pq.read_table(key.dataset / "episodes.parquet")
    failures = episodes.filter(pc.and_(pc.equal(episodes["source"], "real"),
                                       pc.equal(episodes["outcome"], "failure")))
    assert set(failures["episode_id"].to_pylist()) == set(key.events)
    layout = key.document["layout"]
    assert (key.dataset / "signals").is_dir() == (layout == "parts")


def test_answer_key_is_out_of_the_analysis_sight(worlds: dict[str, WorldKey]) -> None:
    for key in worlds.values():
        assert key.path.parent == key.dataset.parent
        assert not list(key.dataset.rglob("answer_key*"))
        text = b"".join(f.read_bytes() for f in key.dataset.rglob("*") if f.is_file())
        for cause in key.causes:  # no cause name, nor the word "background", leaks
            assert cause.name.encode() not in text
        assert b"background" not in text


def test_channels_have_their_own_rates(worlds: dict[str, WorldKey]) -> None:
    key = worlds["parts"]
    signals = pq.read_table(key.dataset / "signals")
    real = signals.filter(pc.starts_with(signals["episode_id"], "real-"))
    counts = Counter(real["channel"].to_pylist())
    assert len(set(counts.values())) >= 2  # fast joints beside a slower camera


def test_causes_come_from_their_traps(worlds: dict[str, WorldKey]) -> None:
    key = worlds["parts"]
    traps = Counter(c.trap for c in key.causes)
    assert traps["same_place_modes"] >= 2 and traps["system_via_perception"] == 1
    modes = [c for c in key.causes if c.trap == "same_place_modes"]
    assert len({(c.sites, c.robots, c.deployments) for c in modes}) == 1  # same place, time
    assert {c.taxonomy for c in modes} == {"dynamics_mismatch"}
    counts = Counter(key.events.values())
    assert sum(counts[c.name] for c in key.causes) > 0 and counts["background"] > 0
    assert worlds["no_gap"].causes == () and worlds["no_gap"].no_gap


def test_every_trap_class_can_be_set() -> None:
    for trap in TRAP_CLASSES:
        world = draw_world(11, traps=[trap])
        assert world.traps == (trap,)
        assert (world.causes == ()) == (trap == "no_gap")
        assert all(c.trap == trap for c in world.causes)
    with pytest.raises(UsageError, match="unknown trap"):
        draw_world(0, traps=["gremlins"])
    with pytest.raises(UsageError, match="size must be positive"):
        draw_world(0, size=0)


def test_any_run_of_seeds_sets_every_class() -> None:
    drawn = {t for seed in range(9) for t in draw_world(seed, no_gap=False).traps}
    assert drawn == set(TRAP_CLASSES) - {"no_gap"}


def test_a_cause_fails_only_where_and_when_it_acts(worlds: dict[str, WorldKey]) -> None:
    key = worlds["parts"]
    episodes = pq.read_table(key.dataset / "episodes.parquet")
    where = dict(zip(episodes["episode_id"].to_pylist(),
                     zip(episodes["robot_id"].to_pylist(), episodes["deployment"].to_pylist(),
                         strict=True), strict=True))
    for cause in key.causes:
        events = [e for e, c in key.events.items() if c == cause.name]
        assert {where[e][0] for e in events} <= set(cause.robots)
        assert {where[e][1] for e in events} <= set(cause.deployments)


def test_yardstick_scores_the_world_it_is_given(worlds: dict[str, WorldKey]) -> None:
    value = yardstick_ari(worlds["one_file"])
    assert -1.0 <= value <= 1.0
    assert value == yardstick_ari(worlds["one_file"])  # seeded

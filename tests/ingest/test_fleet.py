"""A two-rate fleet written with the official writers, ingested, then diagnosed.

The world (a generated pick-and-place fleet with one cause of each family) is recorded as
teams record: joint states and commands at 10 Hz on two topics stamped 150 µs apart, a
perception estimate at 5 Hz stamped at capture plus 30 ms, real-only system topics (a 1 Hz
``DiagnosticArray`` of ``KeyValue`` strings among them), an outcome 50 ms after the last
tick, failures on a shared ``/events`` topic, episode facts in MCAP metadata records.
Each format must be diagnosed as well as the same fleet written as Parquet: ARI within 0.05,
the same taxonomies, the same clusters. The message formats (ROS 2 MCAP, rosbag2 in both
storages, ROS 1) must ingest to exactly the dataset the JSON MCAP gave, so they are
diagnosed alike (checked on a few episodes here; ``bench/ingest_parity.py`` analyses every
format's whole fleet).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner
from sklearn.metrics import adjusted_rand_score

import sim2real
from sim2real.cli import main
from sim2real.dataset import load_dataset
from sim2real.demo.recorded import Recorded, record_world
from sim2real.demo.scoring import ScoreCard, score_report
from sim2real.demo.synthetic import generate_world, standard_world
from sim2real.pipeline import AnalysisConfig
from sim2real.report import ReportModel

CONFIG = AnalysisConfig(null_samples=100)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A small world at 10 Hz whose Parquet analysis gets every cause right (ARI 0.95)."""
    spec = dataclasses.replace(standard_world(), real_rate_hz=10.0, sim_rate_hz=10.0)
    paths = generate_world(spec, tmp_path_factory.mktemp("world"), seed=1, scale=0.2)
    return paths.dataset, json.loads(paths.answer_key.read_text())


@pytest.fixture(scope="module")
def mcap_fleet(world: tuple[Path, dict],
               tmp_path_factory: pytest.TempPathFactory) -> tuple[Recorded, Path]:
    root = tmp_path_factory.mktemp("mcap")
    rec = record_world(world[0], root / "rec", "mcap-json")
    result = CliRunner().invoke(main, ["ingest", "mcap", str(root / "rec" / "real"),
                                       str(root / "rec" / "sim"), "-m", str(rec.mapping),
                                       "-o", str(root / "ds")])
    assert result.exit_code == 0, result.output
    return rec, root / "ds"


@pytest.fixture(scope="module")
def parquet(world: tuple[Path, dict]) -> tuple[ReportModel, ScoreCard]:
    """The yardstick: the same fleet analysed from the Parquet it was generated as."""
    model = sim2real.analyze(world[0], config=CONFIG).model
    card = score_report(model, world[1])
    assert card.ari >= 0.85 and all(card.taxonomy_right.values()), card
    return model, card


def _diagnosed(dataset: Path, rec: Recorded, key: dict,
               parquet: tuple[ReportModel, ScoreCard]) -> None:
    """Diagnosed as well as from Parquet: ARI within 0.05, the same taxonomies right, and
    the same clusters (the two reports group the failures alike)."""
    model = sim2real.analyze(dataset, config=CONFIG).model
    renamed = {**key, "events": {rec.ids[e]: cause for e, cause in key["events"].items()}}
    card = score_report(model, renamed)
    want, want_card = parquet
    assert card.ari >= want_card.ari - 0.05, (card, want_card)
    assert card.taxonomy_right == want_card.taxonomy_right, (card, want_card)
    ours = {e.episode_id: e.cluster_id or "-" for e in model.events}
    theirs = {rec.ids[e.episode_id]: e.cluster_id or "-" for e in want.events}
    assert ours.keys() == theirs.keys()
    assert adjusted_rand_score([theirs[e] for e in theirs], [ours[e] for e in theirs]) >= 0.95


def test_two_rate_mcap_fleet_is_diagnosed(world: tuple[Path, dict],
                                          mcap_fleet: tuple[Recorded, Path],
                                          parquet: tuple[ReportModel, ScoreCard]) -> None:
    rec, dataset = mcap_fleet
    ds = load_dataset(dataset)
    assert ds.layout == "long"
    episodes = {r["episode_id"]: r for r in ds.episodes.to_pylist()}
    truth = {r["episode_id"]: r for r in load_dataset(world[0]).episodes.to_pylist()}
    assert episodes.keys() == truth.keys()
    for episode_id in ("real-000003", "sim-000004"):
        got, want = episodes[episode_id], truth[episode_id]
        # The outcome came 50 ms after the last sample; the failure from a shared topic.
        for name in ("source", "task", "outcome", "failure_label", "deployment", "robot_id",
                     "ctx.object_type", "sys.firmware"):
            assert got[name] == want[name], name
        assert got["failure_time"] == pytest.approx(want["failure_time"], abs=1e-6)
        # Numbers kept as text in metadata records come back as numbers.
        assert got["ctx.light_request"] == pytest.approx(want["ctx.light_request"])
    assert episodes["sim-000004"]["param.friction"] == pytest.approx(
        truth["sim-000004"]["param.friction"])
    # Each channel keeps its own times: commands 150 µs after the joints, the 5 Hz estimate
    # 30 ms late, the 1 Hz KeyValue strings read as numbers, on real robots only.
    rows = ds.read_raw(["real-000003"], ["j1_pos", "cmd_x", "det_conf", "dropped_msgs"])
    t = {c: rows.filter(pc.equal(rows["channel"], c))["t"].to_numpy()
         for c in ("j1_pos", "cmd_x", "det_conf", "dropped_msgs")}
    np.testing.assert_allclose(t["cmd_x"] - t["j1_pos"], 150e-6, atol=1e-9)
    np.testing.assert_allclose(np.diff(t["det_conf"]), 0.2, atol=0.05)
    assert t["det_conf"][0] == pytest.approx(t["j1_pos"][0] + 0.03, abs=1e-6)
    assert 0.9 < np.median(np.diff(t["dropped_msgs"])) < 1.2
    sim_rows = ds.read_raw(["sim-000004"], ["dropped_msgs", "loop_latency_ms"])
    assert sim_rows.num_rows == 0
    _diagnosed(dataset, rec, world[1], parquet)


@pytest.mark.parametrize(("fmt", "command"), [
    ("mcap-ros2", "mcap"), ("rosbag2", "rosbag"), ("rosbag2-mcap", "rosbag"), ("ros1", "rosbag")])
def test_message_formats_ingest_to_the_mcap_dataset(
        world: tuple[Path, dict], mcap_fleet: tuple[Recorded, Path], tmp_path: Path,
        fmt: str, command: str) -> None:
    """ROS 2 CDR in MCAP, rosbag2 (sqlite3 and mcap storage, facts in custom_data), ROS 1
    (facts on a topic), a few episodes each: exactly what the JSON MCAP gave."""
    failures = sorted(e for e, cause in world[1]["events"].items() if cause != "background")
    ids = [*failures[:: max(1, len(failures) // 3)][:3], "real-000000", "sim-000004"]
    rec = record_world(world[0], tmp_path / "rec", fmt, episodes=ids)
    result = CliRunner().invoke(main, ["ingest", command, str(tmp_path / "rec"), "-m",
                                       str(rec.mapping), "-o", str(tmp_path / "ds")])
    assert result.exit_code == 0, result.output
    bag, mcap = load_dataset(tmp_path / "ds"), load_dataset(mcap_fleet[1])
    order = [("episode_id", "ascending")]
    want = mcap.episodes.filter(pc.is_in(mcap.episodes["episode_id"], pa.array(ids)))
    assert bag.episodes.sort_by(order).equals(want.sort_by(order))
    assert pc.count(bag.episodes["failure_time"]).as_py() == 3
    assert bag.channels == mcap.channels
    keys = [("episode_id", "ascending"), ("channel", "ascending"), ("t", "ascending")]
    assert bag.read_raw(ids, list(bag.channels)).sort_by(keys).equals(
        mcap.read_raw(ids, list(bag.channels)).sort_by(keys))


def test_lerobot_v3_variant_is_diagnosed(world: tuple[Path, dict], tmp_path: Path,
                                        parquet: tuple[ReportModel, ScoreCard]) -> None:
    """LeRobot v3.0 (written with pyarrow as documented): outcome from next.success, the
    other facts from a sidecar keyed by episode index, families from a CSV."""
    rec = record_world(world[0], tmp_path / "rec", "lerobot")
    runner = CliRunner()
    for i, folder in enumerate(rec.paths):
        result = runner.invoke(main, [
            "ingest", "lerobot", str(folder), "-o", str(tmp_path / "ds"), "-m", str(rec.mapping),
            "--families", str(rec.families), "--sidecar", str(rec.sidecars[folder]),
            *(["--append"] if i else [])])
        assert result.exit_code == 0, result.output
    ds = load_dataset(tmp_path / "ds")
    assert not any(name.startswith("next") for name in ds.channels)
    assert ds.channels["perception_det_conf"].family == "perception"
    assert ds.channels["system_loop_latency_ms"].family == "system"
    _diagnosed(tmp_path / "ds", rec, world[1], parquet)


def test_robomimic_variant_is_diagnosed(world: tuple[Path, dict], tmp_path: Path,
                                        parquet: tuple[ReportModel, ScoreCard]) -> None:
    """robomimic (h5py): facts in demo attributes, families from a CSV, one file per
    source."""
    rec = record_world(world[0], tmp_path / "rec", "robomimic")
    runner = CliRunner()
    for i, path in enumerate(rec.paths):
        result = runner.invoke(main, [
            "ingest", "robomimic", str(path), "-o", str(tmp_path / "ds"), "-m",
            str(rec.mapping), "--families", str(rec.families), *(["--append"] if i else [])])
        assert result.exit_code == 0, result.output
    ds = load_dataset(tmp_path / "ds")
    assert {c.family for c in ds.channels.values()} == {"dynamics", "policy", "perception",
                                                        "system"}
    _diagnosed(tmp_path / "ds", rec, world[1], parquet)

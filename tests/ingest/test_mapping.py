"""Mappings for fleets as they are: grace, optional topics, real/sim blocks, --keep-going,
where filters, KeyValue lists, typed facts, labels in folders, families kept on --append."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner
from ingest_fixtures import T0, episode_messages, write_json_mcap, write_ros2_mcap

from sim2real.cli import main
from sim2real.dataset import load_dataset
from sim2real.errors import IngestError
from sim2real.ingest import ingest_recordings, parse_mapping
from sim2real.ingest.fields import ByKey, FieldPathError, get_field, parse_field


def _late_outcome(seconds: float) -> list[Any]:
    """The fixture's messages with the outcome published ``seconds`` after the last sample."""
    msgs = [m for m in episode_messages() if m[0] != "/outcome"]
    last = max(t for _, t, _ in msgs)
    return sorted([*msgs, ("/outcome", last + int(seconds * 1e9), {"data": "failure"})],
                  key=lambda m: m[1])


def _rows(out: Path) -> list[dict[str, Any]]:
    return pq.read_table(out / "episodes.parquet").to_pylist()


def test_outcome_after_the_last_sample_counts_within_the_grace(
        tmp_path: Path, mapping_data: dict) -> None:
    path = write_ros2_mcap(tmp_path / "w01_a.mcap", _late_outcome(0.05))
    ingest_recordings([path], parse_mapping(mapping_data), tmp_path / "ds")
    assert _rows(tmp_path / "ds")[0]["outcome"] == "failure"
    mapping_data["episodes"] = {"split": "file", "grace": 0.01}
    with pytest.raises(IngestError, match="needs an outcome"):
        ingest_recordings([path], parse_mapping(mapping_data), tmp_path / "ds2")


def test_split_file_on_a_file_of_many_episodes_is_an_error(
        tmp_path: Path, mapping_data: dict) -> None:
    msgs = episode_messages() + episode_messages(t0=T0 + 3_600_000_000_000)
    path = write_ros2_mcap(tmp_path / "w01_day.mcap", sorted(msgs, key=lambda m: m[1]))
    with pytest.raises(IngestError, match=r"2 messages on the outcome topic.*split: markers"):
        ingest_recordings([path], parse_mapping(mapping_data), tmp_path / "ds")


def test_optional_channel_missing_is_a_warning_required_is_an_error(
        tmp_path: Path, mapping_data: dict) -> None:
    path = write_ros2_mcap(tmp_path / "w01_a.mcap", episode_messages())
    mapping_data["channels"] += [{"from": "/dock_pose.pose.x", "name": "dock_x",
                                  "optional": True},
                                 {"from": "/joint_states.effort[0]", "name": "j1_effort",
                                  "optional": True}]
    summary = ingest_recordings([path], parse_mapping(mapping_data), tmp_path / "ds")
    assert any("dock_x left null" in w and "'/dock_pose'" in w for w in summary.warnings)
    assert any("j1_effort left null" in w for w in summary.warnings)  # an empty array
    assert "dock_x" not in load_dataset(tmp_path / "ds").channels or True
    mapping_data["channels"][-2]["optional"] = False
    with pytest.raises(IngestError, match=r"'/dock_pose'.*channels\[3\].*optional: true"):
        ingest_recordings([path], parse_mapping(mapping_data), tmp_path / "ds2")


def test_real_and_sim_blocks(tmp_path: Path, mapping_data: dict) -> None:
    """Raw frames exist on real robots only; sim files carry a parameter topic instead."""
    mapping_data.update(source={"filename": "^(real|sim)_"}, deployment={"filename": "_(w\\d+)"},
                        images=[{"topic": "/camera/compressed", "prefix": "cam"}])
    mapping_data["real"] = {"images": [{"topic": "/camera/raw", "prefix": "raw"}],
                            "ctx": {"site_light": "dim"}}
    mapping_data["sim"] = {"param": {"friction": {"topic": "/failure", "field": "data",
                                                  "map": {"missed_pick": 0.4}}}}
    real = write_ros2_mcap(tmp_path / "real_w01.mcap", episode_messages())
    sim = write_ros2_mcap(tmp_path / "sim_w01.mcap", [
        m for m in episode_messages() if m[0] != "/camera/raw"])
    ingest_recordings([real, sim], parse_mapping(mapping_data), tmp_path / "ds")
    rows = {r["episode_id"]: r for r in _rows(tmp_path / "ds")}
    assert rows["real_w01"]["ctx.site_light"] == "dim" and rows["sim_w01"]["param.friction"] == 0.4
    assert rows["real_w01"]["param.friction"] is None
    ds = load_dataset(tmp_path / "ds")
    assert ds.read_raw(["sim_w01"], ["raw_brightness"]).num_rows == 0
    assert ds.read_raw(["real_w01"], ["raw_brightness"]).num_rows == 5
    with pytest.raises(IngestError, match=r"real\.source: cannot differ"):
        parse_mapping({**mapping_data, "real": {"source": "sim"}})


def test_keep_going_writes_the_good_files_and_lists_the_bad(
        tmp_path: Path, mapping_data: dict, write_mapping: Any) -> None:
    good = write_ros2_mcap(tmp_path / "w01_a.mcap", episode_messages())
    bad = tmp_path / "w01_b.mcap"
    bad.write_bytes(good.read_bytes()[:700])
    mapping = write_mapping(mapping_data)
    runner = CliRunner()
    args = ["ingest", "mcap", str(good), str(bad), "-m", str(mapping)]
    stopped = runner.invoke(main, [*args, "-o", str(tmp_path / "ds1")])
    assert stopped.exit_code == 2 and "w01_b.mcap" in stopped.output
    assert not (tmp_path / "ds1").exists()
    kept = runner.invoke(main, [*args, "-o", str(tmp_path / "ds2"), "--keep-going"])
    assert kept.exit_code == 2, kept.output
    assert "wrote 1 episode(s)" in kept.output and "left out 1 recording(s)" in kept.output
    assert "w01_b.mcap" in kept.output and "Traceback" not in kept.output
    assert [r["episode_id"] for r in _rows(tmp_path / "ds2")] == ["w01_a"]


def test_where_keyvalue_numeric_strings_and_empty_strings(tmp_path: Path) -> None:
    """A shared events topic filtered by field, KeyValue lists taken by key, numbers sent as
    strings, an empty string that is no label (JSON channels, as the Foxglove SDK writes)."""
    msgs: list[Any] = []
    for k in range(20):
        t = T0 + k * 50_000_000
        msgs.append(("/diag", t, {"status": [{"name": "x", "values": [
            {"key": "temp", "value": f"{40 + k}"}, {"key": "battery", "value": f"{24 - k / 10}"},
            {"key": "mode", "value": "auto"}]}]}))
        msgs.append(("/kv", t + 1000, {"key": "load" if k % 2 else "other",
                                       "value": "" if k == 5 else str(k)}))
    msgs += [("/events", T0 + 100_000_000, {"type": "start", "label": "go"}),
             ("/events", T0 + 600_000_000, {"type": "failure", "label": ""}),
             ("/events", T0 + 950_000_000, {"type": "outcome", "label": "failure"})]
    path = write_json_mcap(tmp_path / "w01_a.mcap", sorted(msgs, key=lambda m: m[1]))
    mapping = parse_mapping({
        "task": "dock", "deployment": "w01",
        "outcome": {"topic": "/events", "field": "label", "where": {"type": "outcome"}},
        "failure_time": {"topic": "/events", "where": {"type": "failure"}},
        "failure_label": {"topic": "/events", "field": "label", "where": {"type": "failure"}},
        "channels": [{"from": "/diag.status[0].values[key=battery].value", "name": "battery"},
                     {"from": "/kv.value", "name": "load", "where": {"key": "load"}}],
        "ctx": {"mode": {"topic": "/diag", "field": "status[0].values[key=mode].value"}}})
    ingest_recordings([path], mapping, tmp_path / "ds")
    row = _rows(tmp_path / "ds")[0]
    assert row["failure_time"] == pytest.approx(0.6) and row["outcome"] == "failure"
    assert row.get("failure_label") is None and row["ctx.mode"] == "auto"
    signals = load_dataset(tmp_path / "ds").read_raw(None, ["battery", "load"])
    battery = signals.filter(pc.equal(signals["channel"], "battery"))["value"].to_numpy()
    np.testing.assert_allclose(battery, 24 - np.arange(20) / 10)
    load = signals.filter(pc.equal(signals["channel"], "load"))["value"].to_numpy()
    np.testing.assert_allclose(load, [1, 3, 7, 9, 11, 13, 15, 17, 19])  # k == 5: empty


def test_key_steps_in_field_paths() -> None:
    assert parse_field("status[0].values[key=cpu load].value") == (
        "status", 0, "values", ByKey("cpu load"), "value")
    msg = {"values": [{"key": "a", "value": "1"}, {"key": "b", "value": "2"}]}
    assert get_field(msg, parse_field("values[key=b].value")) == "2"
    with pytest.raises(FieldPathError, match=r"no element with key 'c'; keys: a, b"):
        get_field(msg, parse_field("values[key=c].value"))


def test_typed_facts_labels_in_folders_and_a_sidecar(tmp_path: Path,
                                                    mapping_data: dict) -> None:
    (tmp_path / "success").mkdir()
    (tmp_path / "failure").mkdir()
    paths = [write_ros2_mcap(tmp_path / label / f"w01_{label}.mcap", episode_messages())
             for label in ("success", "failure")]
    (tmp_path / "meta.csv").write_text("stem,distance,firmware\nw01_success,0.80,1.10\n"
                                       "w01_failure,1.25,1.10\n")
    mapping_data.update(outcome={"path": "/(success|failure)/"},
                        sidecar={"path": "meta.csv", "key": "stem"},
                        ctx={"start_distance": {"csv": "distance"}},
                        sys={"firmware": {"csv": "firmware"}})
    ingest_recordings(paths, parse_mapping(mapping_data, base_dir=tmp_path), tmp_path / "ds")
    rows = {r["episode_id"]: r for r in _rows(tmp_path / "ds")}
    assert rows["w01_success"]["outcome"] == "success"
    assert rows["w01_failure"]["outcome"] == "failure"
    assert rows["w01_failure"]["ctx.start_distance"] == 1.25  # a number, not "1.25"
    assert rows["w01_failure"]["sys.firmware"] == "1.10"  # sys.* stays as written


def test_append_keeps_a_hand_edited_channels_csv(tmp_path: Path, mapping_data: dict,
                                                 write_mapping: Any) -> None:
    runner = CliRunner()
    mapping = write_mapping(mapping_data)
    first = write_ros2_mcap(tmp_path / "w01_a.mcap", episode_messages())
    second = write_ros2_mcap(tmp_path / "w02_b.mcap", episode_messages())
    out = tmp_path / "ds"
    assert runner.invoke(main, ["ingest", "mcap", str(first), "-m", str(mapping),
                                "-o", str(out)]).exit_code == 0
    text = (out / "channels.csv").read_text().replace("j1_vel,dynamics", "j1_vel,policy")
    (out / "channels.csv").write_text(text)
    result = runner.invoke(main, ["ingest", "mcap", str(second), "-m", str(mapping),
                                  "-o", str(out), "--append"])
    assert result.exit_code == 0, result.output
    assert "j1_vel,policy" in (out / "channels.csv").read_text()
    assert "kept 'j1_vel'" in result.output and "family dynamics" in result.output


def test_init_mapping_samples_several_files_and_skips_what_it_cannot_decode(
        tmp_path: Path) -> None:
    from mcap.writer import Writer

    real = write_ros2_mcap(tmp_path / "real.mcap", episode_messages())
    sim = write_ros2_mcap(tmp_path / "sim.mcap", [m for m in episode_messages()
                                                  if m[0] != "/camera/raw"])
    proto = tmp_path / "proto.mcap"
    with proto.open("wb") as f:
        writer = Writer(f)
        writer.start()
        schema = writer.register_schema("pkg.Pose", "protobuf", b"\x00garbage")
        channel = writer.register_channel("/pose_pb", "protobuf", schema)
        writer.add_message(channel, log_time=T0, data=b"\x01\x02", publish_time=T0)
        json_schema = writer.register_schema("Odom", "jsonschema", b"{}")
        odom = writer.register_channel("/odom", "json", json_schema)
        writer.add_message(odom, log_time=T0, data=json.dumps({"x": 1.5}).encode(),
                           publish_time=T0)
        writer.finish()
    out = tmp_path / "mapping.yaml"
    result = CliRunner().invoke(main, ["init-mapping", str(real), str(sim), str(proto),
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "/pose_pb" in text and "skipped, cannot be decoded" in text
    assert "# check:" in text and '"/odom.x"' in text
    assert "# only in proto.mcap: optional" in text and "optional: true}" in text
    assert "# only in real.mcap, sim.mcap: optional" in text
    yaml.safe_load(text)  # still valid YAML

"""MCAP (ROS 2 and JSON), rosbag2 (sqlite3, mcap) and ROS 1 recordings ingest alike."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from ingest_fixtures import (
    T0,
    episode_messages,
    frame,
    joint_position,
    write_json_mcap,
    write_ros1,
    write_ros2_mcap,
    write_rosbag2,
)

from sim2real.dataset import load_dataset
from sim2real.ingest import ingest_recordings, parse_mapping
from sim2real.ingest.images import frame_stats, hist_distance

Writer = Callable[[Path, list[Any]], Path]
FORMATS: dict[str, tuple[str, str, Writer]] = {
    "mcap-ros2": ("mcap", ".mcap", write_ros2_mcap),
    "mcap-json": ("mcap", ".mcap", write_json_mcap),
    "rosbag2-sqlite3": ("rosbag", "", write_rosbag2),
    "rosbag2-mcap": ("rosbag", "", lambda p, m: write_rosbag2(p, m, "mcap")),
    "ros1": ("rosbag", ".bag", write_ros1),
}


def _ingest(tmp_path: Path, fmt: str, mapping: dict[str, Any], messages: list[Any],
            name: str = "w03_r01_ep1") -> tuple[dict[str, Any], Any]:
    kind, suffix, writer = FORMATS[fmt]
    path = writer(tmp_path / f"{name}{suffix}", messages)
    out = tmp_path / "ds"
    ingest_recordings([path], parse_mapping(mapping), out, kind=kind)  # type: ignore[arg-type]
    episodes = pq.read_table(out / "episodes.parquet").to_pylist()
    return episodes[0], load_dataset(out).read_signals()


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_channels_match_the_messages(tmp_path: Path, fmt: str, mapping_data: dict) -> None:
    row, signals = _ingest(tmp_path, fmt, mapping_data, episode_messages())
    assert row["episode_id"] == "w03_r01_ep1"
    assert (row["source"], row["task"], row["deployment"]) == ("real", "pick_place", "w03")
    assert (row["outcome"], row["failure_label"]) == ("failure", "missed_pick")
    assert row["failure_time"] == pytest.approx(0.3)
    assert row["ctx.object_type"] == "bottle"
    assert int(row["started_at"].timestamp() * 1e9) == pytest.approx(T0, abs=1000)
    joints = signals.filter(pc.is_valid(signals["j1_pos"]))
    assert joints.num_rows == 50
    t = joints["t"].to_numpy()
    np.testing.assert_allclose(t, np.arange(50) / 100, atol=1e-9)
    for name, j in (("j1_pos", 0), ("j3_pos", 2)):
        expected = [joint_position(k, j) for k in range(50)]
        np.testing.assert_allclose(joints[name].to_numpy(), expected)
    np.testing.assert_allclose(joints["j1_vel"].to_numpy(), 0.1 * np.arange(50))
    assert np.all(np.diff(signals["t"].to_numpy()) > 0)


@pytest.mark.parametrize("fmt", ["mcap-ros2", "mcap-json", "ros1"])
def test_image_statistics_match_the_frames(tmp_path: Path, fmt: str, mapping_data: dict) -> None:
    _, signals = _ingest(tmp_path, fmt, mapping_data, episode_messages())
    pairs = [frame_stats(frame(k)) for k in range(5)]
    expected = np.array([p[0] for p in pairs])
    hist = hist_distance(np.array([p[1] for p in pairs]))
    for prefix in ("cam", "raw"):  # PNG-compressed and raw rgb8 frames of the same pixels
        frames = signals.filter(pc.is_valid(signals[f"{prefix}_brightness"]))
        assert frames.num_rows == 5
        for i, stat in enumerate(("brightness", "contrast", "sharpness", "saturation")):
            np.testing.assert_allclose(frames[f"{prefix}_{stat}"].to_numpy(), expected[:, i],
                                       rtol=1e-6)
        np.testing.assert_allclose(frames[f"{prefix}_hist_dist"].to_numpy(), hist, atol=1e-9)
    brightness = signals.filter(pc.is_valid(signals["cam_brightness"]))["cam_brightness"]
    assert np.all(np.diff(brightness.to_numpy()) < 0)  # the fixture darkens frame by frame


def test_channels_csv_records_families(tmp_path: Path, mapping_data: dict) -> None:
    _ingest(tmp_path, "mcap-ros2", mapping_data, episode_messages())
    text = (tmp_path / "ds" / "channels.csv").read_text()
    assert "j1_vel,dynamics,rad/s" in text
    assert "cam_sharpness,perception," in text


def test_markers_split_one_file_into_episodes(tmp_path: Path, mapping_data: dict) -> None:
    msgs = episode_messages(outcome="success", fail_at=None) + episode_messages(
        outcome="failure", fail_at=0.2, t0=T0 + 2_000_000_000)
    msgs += [("/outcome", T0 - 1, {"data": "start"}), ("/outcome", T0 + 1_999_999_999,
                                                       {"data": "start"})]
    mapping_data["episodes"] = {"split": "markers",
                                "start": {"topic": "/outcome", "field": "data", "equals": "start"}}
    mapping_data["outcome"] = {"topic": "/outcome", "field": "data", "pick": "last"}
    _, suffix, writer = FORMATS["mcap-ros2"]
    path = writer(tmp_path / f"w04_run{suffix}", sorted(msgs, key=lambda m: m[1]))
    ingest_recordings([path], parse_mapping(mapping_data), tmp_path / "ds")
    episodes = pq.read_table(tmp_path / "ds" / "episodes.parquet").to_pylist()
    assert [e["episode_id"] for e in episodes] == ["w04_run-000", "w04_run-001"]
    assert [e["outcome"] for e in episodes] == ["success", "failure"]
    assert episodes[0]["failure_time"] is None
    assert episodes[1]["failure_time"] == pytest.approx(0.2 + 1e-9)
    signals = load_dataset(tmp_path / "ds").read_signals()
    for ep in ("w04_run-000", "w04_run-001"):
        rows = signals.filter(pc.equal(signals["episode_id"], ep))
        assert pc.count(rows["j1_pos"]).as_py() == 50


def test_header_time_and_sidecar(tmp_path: Path, mapping_data: dict) -> None:
    (tmp_path / "meta.csv").write_text("episode_id,object,wave\nw03_r01_ep1,mug,w09\n")
    mapping_data.update(time="header", sidecar={"path": "meta.csv"},
                        deployment={"csv": "wave"}, ctx={"object_type": {"csv": "object"}},
                        param={"friction": 0.8}, source="sim")
    mapping = parse_mapping(mapping_data, base_dir=tmp_path)
    path = write_ros2_mcap(tmp_path / "w03_r01_ep1.mcap", episode_messages())
    ingest_recordings([path], mapping, tmp_path / "ds")
    row = pq.read_table(tmp_path / "ds" / "episodes.parquet").to_pylist()[0]
    assert (row["deployment"], row["ctx.object_type"], row["param.friction"]) == ("w09", "mug", 0.8)


def test_append_adds_episodes(tmp_path: Path, mapping_data: dict) -> None:
    mapping = parse_mapping(mapping_data)
    first = write_ros2_mcap(tmp_path / "w01_a.mcap", episode_messages())
    second = write_ros2_mcap(tmp_path / "w02_b.mcap", episode_messages(outcome="success"))
    ingest_recordings([first], mapping, tmp_path / "ds")
    ingest_recordings([second], mapping, tmp_path / "ds", append=True)
    ids = pq.read_table(tmp_path / "ds" / "episodes.parquet")["episode_id"].to_pylist()
    assert ids == ["w01_a", "w02_b"]
    assert len(list((tmp_path / "ds" / "signals").glob("*.parquet"))) == 2


@pytest.mark.parametrize("fmt", ["mcap-ros2", "ros1"])
def test_nan_and_inf_in_a_recording_are_counted_and_left_out(tmp_path: Path, fmt: str,
                                                            mapping_data: dict) -> None:
    messages = episode_messages()
    joints = [m for m in messages if m[0] == "/joint_states"]
    joints[3][2]["position"][0] = float("nan")
    joints[7][2]["position"][0] = float("inf")
    joints[7][2]["position"][2] = float("-inf")
    kind, suffix, writer = FORMATS[fmt]
    path = writer(tmp_path / f"w03_r01_ep1{suffix}", messages)
    result = ingest_recordings([path], parse_mapping(mapping_data), tmp_path / "ds",
                               kind=kind)  # type: ignore[arg-type]
    said = [w for w in result.warnings if "left out (NaN, inf or missing)" in w]
    assert any("2 sample(s) of j1_pos" in w for w in said), result.warnings
    assert any("1 sample(s) of j3_pos" in w for w in said), result.warnings
    signals = load_dataset(tmp_path / "ds").read_signals()
    j1 = signals.filter(pc.is_valid(signals["j1_pos"]))
    assert j1.num_rows == 48 and np.isfinite(j1["j1_pos"].to_numpy()).all()
    assert signals.filter(pc.is_valid(signals["j3_pos"])).num_rows == 49

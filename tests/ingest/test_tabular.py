"""LeRobot (v2.1, v3.0) folders written with pyarrow + json, robomimic HDF5 with h5py."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from ingest_fixtures import frame, png

from sim2real.cli import main
from sim2real.errors import IngestError
from sim2real.ingest import parse_mapping
from sim2real.ingest._tables import EpisodeDefaults
from sim2real.ingest.images import frame_stats
from sim2real.ingest.lerobot import read_lerobot
from sim2real.ingest.robomimic import read_robomimic

FPS = 10
NAMES = ["shoulder_pan", "elbow", "gripper"]


def _state(ep: int, k: int) -> list[float]:
    return [ep + 0.1 * k, -0.5 * k, 0.01 * ep]


def _frames(ep: int, n: int, start: int) -> pa.Table:
    vec = pa.list_(pa.float32(), 3)
    return pa.table({
        "observation.state": pa.array([_state(ep, k) for k in range(n)], type=vec),
        "action": pa.array([[0.5 * k, 0.0] for k in range(n)], type=pa.list_(pa.float32(), 2)),
        "observation.images.top": pa.array(
            [{"bytes": png(frame(k)), "path": None} for k in range(n)],
            type=pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
        "timestamp": pa.array(np.arange(n) / FPS, type=pa.float32()),
        "frame_index": pa.array(range(n), type=pa.int64()),
        "episode_index": pa.array([ep] * n, type=pa.int64()),
        "index": pa.array(range(start, start + n), type=pa.int64()),
        "task_index": pa.array([ep % 2] * n, type=pa.int64()),
    })


def _info(version: str) -> dict:
    return {"codebase_version": version, "fps": FPS, "features": {
        "observation.state": {"dtype": "float32", "shape": [3], "names": NAMES},
        "action": {"dtype": "float32", "shape": [2], "names": None},
        "observation.images.top": {"dtype": "image", "shape": [48, 64, 3]},
        "observation.images.wrist": {"dtype": "video", "shape": [48, 64, 3]},
        "timestamp": {"dtype": "float32", "shape": [1]},
        "frame_index": {"dtype": "int64", "shape": [1]},
        "episode_index": {"dtype": "int64", "shape": [1]},
        "index": {"dtype": "int64", "shape": [1]},
        "task_index": {"dtype": "int64", "shape": [1]}}}


def write_lerobot(root: Path, version: str, lengths: tuple[int, ...] = (6, 4)) -> Path:
    """A LeRobot dataset folder in layout v2.1 or v3.0."""
    (root / "meta").mkdir(parents=True)
    (root / "meta" / "info.json").write_text(json.dumps(_info(version)))
    tasks = ["pick the cube", "place the cube"]
    tables, start = [], 0
    for ep, n in enumerate(lengths):
        tables.append(_frames(ep, n, start))
        start += n
    if version == "v2.1":
        (root / "data" / "chunk-000").mkdir(parents=True)
        for ep, table in enumerate(tables):
            pq.write_table(table, root / "data" / "chunk-000" / f"episode_{ep:06d}.parquet")
        (root / "meta" / "tasks.jsonl").write_text("\n".join(
            json.dumps({"task_index": i, "task": t}) for i, t in enumerate(tasks)))
        (root / "meta" / "episodes.jsonl").write_text("\n".join(
            json.dumps({"episode_index": i, "tasks": [tasks[i % 2]], "length": n})
            for i, n in enumerate(lengths)))
        return root
    (root / "data" / "chunk-000").mkdir(parents=True)
    pq.write_table(pa.concat_tables(tables), root / "data" / "chunk-000" / "file-000.parquet")
    (root / "meta" / "episodes" / "chunk-000").mkdir(parents=True)
    bounds = np.cumsum((0, *lengths))
    pq.write_table(pa.table({"episode_index": list(range(len(lengths))),
                             "tasks": [[tasks[i % 2]] for i in range(len(lengths))],
                             "length": list(lengths), "dataset_from_index": bounds[:-1],
                             "dataset_to_index": bounds[1:]}),
                   root / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    pq.write_table(pa.table({"task_index": [0, 1], "task": tasks}), root / "meta" / "tasks.parquet")
    return root


@pytest.mark.parametrize("version", ["v2.1", "v3.0"])
def test_lerobot_layouts(tmp_path: Path, version: str) -> None:
    root = write_lerobot(tmp_path / "koch_pick", version)
    with pytest.warns(UserWarning, match="video feature 'observation.images.wrist'"):
        episodes, signals, channels = read_lerobot(root)
    rows = episodes.to_pylist()
    assert [r["episode_id"] for r in rows] == ["koch_pick-000000", "koch_pick-000001"]
    assert [r["task"] for r in rows] == ["pick the cube", "place the cube"]
    assert {r["source"] for r in rows} == {"real"} and rows[0]["deployment"] == "koch_pick"
    assert rows[0]["started_at"] < rows[1]["started_at"]
    ep1 = signals.filter(pc.equal(signals["episode_id"], "koch_pick-000001"))
    np.testing.assert_allclose(ep1["t"].to_numpy(), np.arange(4) / FPS, rtol=1e-6)
    np.testing.assert_allclose(ep1["state_shoulder_pan"].to_numpy(),
                               [_state(1, k)[0] for k in range(4)], rtol=1e-6)
    np.testing.assert_allclose(ep1["action_0"].to_numpy(), 0.5 * np.arange(4))
    np.testing.assert_allclose(ep1["images_top_brightness"].to_numpy(),
                               [frame_stats(frame(k))[0][0] for k in range(4)], rtol=1e-6)
    families = {c.name: c.family for c in channels}
    assert families["action_1"] == "policy" and families["state_elbow"] == "dynamics"
    assert families["images_top_sharpness"] == "perception"


def test_lerobot_defaults_and_sidecar(tmp_path: Path) -> None:
    root = write_lerobot(tmp_path / "ds_in", "v3.0")
    (tmp_path / "side.csv").write_text(
        "episode_id,outcome,failure_time,ctx.light\nds_in-000001,failure,0.2,dim\n")
    defaults = EpisodeDefaults(deployment="w07", sidecar=tmp_path / "side.csv")
    with pytest.warns(UserWarning):
        episodes, _, _ = read_lerobot(root, defaults)
    rows = episodes.to_pylist()
    assert [r["outcome"] for r in rows] == ["success", "failure"]
    assert rows[1]["failure_time"] == 0.2 and rows[1]["ctx.light"] == "dim"
    assert {r["deployment"] for r in rows} == {"w07"}


def test_lerobot_without_info_json(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match=r"meta/info\.json"):
        read_lerobot(tmp_path)


def write_robomimic(path: Path) -> Path:
    """A robomimic file: demos 0, 1 and 10 (numeric order), with an image observation."""
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": "Lift",
                                             "env_kwargs": {"control_freq": 20}})
        for i, n in ((0, 5), (1, 3), (10, 4)):
            demo = data.create_group(f"demo_{i}")
            demo.attrs["num_samples"] = n
            demo.create_dataset("actions", data=np.arange(n * 7).reshape(n, 7) / 10)
            demo.create_dataset("states", data=np.ones((n, 4)) * i)
            rewards = np.zeros(n)
            rewards[-1] = 1.0 if i != 1 else 0.0
            demo.create_dataset("rewards", data=rewards)
            demo.create_dataset("dones", data=(rewards > 0).astype(np.int64))
            demo.create_dataset("obs/robot0_eef_pos", data=np.arange(n * 3).reshape(n, 3) * 0.5)
            demo.create_dataset("obs/agentview_image",
                                data=np.stack([frame(k) for k in range(n)]))
        f.create_dataset("mask/train", data=np.array([b"demo_0", b"demo_10"]))
        f.create_dataset("mask/valid", data=np.array([b"demo_1"]))
    return path


def test_robomimic(tmp_path: Path) -> None:
    episodes, signals, channels = read_robomimic(write_robomimic(tmp_path / "lift_ph.hdf5"))
    rows = episodes.to_pylist()
    assert [r["episode_id"] for r in rows] == ["lift_ph-demo_0", "lift_ph-demo_1",
                                               "lift_ph-demo_10"]
    assert [r["outcome"] for r in rows] == ["success", "failure", "success"]
    assert [r["ctx.split"] for r in rows] == ["train", "valid", "train"]
    assert {(r["source"], r["task"]) for r in rows} == {("sim", "Lift")}
    demo10 = signals.filter(pc.equal(signals["episode_id"], "lift_ph-demo_10"))
    np.testing.assert_allclose(demo10["t"].to_numpy(), np.arange(4) / 20)
    np.testing.assert_allclose(demo10["action_6"].to_numpy(), (np.arange(4) * 7 + 6) / 10)
    np.testing.assert_allclose(demo10["robot0_eef_pos_2"].to_numpy(), (np.arange(4) * 3 + 2) / 2)
    np.testing.assert_allclose(demo10["agentview_image_contrast"].to_numpy(),
                               [frame_stats(frame(k))[0][1] for k in range(4)], rtol=1e-6)
    assert {c.name: c.family for c in channels}["action_0"] == "policy"


def test_cli_lerobot_and_robomimic(tmp_path: Path) -> None:
    runner = CliRunner()
    root = write_lerobot(tmp_path / "koch", "v2.1")
    result = runner.invoke(main, ["ingest", "lerobot", str(root), "-o", str(tmp_path / "ds"),
                                  "--deployment", "w01"])
    assert result.exit_code == 0, result.output
    path = write_robomimic(tmp_path / "lift.hdf5")
    result = runner.invoke(main, ["ingest", "robomimic", str(path), "-o", str(tmp_path / "ds"),
                                  "--append"])
    assert result.exit_code == 0, result.output
    episodes = pq.read_table(tmp_path / "ds" / "episodes.parquet")
    assert episodes.num_rows == 5
    assert episodes["source"].to_pylist() == ["real", "real", "sim", "sim", "sim"]


def test_robomimic_facts_from_attributes_families_and_a_sidecar_by_demo_name(
        tmp_path: Path) -> None:
    path = write_robomimic(tmp_path / "lift.hdf5")
    with h5py.File(path, "a") as f:
        f["data"].attrs["operator"] = "ana"
        f["data/demo_1"].attrs["operator"] = "bo"
        f["data/demo_10"].attrs["light"] = "0.35"
        f["data/demo_0/obs/robot0_eef_pos"][1, 0] = np.inf
    (tmp_path / "map.yaml").write_text(
        "ctx: {light: {attr: light}}\nsys: {operator: {attr: operator}}\n")
    (tmp_path / "fam.csv").write_text("channel,family,unit\nrobot0_eef_pos_2,perception,m\n")
    (tmp_path / "side.csv").write_text("episode_id,failure_time,ctx.split\ndemo_1,0.05,holdout\n")
    result = CliRunner().invoke(main, [
        "ingest", "robomimic", str(path), "-o", str(tmp_path / "ds"), "-m",
        str(tmp_path / "map.yaml"), "--families", str(tmp_path / "fam.csv"),
        "--sidecar", str(tmp_path / "side.csv")])
    assert result.exit_code == 0, result.output
    assert "1 sample(s) were NaN or inf" in result.output
    assert "robot0_eef_pos_0 (1)" in result.output
    rows = {r["episode_id"]: r for r in pq.read_table(tmp_path / "ds" / "episodes.parquet")
            .to_pylist()}
    assert rows["lift-demo_0"]["sys.operator"] == "ana"  # the file's, where the demo has none
    assert rows["lift-demo_1"]["sys.operator"] == "bo"
    assert rows["lift-demo_10"]["ctx.light"] == 0.35 and rows["lift-demo_0"]["ctx.light"] is None
    assert rows["lift-demo_1"]["failure_time"] == 0.05
    assert rows["lift-demo_1"]["ctx.split"] == "holdout"
    channels = (tmp_path / "ds" / "channels.csv").read_text()
    assert "robot0_eef_pos_2,perception,m" in channels
    assert "robot0_eef_pos_0," not in channels  # undeclared: inferred when analysed, and said


def test_lerobot_next_success_is_the_outcome_not_a_channel(tmp_path: Path) -> None:
    root = write_lerobot(tmp_path / "ds_in", "v3.0")
    info = json.loads((root / "meta" / "info.json").read_text())
    info["features"]["next.success"] = {"dtype": "bool", "shape": [1], "names": None}
    (root / "meta" / "info.json").write_text(json.dumps(info))
    part = root / "data" / "chunk-000" / "file-000.parquet"
    table = pq.read_table(part)
    success = (pc.equal(table["episode_index"], 0).to_numpy(zero_copy_only=False)
               & (table["frame_index"].to_numpy() == 5))  # episode 0 succeeds at its end
    pq.write_table(table.append_column("next.success", pa.array(success)), part)
    with pytest.warns(UserWarning):
        episodes, signals, channels = read_lerobot(root)
    assert episodes["outcome"].to_pylist() == ["success", "failure"]
    assert "next_success" not in signals.column_names
    assert "success" not in {c.name for c in channels}


@pytest.mark.parametrize("info", [
    [1, 2], {"codebase_version": "v3.0", "features": ["state"]},
    {"codebase_version": "v3.0", "features": {"observation.state": {"shape": "3"}}},
    {"codebase_version": "v3.0", "features": {"observation.state": {"dtype": "float32",
                                                                    "shape": [-1]}}},
])
def test_lerobot_info_json_of_the_wrong_shape(tmp_path: Path, info: object) -> None:
    root = write_lerobot(tmp_path / "ds_in", "v3.0")
    (root / "meta" / "info.json").write_text(json.dumps(info))
    with pytest.raises(IngestError, match=r"info\.json"):
        read_lerobot(root)


def test_lerobot_frame_columns_as_facts(tmp_path: Path) -> None:
    """``{feature: ...}`` reads an episode fact from a frame column: next.reward's last
    value, next.done's first; neither becomes a channel."""
    root = write_lerobot(tmp_path / "ds_in", "v3.0")
    info = json.loads((root / "meta" / "info.json").read_text())
    for key, dtype in (("next.reward", "float32"), ("next.done", "bool")):
        info["features"][key] = {"dtype": dtype, "shape": [1], "names": None}
    (root / "meta" / "info.json").write_text(json.dumps(info))
    part = root / "data" / "chunk-000" / "file-000.parquet"
    table = pq.read_table(part)
    frame = table["frame_index"].to_numpy()
    last = np.r_[frame[1:] == 0, True]  # each episode's last frame
    table = table.append_column("next.reward", pa.array(0.25 * frame, pa.float32()))
    pq.write_table(table.append_column("next.done", pa.array(last)), part)
    mapping = parse_mapping({"sys": {"reward": {"feature": "next.reward", "pick": "last"},
                                     "done_at_start": {"feature": "next.done"}}})
    with pytest.warns(UserWarning):
        episodes, signals, channels = read_lerobot(root, mapping=mapping)
    rows = episodes.to_pylist()
    assert [r["sys.reward"] for r in rows] == [1.25, 0.75]  # frames 0-5 and 0-3
    assert [r["sys.done_at_start"] for r in rows] == [False, False]
    assert not {"next_reward", "next_done"} & set(signals.column_names)
    assert not any(c.name.startswith(("reward", "done")) for c in channels)

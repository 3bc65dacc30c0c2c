"""Bad input: a clear IngestError naming file and topic/key, exit code 2, nothing changed."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
from click.testing import CliRunner
from ingest_fixtures import T0, episode_messages, write_ros2_mcap

from sim2real.cli import main
from sim2real.errors import IngestError, InputError
from sim2real.ingest import ingest_recordings, load_mapping, parse_mapping
from sim2real.ingest.robomimic import read_robomimic


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_truncated_mcap_names_the_file(tmp_path: Path, mapping_data: dict) -> None:
    good = write_ros2_mcap(tmp_path / "w01_a.mcap", episode_messages())
    for size in (len(good.read_bytes()) // 2, 40):
        bad = tmp_path / f"cut{size}.mcap"
        bad.write_bytes(good.read_bytes()[:size])
        with pytest.raises(IngestError, match=rf"cut{size}\.mcap.*truncated or corrupt"):
            ingest_recordings([bad], parse_mapping(mapping_data), tmp_path / "ds")
    assert not (tmp_path / "ds").exists()


def test_not_an_mcap_file(tmp_path: Path, mapping_data: dict) -> None:
    bad = tmp_path / "notes.mcap"
    bad.write_text("hello")
    with pytest.raises(IngestError, match=r"notes\.mcap"):
        ingest_recordings([bad], parse_mapping(mapping_data), tmp_path / "ds")


def test_missing_topic_names_topic_and_key(tmp_path: Path, mapping_data: dict) -> None:
    path = write_ros2_mcap(tmp_path / "w01_a.mcap", episode_messages())
    mapping_data["channels"].append("/wrench.force.z -> grip_force")
    with pytest.raises(IngestError, match=r"w01_a\.mcap.*'/wrench'.*channels\[3\]"):
        ingest_recordings([path], parse_mapping(mapping_data), tmp_path / "ds")


def test_bad_field_path_names_topic_and_fields(tmp_path: Path, mapping_data: dict) -> None:
    path = write_ros2_mcap(tmp_path / "w01_a.mcap", episode_messages())
    mapping_data["channels"] = ["/joint_states.positions[0] -> j1_pos"]
    with pytest.raises(IngestError, match=r"w01_a\.mcap.*'/joint_states'.*positions.*position"):
        ingest_recordings([path], parse_mapping(mapping_data), tmp_path / "ds")
    mapping_data["channels"] = ["/joint_states.position[7] -> j8_pos"]
    with pytest.raises(IngestError, match=r"has 3 elements"):
        ingest_recordings([path], parse_mapping(mapping_data), tmp_path / "ds")
    mapping_data["channels"] = ["/joint_states.name[0] -> j1_name"]
    with pytest.raises(IngestError, match=r"expected a number"):
        ingest_recordings([path], parse_mapping(mapping_data), tmp_path / "ds")


def test_unknown_family_names_the_key(tmp_path: Path, mapping_data: dict,
                                      write_mapping: object) -> None:
    mapping_data["channels"][2]["family"] = "vision"
    path = write_mapping(mapping_data)  # type: ignore[operator]
    with pytest.raises(IngestError, match=r"mapping\.yaml: key channels\[2\]\.family.*'vision'"):
        load_mapping(path)


def test_wrong_hdf5_layout_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "other.hdf5"
    with h5py.File(path, "w") as f:
        f.create_dataset("observations", data=np.zeros((3, 2)))
    with pytest.raises(IngestError, match=r"other\.hdf5: no group 'data'.*expected data/demo_N"):
        read_robomimic(path)
    with h5py.File(path, "w") as f:
        f.create_group("data/demo_0/obs")
    with pytest.raises(IngestError, match=r"data/demo_0/actions' is missing"):
        read_robomimic(path)
    path.write_text("not hdf5")
    with pytest.raises(IngestError, match=r"other\.hdf5: not a readable HDF5"):
        read_robomimic(path)


def test_failed_append_leaves_the_dataset_unchanged(tmp_path: Path, mapping_data: dict) -> None:
    mapping = parse_mapping(mapping_data)
    ingest_recordings([write_ros2_mcap(tmp_path / "w01_a.mcap", episode_messages())], mapping,
                      tmp_path / "ds")
    before = _snapshot(tmp_path / "ds")
    good = write_ros2_mcap(tmp_path / "w02_b.mcap", episode_messages())
    bad = tmp_path / "w02_c.mcap"
    bad.write_bytes(good.read_bytes()[:500])
    with pytest.raises(IngestError):
        ingest_recordings([good, bad], mapping, tmp_path / "ds", append=True)
    with pytest.raises(InputError, match="already in the dataset"):  # a clashing episode ID
        ingest_recordings([tmp_path / "w01_a.mcap"], mapping, tmp_path / "ds", append=True)
    assert _snapshot(tmp_path / "ds") == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_cli_exit_code_2_on_bad_input(tmp_path: Path, mapping_data: dict,
                                      write_mapping: object) -> None:
    path = write_ros2_mcap(tmp_path / "w01_a.mcap", episode_messages())
    mapping_data["channels"].append("/nope.x -> x")
    mapping = write_mapping(mapping_data)  # type: ignore[operator]
    runner = CliRunner()
    result = runner.invoke(main, ["ingest", "mcap", str(path), "-m", str(mapping),
                                  "-o", str(tmp_path / "ds")])
    assert result.exit_code == 2, result.output
    assert "'/nope'" in result.output and "w01_a.mcap" in result.output
    bad_h5 = tmp_path / "x.hdf5"
    with h5py.File(bad_h5, "w") as f:
        f.create_group("stuff")
    result = runner.invoke(main, ["ingest", "robomimic", str(bad_h5), "-o", str(tmp_path / "d")])
    assert result.exit_code == 2 and "x.hdf5" in result.output


def test_a_message_that_does_not_decode_names_topic_and_time(tmp_path: Path,
                                                             mapping_data: dict) -> None:
    """Valid CRCs, but a message is not the CDR its schema says (a recorder bug)."""
    from mcap.writer import Writer
    from rosbags.typesys import Stores, get_typestore

    msgdef = get_typestore(Stores.ROS2_HUMBLE).generate_msgdef("sensor_msgs/msg/JointState",
                                                               ros_version=2)[0]
    path = tmp_path / "w01_a.mcap"
    with path.open("wb") as f:
        writer = Writer(f)
        writer.start(profile="ros2", library="test")
        schema = writer.register_schema("sensor_msgs/msg/JointState", "ros2msg", msgdef.encode())
        channel = writer.register_channel("/joint_states", "cdr", schema)
        writer.add_message(channel, log_time=T0 + 5, data=b"\x00\x01\x00\x00\xff",
                           publish_time=T0 + 5)
        writer.finish()
    with pytest.raises(IngestError, match=rf"w01_a\.mcap: topic '/joint_states' at {T0 + 5} ns"):
        ingest_recordings([path], parse_mapping(mapping_data), tmp_path / "ds")


def test_a_mapping_of_random_bytes(tmp_path: Path) -> None:
    path = tmp_path / "mapping.yaml"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 400).astype(np.uint8).tobytes())
    result = CliRunner().invoke(main, ["ingest", "mcap", str(tmp_path), "-m", str(path),
                                       "-o", str(tmp_path / "ds")])
    assert result.exit_code == 2 and "mapping.yaml" in result.output
    assert "Traceback" not in result.output


def test_a_yaml_error_is_one_line_naming_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "mapping.yaml"
    path.write_text("task: pick\nchannels: [/odom.x -> x,\n")
    result = CliRunner().invoke(main, ["ingest", "mcap", str(tmp_path), "-m", str(path),
                                       "-o", str(tmp_path / "ds")])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1, result.output
    assert "mapping.yaml, line 3, column 1: not valid YAML: expected the node content" in \
        result.output

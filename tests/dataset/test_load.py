"""Every rule of the dataset format: good data loads, each violation names file/column/row."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from sim2real.cli import main
from sim2real.dataset import Channel, ParamRange, load_dataset, write_dataset
from sim2real.errors import DatasetError

from ..conftest import ObjectStore


def _episodes(**overrides: list[object]) -> pa.Table:
    columns: dict[str, list[object]] = {
        "episode_id": ["r1", "r2", "s1", "s2"],
        "source": ["real", "real", "sim", "sim"],
        "task": ["pick"] * 4,
        "outcome": ["failure", "success", "success", None],
        "failure_time": [0.15, None, None, None],
        "deployment": ["w01", "w02", None, None],
        "started_at": ["2026-01-05T08:00:00Z", "2026-01-12 08:00:00", None, None],
        "ctx.object": ["box", "box", "box", "can"],
        "param.friction": [None, None, 0.8, 0.9],
    }
    columns.update(overrides)
    return pa.table(columns)


def _signals(**overrides: list[object]) -> pa.Table:
    columns: dict[str, list[object]] = {
        "episode_id": ["r1", "r1", "r2", "r2", "s1", "s1", "s2", "s2"],
        "t": [0.0, 0.2, 0.0, 0.2, 0.0, 0.25, 0.0, 0.25],
        "grip_force": [1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0],
        "det_confidence": [0.9] * 8,
    }
    columns.update(overrides)
    return pa.table(columns)


def _write(tmp_path: Path, episodes: pa.Table | None = None, signals: pa.Table | None = None,
           channels: list[Channel] | None = None) -> Path:
    return write_dataset(tmp_path / "ds", _episodes() if episodes is None else episodes,
                         _signals() if signals is None else signals,
                         channels=channels or [Channel("grip_force", "dynamics", "N")],
                         params=[ParamRange("friction", 0.5, 1.2, 0.85)])


def test_valid_dataset_loads_with_types_and_order(tmp_path: Path) -> None:
    ds = load_dataset(_write(tmp_path))
    assert ds.deployments == ("w01", "w02")
    assert ds.episodes["started_at"].type == pa.timestamp("us", tz="UTC")
    assert ds.channels["grip_force"].family == "dynamics"
    assert ds.channels["det_confidence"].family == "perception"
    assert ds.channels["det_confidence"].inferred
    assert any("det_confidence->perception" in w for w in ds.warnings)
    assert ds.params["friction"] == ParamRange("friction", 0.5, 1.2, 0.85)
    window = ds.read_signals(["r2"], columns=["grip_force"])
    assert window.column_names == ["episode_id", "t", "grip_force"]
    assert window["grip_force"].to_pylist() == [1.0, 2.0]


def test_csv_dataset_and_single_signals_file(tmp_path: Path) -> None:
    root = tmp_path / "csv"
    root.mkdir()
    pacsv.write_csv(_episodes(), root / "episodes.csv")
    pacsv.write_csv(_signals(), root / "signals.csv")
    ds = load_dataset(root)
    assert ds.episodes.num_rows == 4
    assert set(ds.read_signals(["s1"])["episode_id"].to_pylist()) == {"s1"}
    pq.write_table(_signals(), root / "signals.parquet")
    (root / "signals.csv").unlink()
    assert load_dataset(root).signal_files[0].name == "signals.parquet"


def test_ranges_derived_from_sim_rows_without_params_csv(tmp_path: Path) -> None:
    root = _write(tmp_path)
    (root / "params.csv").unlink()
    ds = load_dataset(root)
    assert (ds.params["friction"].low, ds.params["friction"].high) == (0.8, 0.9)
    assert any("parameter ranges taken from the sim rows" in w for w in ds.warnings)


def test_params_bounds_family_and_targets_round_trip(tmp_path: Path) -> None:
    friction = ParamRange("friction", 0.5, 1.2, 0.85, 0.0, None, "dynamics",
                          {"mjcf": "geom[@class='pad']/@friction[0]"})
    root = write_dataset(tmp_path / "ds", _episodes(), _signals(), params=[friction])
    assert "min,max,family,target.mjcf" in (root / "params.csv").read_text()
    loaded = load_dataset(root).params["friction"]
    assert loaded == friction
    assert loaded.bounds == (0.0, float("inf"))
    # Undeclared: non-negative where sim only sampled non-negative values, else unbounded.
    assert ParamRange("offset", -0.1, 0.1, 0.0).bounds == (float("-inf"), float("inf"))


Breaker = Callable[[Path], None]


def _rewrite_episodes(**overrides: list[object]) -> Breaker:
    def breaker(root: Path) -> None:
        pq.write_table(_episodes(**overrides), root / "episodes.parquet")
    return breaker


def _rewrite_signals(**overrides: list[object]) -> Breaker:
    def breaker(root: Path) -> None:
        for part in (root / "signals").glob("*.parquet"):
            part.unlink()
        pq.write_table(_signals(**overrides), root / "signals" / "part-00000.parquet")
    return breaker


def _rewrite_text(name: str, text: str) -> Breaker:
    def breaker(root: Path) -> None:
        (root / name).write_text(text)
    return breaker


def _drop_episode_column(column: str) -> Breaker:
    def breaker(root: Path) -> None:
        pq.write_table(_episodes().drop_columns([column]), root / "episodes.parquet")
    return breaker


BAD_INPUTS: dict[str, tuple[Breaker, str, str | None, int | None]] = {
    "duplicate episode_id": (_rewrite_episodes(episode_id=["r1", "r2", "s1", "r1"]),
                             "episode_id", "duplicate", 3),
    "unknown source": (_rewrite_episodes(source=["real", "real", "simulation", "sim"]),
                       "source", "unknown value 'simulation'", 2),
    "missing task column": (_drop_episode_column("task"), "task", "missing", None),
    "empty task": (_rewrite_episodes(task=["pick", None, "pick", "pick"]), "task", "empty", 1),
    "real without outcome": (_rewrite_episodes(outcome=[None, "success", None, None]),
                             "outcome", "required for real", 0),
    "unknown outcome": (_rewrite_episodes(outcome=["failure", "ok", None, None]), "outcome",
                        "unknown value 'ok'", 1),
    "failure with no deployment": (_rewrite_episodes(deployment=[None, "w02", None, None]),
                                   "deployment", "required for real", 0),
    "real without started_at": (_rewrite_episodes(started_at=["2026-01-05T08:00:00Z", None,
                                                              None, None]),
                                "started_at", "required for real", 1),
    "unparseable started_at": (_rewrite_episodes(started_at=["yesterday", "2026-01-05", None,
                                                             None]),
                               "started_at", "cannot read 'yesterday'", 0),
    "negative failure_time": (_rewrite_episodes(failure_time=[-1.0, None, None, None]),
                              "failure_time", ">= 0", 0),
    "param on a real row": (_rewrite_episodes(**{"param.friction": [0.7, None, 0.8, 0.9]}),
                            "param.friction", "null on real rows", 0),
    "sim and reference together": (_rewrite_episodes(source=["real", "real", "sim",
                                                             "reference"]),
                                    "source", "not both", 3),
    "param on a reference row": (_rewrite_episodes(source=["real", "real", "reference",
                                                           "reference"]),
                                 "param.friction", "null on real rows and reference rows", 2),
    "t not increasing": (_rewrite_signals(t=[0.0, 0.2, 0.0, 0.2, 0.0, 0.25, 0.3, 0.3]), "t",
                         "strictly increasing", 7),
    "unknown episode in signals": (_rewrite_signals(episode_id=["r1", "r1", "r2", "r2", "s1",
                                                                "s1", "s9", "s9"]),
                                   "episode_id", "no such episode", 6),
    "non-numeric channel": (_rewrite_signals(grip_force=["a"] * 8), "grip_force", "numeric",
                            None),
    "unknown family": (_rewrite_text("channels.csv", "channel,family,unit\ngrip_force,"
                                     "haptics,N\n"), "family", "unknown family 'haptics'", 0),
    "range with nominal outside": (_rewrite_text("params.csv", "param,low,high,nominal\n"
                                                 "friction,0.5,1.2,2.0\n"), "param",
                                   "low <= nominal <= high", 0),
    "bounds inside the range": (_rewrite_text("params.csv", "param,low,high,nominal,min,max\n"
                                              "friction,0.5,1.2,0.8,0.6,\n"), "min",
                                "must contain the range", 0),
    "unknown param family": (_rewrite_text("params.csv", "param,low,high,nominal,family\n"
                                           "friction,0.5,1.2,0.8,haptics\n"), "family",
                             "unknown family 'haptics'", 0),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_each_rule_names_file_column_and_row(tmp_path: Path, case: str) -> None:
    breaker, column, message, row = BAD_INPUTS[case]
    root = _write(tmp_path)
    breaker(root)
    with pytest.raises(DatasetError) as info:
        load_dataset(root)
    err = info.value
    assert err.column == column
    assert message in str(err)
    assert err.row == row
    assert err.file is not None and str(root) in err.file


def test_missing_episodes_file(tmp_path: Path) -> None:
    root = _write(tmp_path)
    (root / "episodes.parquet").unlink()
    with pytest.raises(DatasetError, match=r"episodes\.parquet, episodes\.csv"):
        load_dataset(root)


def test_cli_bad_input_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    root = _write(tmp_path)
    _rewrite_episodes(episode_id=["r1", "r2", "s1", "r1"])(root)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["analyze", str(root), "-o", str(out), "--quiet"])
    assert result.exit_code == 2
    assert "column 'episode_id', row 3" in result.output
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_append_rejects_existing_ids_and_keeps_dataset(tmp_path: Path) -> None:
    root = _write(tmp_path)
    before = sorted(p.name for p in (root / "signals").iterdir())
    with pytest.raises(DatasetError, match="already in the dataset"):
        write_dataset(root, _episodes(), _signals(), append=True)
    assert sorted(p.name for p in (root / "signals").iterdir()) == before
    assert load_dataset(root).episodes.num_rows == 4


# The same dataset on an object store (a local S3-compatible server): the same tables, and
# every error names the object, column and row.


def test_dataset_on_s3_loads_like_the_local_folder(tmp_path: Path, s3: ObjectStore) -> None:
    root = _write(tmp_path)
    local, remote = load_dataset(root), load_dataset(s3.upload(root, "good"))
    assert str(remote.root) == "s3://bucket/good"
    assert remote.root.canonical() == "s3://bucket/good"
    assert remote.episodes.equals(local.episodes)
    assert (remote.channels, remote.params) == (local.channels, local.params)
    assert (remote.deployments, remote.durations) == (local.deployments, local.durations)
    assert remote.warnings == local.warnings
    assert [str(f) for f in remote.signal_files] == ["s3://bucket/good/signals/part-00000.parquet"]
    window = remote.read_signals(["r2", "s1"], columns=["grip_force", "absent"])
    assert window.equals(local.read_signals(["r2", "s1"], columns=["grip_force", "absent"]))


def test_csv_dataset_on_s3(tmp_path: Path, s3: ObjectStore) -> None:
    root = tmp_path / "csv"
    root.mkdir()
    pacsv.write_csv(_episodes(), root / "episodes.csv")
    pacsv.write_csv(_signals(), root / "signals.csv")
    (root / "channels.csv").write_text("channel,family,unit\r\ngrip_force,dynamics,N\r\n")
    ds = load_dataset(s3.upload(root, "csv"))
    assert ds.episodes.num_rows == 4
    assert ds.channels["grip_force"] == Channel("grip_force", "dynamics", "N")
    assert set(ds.read_signals(["s1"])["episode_id"].to_pylist()) == {"s1"}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_each_rule_names_the_object_on_s3(tmp_path: Path, s3: ObjectStore, case: str) -> None:
    breaker, column, message, row = BAD_INPUTS[case]
    root = _write(tmp_path)
    breaker(root)
    name = "bad-" + case.replace(" ", "-")
    with pytest.raises(DatasetError) as info:
        load_dataset(s3.upload(root, name))
    err = info.value
    assert (err.column, err.row) == (column, row)
    assert message in str(err)
    assert err.file is not None and err.file.startswith(f"s3://bucket/{name}")


def test_cli_on_s3_bad_input_exits_2(tmp_path: Path, s3: ObjectStore) -> None:
    root = _write(tmp_path)
    _rewrite_episodes(episode_id=["r1", "r2", "s1", "r1"])(root)
    uri = s3.upload(root, "cli-bad")
    out = tmp_path / "out"
    for dataset, expected in [
        (uri, "s3://bucket/cli-bad/episodes.parquet, column 'episode_id', row 3"),
        (uri.replace("cli-bad", "nothing-here"), "s3://bucket/nothing-here: expected a dataset"),
        ("nosuch://bucket/x", "nosuch://bucket/x: no pyarrow filesystem opens it"),
    ]:
        result = CliRunner().invoke(main, ["analyze", dataset, "-o", str(out), "--quiet"])
        assert result.exit_code == 2, result.output
        assert expected in result.output
        assert not out.exists()


def test_a_corrupt_channel_page_is_named_when_the_analysis_reads_it(tmp_path: Path) -> None:
    root = _write(tmp_path)
    part = next((root / "signals").glob("*.parquet"))
    group = pq.read_metadata(part).row_group(0)
    chunk = next(group.column(j) for j in range(group.num_columns)
                 if group.column(j).path_in_schema == "grip_force")
    data = bytearray(part.read_bytes())
    data[chunk.data_page_offset + chunk.total_compressed_size - 4] ^= 0xFF
    part.write_bytes(bytes(data))
    ds = load_dataset(root)  # loading decodes episode_id and t only
    with pytest.raises(DatasetError, match=r"part-00000\.parquet: cannot be read.*CRC"):
        ds.read_signals(["r1"], columns=["grip_force"])


# Rows 0-2, 3-5 and 6-7 in three row groups: validation reads one row group at a time.
_GROUP_ROWS = 3


def _one_part_in_groups(root: Path, signals: pa.Table) -> Path:
    for part in (root / "signals").glob("*.parquet"):
        part.unlink()
    part = root / "signals" / "part-00000.parquet"
    pq.write_table(signals, part, row_group_size=_GROUP_ROWS)
    assert pq.read_metadata(part).num_row_groups == 3
    return part


@pytest.mark.parametrize(("overrides", "column", "row", "message"), [
    # r2's second sample (row 3, group 2) repeats its first (row 2, group 1): the check
    # carries each episode's last t from one row group to the next.
    ({"t": [0.0, 0.2, 0.2, 0.2, 0.0, 0.25, 0.0, 0.25]}, "t", 3, "strictly increasing"),
    ({"episode_id": ["r1", "r1", "r2", "r2", "s1", "s9", "s2", "s2"]}, "episode_id", 5,
     "no such episode"),
    ({"t": [0.0, 0.2, 0.0, 0.2, 0.0, 0.25, 0.0, float("nan")]}, "t", 7, "finite"),
])
def test_a_violation_in_a_later_row_group_names_its_row_in_the_file(
        tmp_path: Path, overrides: dict[str, list[object]], column: str, row: int,
        message: str) -> None:
    root = _write(tmp_path)
    part = _one_part_in_groups(root, _signals(**overrides))
    with pytest.raises(DatasetError) as info:
        load_dataset(root)
    assert (info.value.file, info.value.column, info.value.row) == (str(part), column, row)
    assert message in str(info.value)


def test_a_file_of_many_row_groups_loads_as_one_of_a_single_group(tmp_path: Path) -> None:
    one = load_dataset(_write(tmp_path / "one"))
    root = _write(tmp_path / "many")
    # r1's samples apart in two row groups, so each episode's span is gathered across them.
    signals = _signals().take([0, 2, 4, 1, 3, 5, 6, 7])
    _one_part_in_groups(root, signals)
    many = load_dataset(root)
    assert many.durations == one.durations == {"r1": 0.2, "r2": 0.2, "s1": 0.25, "s2": 0.25}
    assert (many.span, many.warnings, list(many.channels)) == \
        (one.span, one.warnings, list(one.channels))
    assert many.episodes.equals(one.episodes)

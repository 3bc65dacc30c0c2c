"""The long signals layout (``episode_id, t, channel, value``): loaded, checked, written."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from sim2real.dataset import load_dataset, write_dataset
from sim2real.errors import DatasetError

EPISODES = pa.table({"episode_id": ["s1", "s2"], "source": ["sim", "sim"],
                     "task": ["pick", "pick"]})


def _rows(**overrides: list[object]) -> pa.Table:
    columns: dict[str, list[object]] = {
        "episode_id": ["s1", "s1", "s1", "s1", "s2"],
        "t": [0.0, 0.1, 0.0, 0.05, 0.0],  # each channel its own times; a t shared is fine
        "channel": ["grip_force", "grip_force", "det_conf", "det_conf", "grip_force"],
        "value": [1.0, 2.0, 0.9, 0.8, 1.5],
    }
    columns.update(overrides)
    return pa.table(columns)


def test_long_layout_loads_with_its_channels_and_durations(tmp_path: Path) -> None:
    ds = load_dataset(write_dataset(tmp_path / "ds", EPISODES, _rows()))
    assert ds.layout == "long"
    assert list(ds.channels) == ["det_conf", "grip_force"]
    assert ds.channels["det_conf"].family == "perception"
    assert ds.durations == {"s1": 0.1, "s2": 0.0}
    wide = ds.read_signals(["s1"])
    assert wide.column_names == ["episode_id", "t", "det_conf", "grip_force"]
    assert wide["t"].to_pylist() == [0.0, 0.05, 0.1]
    assert wide["grip_force"].to_pylist() == [1.0, None, 2.0]


def test_long_layout_as_csv(tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "ds", EPISODES, _rows())
    for part in (root / "signals").glob("*.parquet"):
        part.unlink()
    (root / "signals").rmdir()
    pacsv.write_csv(_rows(), root / "signals.csv")
    assert load_dataset(root).layout == "long"


@pytest.mark.parametrize(("overrides", "column", "row", "message"), [
    ({"t": [0.0, 0.1, 0.05, 0.05, 0.0]}, "t", 3, "within an episode's channel"),
    ({"channel": ["grip_force", None, "det_conf", "det_conf", "grip_force"]}, "channel", 1,
     "must not be null"),
    ({"value": ["1", "2", "3", "4", "5"]}, "value", None, "must be numeric"),
    ({"episode_id": ["s1", "s1", "s1", "s1", "s9"]}, "episode_id", 4, "no such episode"),
])
def test_each_long_layout_rule_names_file_column_and_row(
        tmp_path: Path, overrides: dict[str, list[object]], column: str, row: int | None,
        message: str) -> None:
    root = tmp_path / "ds"
    write_dataset(root, EPISODES, _rows())
    part = next((root / "signals").glob("*.parquet"))
    pq.write_table(_rows(**overrides), part)  # as written, unsorted
    with pytest.raises(DatasetError) as err:
        load_dataset(root)
    assert err.value.column == column and err.value.row == row
    assert message in str(err.value) and part.name in str(err.value)


def test_long_layout_holds_only_its_four_columns(tmp_path: Path) -> None:
    rows = _rows().append_column("unit", pa.array(["N"] * 5))
    with pytest.raises(DatasetError, match="exactly episode_id, t, channel, value"):
        load_dataset(write_dataset(tmp_path / "ds", EPISODES, rows))


def test_parts_in_both_layouts_are_refused(tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "ds", EPISODES, _rows())
    pq.write_table(pa.table({"episode_id": ["s2"], "t": [1.0], "grip_force": [2.0]}),
                   root / "signals" / "part-00009.parquet")
    with pytest.raises(DatasetError, match="mix layouts"):
        load_dataset(root)


@pytest.mark.parametrize("first", ["long", "wide"])
def test_append_converts_to_the_datasets_layout(tmp_path: Path, first: str) -> None:
    """A LeRobot export (wide) appended to an MCAP ingest (long), and the other way round."""
    long = _rows()
    wide = pa.table({"episode_id": ["s3", "s3"], "t": [0.0, 0.1], "grip_force": [3.0, None],
                     "det_conf": [0.5, 0.6]})
    s3 = pa.table({"episode_id": ["s3"], "source": ["sim"], "task": ["pick"]})
    root = tmp_path / "ds"
    if first == "long":
        write_dataset(root, EPISODES, long)
        write_dataset(root, s3, wide, append=True)
    else:
        write_dataset(root, s3, wide)
        write_dataset(root, EPISODES, long, append=True)
    ds = load_dataset(root)
    assert ds.layout == first
    s3_rows = ds.read_signals(["s3"], ["det_conf", "grip_force"])
    assert s3_rows["grip_force"].to_pylist() == [3.0, None]
    assert s3_rows["det_conf"].to_pylist() == [0.5, 0.6]
    s1 = ds.read_signals(["s1"], ["grip_force"])
    assert s1.filter(pc.is_valid(s1["grip_force"]))["t"].to_pylist() == [0.0, 0.1]

"""Any file order reads as if sorted by episode: the same report from four layouts."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import sim2real
from sim2real._progress import Stages
from sim2real.dataset import Location, load_dataset
from sim2real.dataset import regroup as regroup_module
from sim2real.dataset.regroup import clustering, regroup
from sim2real.match.grid import build_grid
from sim2real.match.timebase import channel_periods
from sim2real.pipeline import by_episode

from ..conftest import World


def _layouts(signals: pa.Table, sim: set[str]) -> dict[str, list[pa.Table]]:
    """The samples of ``signals`` in four file orders: parts sorted by episode (as written),
    one file in time order (every episode's rows interleaved with the others'), sim first
    then real (each episode whole, in random order), and many small files in time order."""
    ids = signals["episode_id"].to_numpy(zero_copy_only=False)
    names, code = np.unique(ids, return_inverse=True)
    rank = np.random.default_rng(7).permutation(names.size)[code]  # "random IDs"
    t = signals["t"].to_numpy()
    is_real = np.array([n not in sim for n in names])[code]
    timed = signals.take(np.lexsort((rank, t)))
    return {
        "sorted": [signals],
        "time order": [timed],
        "sim first": [signals.take(np.lexsort((t, rank, is_real)))],
        "many files": [timed.slice(s, 4000) for s in range(0, timed.num_rows, 4000)],
    }


def _write(root: Path, parts: list[pa.Table]) -> None:
    folder = root / "signals"
    shutil.rmtree(folder)
    folder.mkdir()
    for k, part in enumerate(parts):
        pq.write_table(part, folder / f"part-{k:04d}.parquet", row_group_size=20_000,
                       write_page_checksum=True)


@pytest.fixture(scope="module")
def relaid(standard: World, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the standard world whose signals each test lays out anew."""
    root = tmp_path_factory.mktemp("layouts") / "fleet"
    shutil.copytree(standard.dataset, root)
    return root


@pytest.fixture(autouse=True)
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts of this small world count as large (a file this small is otherwise read whole,
    in any order), so the regroup runs, into many buckets."""
    monkeypatch.setattr(regroup_module, "WHOLE_PART_BYTES", 2 << 20)


def test_clustering_is_read_from_the_footers(standard: World, relaid: Path) -> None:
    signals = pq.read_table(standard.dataset / "signals")
    episodes = pq.read_table(standard.dataset / "episodes.parquet")
    sim = set(episodes.filter(pc.equal(episodes["source"], "sim"))["episode_id"].to_pylist())
    found = {}
    for name, parts in _layouts(signals, sim).items():
        _write(relaid, parts)
        files = [Location.parse(str(p)) for p in sorted((relaid / "signals").iterdir())]
        found[name] = clustering(files)
    assert found["sorted"].clustered, found["sorted"].why
    assert not found["time order"].clustered
    assert "not in episode_id order" in found["time order"].why
    assert "overlap" in found["many files"].why  # small files, each spanning the fleet


def _read(root: Path, wanted: list[str], scratch: Path) -> tuple[object, ...]:
    """What the analysis reads: each channel's period, the episodes on the time grid."""
    ds = by_episode(load_dataset(root), wanted, scratch, Stages(enabled=False))
    assert clustering(ds.signal_files).clustered
    channels = list(ds.channels)
    periods = channel_periods(ds, wanted, channels)
    grid = build_grid(ds, wanted, channels, 0.05, 6.0, periods=periods)
    return periods, grid.values, grid.durations


def _same(found: dict[str, tuple[object, ...]], like: tuple[object, ...]) -> None:
    for name, (periods, values, durations) in found.items():
        assert periods == like[0], name
        np.testing.assert_array_equal(values, like[1], err_msg=name)
        np.testing.assert_array_equal(durations, like[2], err_msg=name)


def test_every_layout_gives_the_same_grids(standard: World, relaid: Path,
                                           tmp_path: Path) -> None:
    """What the analysis reads from the signals is the same, bit for bit, from every
    layout (regrouped, or sorted parts pruned): all that follows is too."""
    signals = pq.read_table(standard.dataset / "signals")
    episodes = pq.read_table(standard.dataset / "episodes.parquet")
    sim = set(episodes.filter(pc.equal(episodes["source"], "sim"))["episode_id"].to_pylist())
    wanted = episodes["episode_id"].to_pylist()[::2]  # and the rest left behind
    found = {}
    for name, parts in _layouts(signals, sim).items():
        _write(relaid, parts)
        found[name] = _read(relaid, wanted, tmp_path / name)
    _same(found, found["sorted"])


def test_a_small_file_in_any_order_is_read_whole(standard: World, relaid: Path,
                                                 tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the bound a part is one piece, whatever its row groups' order (here real
    episodes, whose IDs sort first, come in the last row groups)."""
    monkeypatch.setattr(regroup_module, "WHOLE_PART_BYTES", 512 << 20)
    signals = pq.read_table(standard.dataset / "signals")
    episodes = pq.read_table(standard.dataset / "episodes.parquet")
    sim = set(episodes.filter(pc.equal(episodes["source"], "sim"))["episode_id"].to_pylist())
    real = [e for e in episodes["episode_id"].to_pylist() if e not in sim][::2]
    expected = _read(standard.dataset, real, tmp_path / "sorted")
    _write(relaid, _layouts(signals, sim)["sim first"])
    assert clustering([Location.parse(str(p)) for p in (relaid / "signals").iterdir()]).parts[
        0].whole
    _same({"sim first": _read(relaid, real, tmp_path / "whole")}, expected)
    assert not (tmp_path / "whole").exists()  # nothing regrouped


def test_a_time_ordered_fleet_gives_the_same_report(standard: World, relaid: Path,
                                                    tmp_path: Path) -> None:
    signals = pq.read_table(standard.dataset / "signals")
    _write(relaid, _layouts(signals, set())["many files"])
    report = sim2real.analyze(relaid, scratch=tmp_path).to_json()
    assert not any(tmp_path.iterdir())  # the scratch folder is cleaned up
    assert report == sim2real.analyze(standard.dataset).to_json().replace(
        str(standard.dataset.resolve()), str(relaid.resolve()))


def test_regroup_keeps_only_the_episodes_asked_for(standard: World, relaid: Path,
                                                   tmp_path: Path) -> None:
    signals = pq.read_table(standard.dataset / "signals")
    _write(relaid, [signals.take(np.argsort(signals["t"].to_numpy(), kind="stable"))])
    ds = load_dataset(relaid)
    wanted = ds.episodes["episode_id"].to_pylist()[::3]
    grouped = regroup(ds, wanted, tmp_path)
    assert clustering(grouped.signal_files).clustered
    assert len(grouped.signal_files) > 1  # buckets of contiguous ID ranges
    got = pa.concat_tables(pq.read_table(f.path) for f in grouped.signal_files)
    assert set(got["episode_id"].to_pylist()) == set(wanted) & set(
        signals["episode_id"].to_pylist())
    assert got.num_rows == pc.sum(pc.is_in(signals["episode_id"],
                                           value_set=pa.array(wanted))).as_py()


def test_the_progress_display_says_which_path(standard: World, relaid: Path,
                                              tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    signals = pq.read_table(standard.dataset / "signals")
    _write(relaid, [signals.take(np.argsort(signals["t"].to_numpy(), kind="stable"))])
    ds = load_dataset(relaid)
    by_episode(ds, ds.episodes["episode_id"].to_pylist(), tmp_path, Stages(enabled=True))
    err = capsys.readouterr().err
    assert "not clustered by episode" in err
    assert "regrouped in one pass" in err

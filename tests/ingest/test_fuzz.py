"""Seeded mutations of valid MCAP, robomimic and LeRobot inputs (bit flips, truncations,
overwritten and zeroed runs): each ends in a clean input error (exit 2) or in exactly the
data of the intact file, never in a traceback or silently changed data.

The inputs are written as their official writers write them, with the checksums each
format offers: MCAP chunk and summary CRCs (the defaults) and the data-section CRC for
the file whose facts sit in metadata records; HDF5 with Fletcher-32 on its datasets and
checksummed object headers; Parquet with page checksums. (Files written without them
cannot tell a flipped value from a real one: no reader can.)
"""

from __future__ import annotations

import json
import shutil
import traceback
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ingest_fixtures import MAPPING, T0, episode_messages, write_ros2_mcap
from test_tabular import write_lerobot

from sim2real.errors import InputError
from sim2real.ingest import ingest_recordings, parse_mapping
from sim2real.ingest.lerobot import ingest_lerobot
from sim2real.ingest.mapping import Mapping
from sim2real.ingest.robomimic import ingest_robomimic

SEED = 2026
MUTANTS = 45  # per input; the whole test stays well under a minute


def _mutate(data: bytes, rng: np.random.Generator) -> bytes:
    out = bytearray(data)
    kind = int(rng.integers(4))
    if kind == 0:  # a few bit flips
        for _ in range(int(rng.integers(1, 5))):
            pos = int(rng.integers(len(out)))
            out[pos] ^= 1 << int(rng.integers(8))
    elif kind == 1:  # truncated
        del out[int(rng.integers(len(out))):]
    else:  # a run overwritten with noise or zeros
        start = int(rng.integers(len(out)))
        size = min(int(rng.integers(1, 33)), len(out) - start)
        out[start:start + size] = (rng.integers(0, 256, size).astype(np.uint8).tobytes()
                                   if kind == 2 else bytes(size))
    return bytes(out)


def _snapshot(out: Path) -> tuple[pa.Table, pa.Table]:
    episodes = pq.read_table(out / "episodes.parquet")
    signals = pq.read_table(out / "signals")
    keys = [c for c in ("episode_id", "channel", "t") if c in signals.column_names]
    return episodes, signals.sort_by([(k, "ascending") for k in keys])


def _fuzz(tmp_path: Path, original: Path, target: Path, ingest: Callable[[Path], None]) -> None:
    """Mutate ``target`` (a file of the input ``original``) and ingest the whole input."""
    ingest(tmp_path / "baseline")
    baseline = _snapshot(tmp_path / "baseline")
    intact = target.read_bytes()
    rng = np.random.default_rng([SEED, len(intact)])
    tracebacks, changed, clean, same = [], [], 0, 0
    for i in range(MUTANTS):
        target.write_bytes(_mutate(intact, rng))
        out = tmp_path / f"out{i}"
        try:
            ingest(out)
        except InputError as err:
            assert original.name in str(err), str(err)  # the message names the file
            assert not out.exists()
            clean += 1
            continue
        except Exception:
            tracebacks.append(traceback.format_exc(limit=-3))
            continue
        if _snapshot(out) == baseline:
            same += 1
        else:
            changed.append(i)
        shutil.rmtree(out)
    target.write_bytes(intact)
    assert not tracebacks, f"{len(tracebacks)} tracebacks, first:\n{tracebacks[0]}"
    assert not changed, f"mutants {changed} were accepted with different data"
    assert clean + same == MUTANTS and clean > MUTANTS // 3


def _mcap_with_metadata(path: Path) -> Path:
    """Foxglove-style JSON MCAP whose facts are metadata records (data-section CRC on)."""
    from mcap.writer import Writer

    with path.open("wb") as f:
        writer = Writer(f, enable_data_crcs=True)
        writer.start(profile="", library="test")
        schema = writer.register_schema("State", "jsonschema", b"{}")
        channel = writer.register_channel("/state", "json", schema)
        for k in range(40):
            t = T0 + k * 20_000_000
            writer.add_message(channel, log_time=t, publish_time=t,
                               data=json.dumps({"x": np.sin(k / 5), "v": k / 10}).encode())
        writer.add_metadata("episode", {"task": "dock", "outcome": "failure",
                                        "deployment": "w07", "distance": "0.75"})
        writer.finish()
    return path


MCAP_FACTS = {"task": {"metadata": "episode", "key": "task"},
              "outcome": {"metadata": "episode", "key": "outcome"},
              "deployment": {"metadata": "episode", "key": "deployment"},
              "ctx": {"distance": {"metadata": "episode", "key": "distance"}},
              "channels": ["/state.x -> x", "/state.v -> v"]}


@pytest.mark.parametrize("kind", ["mcap-ros2", "mcap-json-metadata"])
def test_fuzzed_mcap(tmp_path: Path, kind: str) -> None:
    if kind == "mcap-ros2":
        path = write_ros2_mcap(tmp_path / "w01_a.mcap", episode_messages())
        mapping: Mapping = parse_mapping(MAPPING)
    else:
        path = _mcap_with_metadata(tmp_path / "w01_a.mcap")
        mapping = parse_mapping(MCAP_FACTS)
    _fuzz(tmp_path, path, path, lambda out: ingest_recordings([path], mapping, out))


def _robomimic(path: Path) -> Path:
    with h5py.File(path, "w", libver="latest") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": "Lift",
                                             "env_kwargs": {"control_freq": 20}})
        for i, n in ((0, 30), (1, 20)):
            demo = data.create_group(f"demo_{i}")
            demo.attrs["operator"] = "ana"
            for name, values in (("actions", np.sin(np.arange(n * 4)).reshape(n, 4)),
                                 ("states", np.cos(np.arange(n * 3)).reshape(n, 3)),
                                 ("rewards", (np.arange(n) == n - 1).astype(float)),
                                 ("obs/eef_pos", np.arange(n * 3).reshape(n, 3) / 7)):
                demo.create_dataset(name, data=values, chunks=True, fletcher32=True)
    return path


def test_fuzzed_robomimic(tmp_path: Path) -> None:
    path = _robomimic(tmp_path / "lift.hdf5")
    facts = parse_mapping({"sys": {"operator": {"attr": "operator"}}})
    _fuzz(tmp_path, path, path,
          lambda out: ingest_robomimic(path, out, mapping=facts))


def test_fuzzed_lerobot(tmp_path: Path) -> None:
    root = write_lerobot(tmp_path / "koch", "v3.0", lengths=(12, 9))
    data = root / "data" / "chunk-000" / "file-000.parquet"
    pq.write_table(pq.read_table(data), data, write_page_checksum=True)
    for entry in ("observation.images.top", "observation.images.wrist"):  # frames: slow
        info = json.loads((root / "meta" / "info.json").read_text())
        info["features"].pop(entry)
        (root / "meta" / "info.json").write_text(json.dumps(info))
    _fuzz(tmp_path, data, data, lambda out: ingest_lerobot(root, out))
    # info.json has no checksum: a mutation is a clean error or a readable description.
    info = root / "meta" / "info.json"
    intact = info.read_bytes()
    rng = np.random.default_rng(SEED)
    for i in range(MUTANTS):
        info.write_bytes(_mutate(intact, rng))
        try:
            ingest_lerobot(root, tmp_path / f"info{i}")
        except InputError:
            continue

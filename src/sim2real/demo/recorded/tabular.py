"""Frame-based recordings: LeRobot v3.0 (written with pyarrow as documented) and robomimic."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from sim2real._optional import require
from sim2real.dataset import Dataset
from sim2real.demo.recorded._world import (
    Groups,
    Recorded,
    by_source,
    channel_groups,
    episode_frames,
    families_csv,
    text,
)

__all__ = ["record_lerobot", "record_robomimic"]


def _held(values: np.ndarray, every: int) -> np.ndarray:
    """A value captured every ``every`` frames, held in between (as a frame-based recorder
    stores a slower sensor)."""
    idx = (np.arange(len(values)) // every) * every
    return values[idx]


def _vector(columns: list[np.ndarray]) -> pa.Array:
    width = len(columns)
    flat = np.column_stack(columns).astype(np.float32).ravel() if width else np.zeros(0)
    return pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), width)


def _write_lerobot(ds: Dataset, root: Path, source: str, rows: list[dict[str, Any]],
                   groups: Groups, capture_every: int) -> Path:
    features: dict[str, list[str]] = {"observation.state": groups.dynamics,
                                      "action": groups.policy,
                                      "observation.perception": groups.perception}
    if source == "real" and groups.system:
        features["observation.system"] = groups.system
    tasks = sorted({r["task"] for r in rows})
    tables, meta, offset = [], [], 0
    for index, (row, frames) in enumerate(episode_frames(ds, rows)):
        n = frames.num_rows
        col = {c: frames[c].to_numpy(zero_copy_only=False).astype(float)
               for c in frames.column_names if c not in ("episode_id", "t")}
        data: dict[str, Any] = {}
        for key, names in features.items():
            every = capture_every if key == "observation.perception" else 1
            data[key] = _vector([_held(col[c], every) for c in names])
        success = np.zeros(n, dtype=bool)
        success[-1] = row["outcome"] == "success"
        data.update({"next.success": success, "next.done": np.arange(n) == n - 1,
                     "timestamp": pa.array(frames["t"].to_numpy(), pa.float32()),
                     "frame_index": np.arange(n), "episode_index": np.full(n, index),
                     "index": np.arange(offset, offset + n),
                     "task_index": np.full(n, tasks.index(row["task"]))})
        tables.append(pa.table(data))
        meta.append({"episode_index": index, "tasks": [row["task"]], "length": n,
                     "dataset_from_index": offset, "dataset_to_index": offset + n})
        offset += n
    folder = root / source
    (folder / "data" / "chunk-000").mkdir(parents=True)
    (folder / "meta" / "episodes" / "chunk-000").mkdir(parents=True)
    pq.write_table(pa.concat_tables(tables), folder / "data" / "chunk-000" / "file-000.parquet")
    pq.write_table(pa.Table.from_pylist(meta),
                   folder / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    pq.write_table(pa.table({"task_index": list(range(len(tasks))), "task": tasks}),
                   folder / "meta" / "tasks.parquet")
    info = {"codebase_version": "v3.0", "fps": None, "total_episodes": len(rows), "features": {
        **{k: {"dtype": "float32", "shape": [len(v)], "names": v} for k, v in features.items()},
        "next.success": {"dtype": "bool", "shape": [1], "names": None},
        "next.done": {"dtype": "bool", "shape": [1], "names": None},
        **{k: {"dtype": "int64", "shape": [1], "names": None}
           for k in ("frame_index", "episode_index", "index", "task_index")},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None}}}
    (folder / "meta" / "info.json").write_text(json.dumps(info, indent=2))
    return folder


def _write_sidecar(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Episode facts LeRobot does not store, keyed by the dataset's own episode index."""
    keys = sorted({k for r in rows for k, v in r.items() if v is not None}
                  - {"episode_id", "source", "task", "outcome", "_index"})
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["episode_id", *keys])
        for index, row in enumerate(rows):
            writer.writerow([index, *[text(row.get(k)) for k in keys]])
    return path


def record_lerobot(ds: Dataset, out: Path, only: set[str] | None,
                    capture_every: int) -> Recorded:
    groups = channel_groups(ds)
    paths, ids, sidecars = [], {}, {}
    for source, rows in by_source(ds, only):
        folder = _write_lerobot(ds, out, source, rows, groups, capture_every)
        paths.append(folder)
        sidecars[folder] = _write_sidecar(out / f"{source}_episodes.csv", rows)
        ids.update({row["episode_id"]: f"{source}-{i:06d}" for i, row in enumerate(rows)})
    element = {"dynamics": "state", "policy": "action", "perception": "perception",
               "system": "system"}
    names = {n: f"{element[c.family]}_{n}" for n, c in ds.channels.items()}
    mapping = out / "mapping.yaml"
    mapping.write_text(yaml.safe_dump({"source": {"path": "/(real|sim)$"}}))
    return Recorded("lerobot", paths, mapping, families_csv(out / "channels.csv", ds, names),
                    sidecars, ids)


def record_robomimic(ds: Dataset, out: Path, only: set[str] | None,
                      capture_every: int) -> Recorded:
    h5py = require("h5py", "ingest")
    groups = channel_groups(ds)
    paths, ids = [], {}
    out.mkdir(parents=True, exist_ok=True)
    observed = groups.perception + groups.system
    for source, rows in by_source(ds, only):
        path = out / f"{source}.hdf5"
        with h5py.File(path, "w") as f:
            data = f.create_group("data")
            rate = 1.0 / float(np.median(np.diff(ds.read_signals([rows[0]["episode_id"]], [])
                                                  ["t"].to_numpy())))
            data.attrs["env_args"] = json.dumps({"env_name": rows[0]["task"],
                                                 "env_kwargs": {"control_freq": rate}})
            for index, (row, frames) in enumerate(episode_frames(ds, rows)):
                demo = data.create_group(f"demo_{index}")
                col = {c: frames[c].to_numpy(zero_copy_only=False).astype(float)
                       for c in frames.column_names if c not in ("episode_id", "t")}
                demo.create_dataset("actions", data=np.column_stack(
                    [col[c] for c in groups.policy]))
                demo.create_dataset("states", data=np.column_stack(
                    [col[c] for c in groups.dynamics]))
                for name in observed:
                    if source == "real" or name in groups.perception:
                        every = capture_every if name in groups.perception else 1
                        demo.create_dataset(f"obs/{name}", data=_held(col[name], every))
                for key, value in row.items():
                    if key not in ("episode_id", "source", "_index") and value is not None:
                        demo.attrs[key] = text(value)
                ids[row["episode_id"]] = f"{source}-demo_{index}"
        paths.append(path)
    names = {n: n for n in observed} | {n: f"action_{i}" for i, n in enumerate(groups.policy)} | {
        n: f"state_{i}" for i, n in enumerate(groups.dynamics)}
    facts = [c for c in ds.episodes.column_names if c not in ("episode_id", "source")]
    mapping: dict[str, Any] = {"source": {"path": "/(real|sim)\\.hdf5$"}}
    for name in facts:
        prefix, _, rest = name.partition(".")
        target = mapping.setdefault(prefix, {}) if rest else mapping
        target[rest or name] = {"attr": name}
    (out / "mapping.yaml").write_text(yaml.safe_dump(mapping))
    return Recorded("robomimic", paths, out / "mapping.yaml",
                    families_csv(out / "channels.csv", ds, names), {}, ids)

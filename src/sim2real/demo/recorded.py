"""A generated world written the way teams record fleets, with each format's own writer.

Every episode of a dataset (wide, one rate) becomes what a robot's recorder makes of it:
joint states (dynamics channels) on ``/joint_states`` and commands (policy) on ``/cmd``
stamped 150 µs later, as one loop publishes them; a perception estimate on ``/perception``
at every ``capture_every``-th tick, stamped at capture time plus network latency; on real
robots only, ``/system`` (loop latency) and a 1 Hz ``/diagnostics`` array whose
``KeyValue`` strings hold the other system channels; ``/events`` (``KeyValue``: ``start``,
then ``failure`` with the symptom) and an ``/outcome`` published after the last tick.
Episode facts go where each format keeps them: MCAP metadata records, rosbag2
``custom_data``, an ``/episode_info`` topic in ROS 1 bags, a sidecar keyed by episode
index for LeRobot, demo attributes for robomimic. Real and sim recordings lie under
``real/`` and ``sim/``. Each format comes with the mapping that ingests it.

Formats: ``mcap-json`` (``mcap`` Writer, Foxglove-style JSON channels), ``mcap-ros2``
(mcap-ros2-support, CDR), ``rosbag2`` (rosbags, sqlite3 storage; ``rosbag2-mcap``: mcap
storage, five times faster to write), ``ros1`` (rosbags), ``lerobot``
(format v3.0 written with pyarrow as documented: the ``lerobot`` package needs torch) and
``robomimic`` (h5py). Needs the ``ingest`` extra.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

from sim2real._optional import require
from sim2real.dataset import Dataset, load_dataset

__all__ = ["FORMATS", "Recorded", "record_world"]

FORMATS = ("mcap-json", "mcap-ros2", "rosbag2", "rosbag2-mcap", "ros1", "lerobot", "robomimic")
TYPES = {"/joint_states": "sensor_msgs/msg/JointState", "/cmd": "sensor_msgs/msg/JointState",
         "/perception": "sensor_msgs/msg/JointState", "/system": "sensor_msgs/msg/JointState",
         "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
         "/events": "diagnostic_msgs/msg/KeyValue", "/outcome": "std_msgs/msg/String",
         "/episode_info": "diagnostic_msgs/msg/KeyValue"}
_CMD_DELAY_NS = 150_000
_SYSTEM_DELAY_NS = 300_000
_OUTCOME_AFTER_NS = 50_000_000
_SIM_EPOCH_NS = 1_767_000_000_000_000_000
Msg = tuple[str, int, dict[str, Any]]


@dataclass(frozen=True)
class Recorded:
    """A recorded world, ready for ``sim2real ingest``.

    Attributes:
        kind: the ingest command (``mcap``, ``rosbag``, ``lerobot``, ``robomimic``).
        paths: what to ingest (files, bag folders, LeRobot folders, HDF5 files).
        mapping: the mapping (facts only, for LeRobot and robomimic).
        families: ``channels.csv`` to pass as ``--families`` (LeRobot, robomimic), or None.
        sidecars: per LeRobot folder, the sidecar CSV (keyed by episode index) to pass as
            ``--sidecar``.
        ids: the dataset's episode IDs -> the IDs ingest gives them.
    """

    kind: str
    paths: list[Path]
    mapping: Path
    families: Path | None
    sidecars: dict[Path, Path]
    ids: dict[str, str]


@dataclass(frozen=True)
class _Groups:
    """The dataset's channels by the topic that carries them."""

    dynamics: list[str]
    policy: list[str]
    perception: list[str]
    system: list[str]  # [0] on /system at full rate, the rest in /diagnostics at 1 Hz


def _groups(ds: Dataset) -> _Groups:
    by: dict[str, list[str]] = {"dynamics": [], "policy": [], "perception": [], "system": []}
    for name, channel in ds.channels.items():
        by[channel.family].append(name)
    return _Groups(by["dynamics"], by["policy"], by["perception"], by["system"])


def _stamp(ns: int) -> dict[str, int]:
    return {"sec": ns // 1_000_000_000, "nanosec": ns % 1_000_000_000}


def _joints(ns: int, names: list[str], values: np.ndarray) -> dict[str, Any]:
    return {"header": {"stamp": _stamp(ns), "frame_id": ""}, "name": names,
            "position": [float(v) for v in values], "velocity": [], "effort": []}


def _episode_messages(row: dict[str, Any], frames: pa.Table, groups: _Groups,
                      start_ns: int, capture_every: int, latency_ns: int) -> list[Msg]:
    t = frames["t"].to_numpy()
    ticks = start_ns + np.rint(t * 1e9).astype(np.int64)
    col = {n: frames[n].to_numpy(zero_copy_only=False).astype(float) for n in frames.column_names
           if n not in ("episode_id", "t")}
    real = row["source"] == "real"
    system = [n for n in groups.system if real and np.isfinite(col[n]).any()]
    msgs: list[Msg] = [("/events", int(ticks[0]), {"key": "start", "value": ""})]
    last_diag = -np.inf
    for k, ns in enumerate(ticks.tolist()):
        msgs.append(("/joint_states", ns, _joints(ns, groups.dynamics,
                                                  np.array([col[n][k] for n in groups.dynamics]))))
        msgs.append(("/cmd", ns + _CMD_DELAY_NS, _joints(ns + _CMD_DELAY_NS, groups.policy,
                                                         np.array([col[n][k]
                                                                   for n in groups.policy]))))
        if k % capture_every == 0 and groups.perception:
            seen = ns + latency_ns  # stamped when it arrives: capture time plus latency
            msgs.append(("/perception", seen, _joints(seen, groups.perception, np.array(
                [col[n][k] for n in groups.perception]))))
        if system:
            msgs.append(("/system", ns + _SYSTEM_DELAY_NS, _joints(
                ns + _SYSTEM_DELAY_NS, system[:1], np.array([col[system[0]][k]]))))
            if len(system) > 1 and t[k] - last_diag >= 1.0:
                last_diag = t[k]
                values = [{"key": n, "value": f"{col[n][k]:.6g}"} for n in system[1:]]
                msgs.append(("/diagnostics", ns, {
                    "header": {"stamp": _stamp(ns), "frame_id": ""},
                    "status": [{"level": 0, "name": "comm", "message": "",
                                "hardware_id": str(row.get("robot_id") or ""),
                                "values": values}]}))
    if row.get("outcome") == "failure" and row.get("failure_time") is not None:
        fail = start_ns + round(float(row["failure_time"]) * 1e9)
        msgs.append(("/events", fail, {"key": "failure",
                                        "value": str(row.get("failure_label") or "failure")}))
    if row.get("outcome") is not None:
        msgs.append(("/outcome", int(ticks[-1]) + _OUTCOME_AFTER_NS, {"data": row["outcome"]}))
    return sorted(msgs, key=lambda m: m[1])


def _facts(row: dict[str, Any]) -> dict[str, str]:
    """The episode's facts as text, as metadata records and ``custom_data`` hold them."""
    out = {}
    for key, value in row.items():
        if key in ("episode_id", "source", "outcome", "failure_time", "failure_label",
                   "_index"):
            continue
        if value is None or (isinstance(value, float) and not np.isfinite(value)):
            continue
        out[key] = value.isoformat() if hasattr(value, "isoformat") else str(value)
    return out


def _start_ns(row: dict[str, Any]) -> int:
    started = row.get("started_at")
    if started is not None:
        return int(started.timestamp() * 1_000_000) * 1000
    return _SIM_EPOCH_NS + row["_index"] * 100_000_000_000


# --- the message writers -------------------------------------------------------------------


def _write_mcap_json(path: Path, msgs: list[Msg], facts: dict[str, str]) -> None:
    writer_mod = require("mcap.writer", "ingest")
    with path.open("wb") as f:
        writer = writer_mod.Writer(f)
        writer.start(profile="", library="sim2real demo")
        channels: dict[str, int] = {}
        for topic, ns, body in msgs:
            if topic not in channels:
                schema = writer.register_schema(TYPES[topic].replace("/msg/", "."), "jsonschema",
                                                json.dumps({"type": "object"}).encode())
                channels[topic] = writer.register_channel(topic, "json", schema)
            data = json.dumps(body).encode()
            writer.add_message(channels[topic], log_time=ns, data=data, publish_time=ns)
        writer.add_metadata("episode", facts)
        writer.finish()


def _write_mcap_ros2(path: Path, msgs: list[Msg], facts: dict[str, str]) -> None:
    writer_mod = require("mcap_ros2.writer", "ingest")
    store = _store(2)
    with path.open("wb") as f:
        writer = writer_mod.Writer(f)
        schemas: dict[str, Any] = {}
        for topic, ns, body in msgs:
            msgtype = TYPES[topic]
            if msgtype not in schemas:
                schemas[msgtype] = writer.register_msgdef(
                    msgtype, store.generate_msgdef(msgtype, ros_version=2)[0])
            writer.write_message(topic, schemas[msgtype], body, log_time=ns, publish_time=ns)
        writer.add_metadata("episode", facts)
        writer.finish()


def _store(version: int) -> Any:
    typesys = require("rosbags.typesys", "ingest")
    return typesys.get_typestore(typesys.Stores.ROS2_HUMBLE if version == 2
                                 else typesys.Stores.ROS1_NOETIC)


def _typed(store: Any, msgtype: str, data: Any) -> Any:
    """A typestore message from nested dicts (numbers lists become arrays)."""
    nodetype = require("rosbags.typesys.base", "ingest").Nodetype
    _, fields = store.fielddefs[msgtype]
    kwargs = {}
    for name, (kind, detail) in fields:
        value = data.get(name) if isinstance(data, dict) else None
        kwargs[name] = _field(store, nodetype, kind, detail, value)
    return store.types[msgtype](**kwargs)


def _field(store: Any, nodetype: Any, kind: int, detail: Any, value: Any) -> Any:
    if kind == nodetype.NAME:
        return _typed(store, detail, value or {})
    if kind == nodetype.BASE:
        if detail[0] == "string":
            return "" if value is None else str(value)
        return 0 if value is None else value
    sub_kind, sub_detail = detail[0]
    if sub_kind == nodetype.BASE and sub_detail[0] != "string":
        return np.asarray(value or [], dtype=np.float64)
    return [_field(store, nodetype, sub_kind, sub_detail, v) for v in (value or [])]


def _write_rosbag2(path: Path, msgs: list[Msg], facts: dict[str, str],
                   storage: str = "sqlite3") -> None:
    rosbag2 = require("rosbags.rosbag2", "ingest")
    store = _store(2)
    plugin = rosbag2.StoragePlugin.MCAP if storage == "mcap" else rosbag2.StoragePlugin.SQLITE3
    with rosbag2.Writer(path, version=9, storage_plugin=plugin) as writer:
        for key, value in facts.items():
            writer.set_custom_data(key, value)
        conns: dict[str, Any] = {}
        for topic, ns, body in msgs:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, TYPES[topic], typestore=store)
            writer.write(conns[topic], ns,
                         store.serialize_cdr(_typed(store, TYPES[topic], body), TYPES[topic]))


def _write_ros1(path: Path, msgs: list[Msg], facts: dict[str, str]) -> None:
    rosbag1 = require("rosbags.rosbag1", "ingest")
    store = _store(1)
    start = msgs[0][1]
    info = [("/episode_info", start, {"key": k, "value": v}) for k, v in facts.items()]
    with rosbag1.Writer(path) as writer:
        conns: dict[str, Any] = {}
        for topic, ns, body in sorted(info + msgs, key=lambda m: m[1]):
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, TYPES[topic], typestore=store)
            writer.write(conns[topic], ns,
                         store.serialize_ros1(_typed(store, TYPES[topic], body), TYPES[topic]))


_WRITERS: dict[str, tuple[str, str, Callable[[Path, list[Msg], dict[str, str]], None]]] = {
    "mcap-json": ("mcap", ".mcap", _write_mcap_json),
    "mcap-ros2": ("mcap", ".mcap", _write_mcap_ros2),
    "rosbag2": ("rosbag", "", _write_rosbag2),
    "rosbag2-mcap": ("rosbag", "", lambda p, m, f: _write_rosbag2(p, m, f, "mcap")),
    "ros1": ("rosbag", ".bag", _write_ros1),
}


def _fact_source(fmt: str, key: str) -> dict[str, Any]:
    if fmt == "ros1":
        return {"topic": "/episode_info", "field": "value", "where": {"key": key}}
    if fmt.startswith("rosbag2"):
        return {"metadata": "custom_data", "key": key}
    return {"metadata": "episode", "key": key}


def _recording_mapping(fmt: str, ds: Dataset, groups: _Groups) -> dict[str, Any]:
    facts = [c for c in ds.episodes.column_names
             if c not in ("episode_id", "source", "outcome", "failure_time", "failure_label")]
    sim_only = [c for c in facts if c.startswith("param.")]
    real_only = [c for c in facts if c.startswith("sys.") or c in (
        "deployment", "robot_id", "site", "started_at")]
    shared = [c for c in facts if c not in sim_only and c not in real_only]

    def entries(names: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in names:
            prefix, _, rest = name.partition(".")
            target = out.setdefault(prefix, {}) if rest else out
            target[rest or name] = _fact_source(fmt, name)
        return out

    def channels(topic: str, names: list[str]) -> list[dict[str, Any]]:
        return [{"from": f"{topic}.position[{i}]", "name": n,
                 "family": ds.channels[n].family, "unit": ds.channels[n].unit}
                for i, n in enumerate(names)]

    system = groups.system
    real: dict[str, Any] = entries(real_only)
    real["channels"] = channels("/system", system[:1]) + [
        {"from": f"/diagnostics.status[0].values[key={n}].value", "name": n,
         "family": "system", "unit": ds.channels[n].unit} for n in system[1:]]
    return {
        **entries(shared),
        "source": {"path": "/(real|sim)/[^/]+$"},
        "outcome": {"topic": "/outcome", "field": "data"},
        "failure_time": {"topic": "/events", "where": {"key": "failure"}},
        "failure_label": {"topic": "/events", "field": "value", "where": {"key": "failure"}},
        "episodes": {"split": "file", "grace": 0.5},
        "channels": (channels("/joint_states", groups.dynamics) + channels("/cmd", groups.policy)
                     + channels("/perception", groups.perception)),
        "real": real,
        "sim": entries(sim_only),
    }


def _sources(ds: Dataset,
             only: set[str] | None) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Each source's episode rows (``only`` those, when given), each with ``_index``, its
    position among its source's episodes: a recording does not change with the subset."""
    for source in ("real", "sim"):
        rows = ds.episodes.filter(pc.equal(ds.episodes["source"], source)).to_pylist()
        rows = [{**r, "_index": i} for i, r in enumerate(rows)
                if only is None or r["episode_id"] in only]
        if rows:
            yield source, rows


def _frames(ds: Dataset, rows: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], pa.Table]]:
    """Each episode's rows of the wide signals, read a block of episodes at a time."""
    for start in range(0, len(rows), 256):
        block = rows[start : start + 256]
        table = ds.read_signals([r["episode_id"] for r in block])
        for row in block:
            yield row, table.filter(pc.equal(table["episode_id"], row["episode_id"]))


def _record_messages(ds: Dataset, out: Path, fmt: str, only: set[str] | None,
                     capture_every: int, latency_ns: int) -> Recorded:
    kind, suffix, write = _WRITERS[fmt]
    groups = _groups(ds)
    paths, ids = [], {}
    for source, rows in _sources(ds, only):
        (out / source).mkdir(parents=True, exist_ok=True)
        for row, frames in _frames(ds, rows):
            msgs = _episode_messages(row, frames, groups, _start_ns(row), capture_every,
                                     latency_ns)
            path = out / source / f"{row['episode_id']}{suffix}"
            write(path, msgs, _facts(row))
            paths.append(path)
            ids[row["episode_id"]] = row["episode_id"]
    mapping = out / "mapping.yaml"
    mapping.write_text(yaml.safe_dump(_recording_mapping(fmt, ds, groups), sort_keys=False))
    return Recorded(kind, paths, mapping, None, {}, ids)


# --- LeRobot v3.0 and robomimic -------------------------------------------------------------


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
                   groups: _Groups, capture_every: int) -> Path:
    features: dict[str, list[str]] = {"observation.state": groups.dynamics,
                                      "action": groups.policy,
                                      "observation.perception": groups.perception}
    if source == "real" and groups.system:
        features["observation.system"] = groups.system
    tasks = sorted({r["task"] for r in rows})
    tables, meta, offset = [], [], 0
    for index, (row, frames) in enumerate(_frames(ds, rows)):
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
            writer.writerow([index, *[_text(row.get(k)) for k in keys]])
    return path


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _families_csv(path: Path, ds: Dataset, names: dict[str, str]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["channel", "family", "unit"])
        for ours, theirs in names.items():
            writer.writerow([theirs, ds.channels[ours].family, ds.channels[ours].unit])
    return path


def _record_lerobot(ds: Dataset, out: Path, only: set[str] | None,
                    capture_every: int) -> Recorded:
    groups = _groups(ds)
    paths, ids, sidecars = [], {}, {}
    for source, rows in _sources(ds, only):
        folder = _write_lerobot(ds, out, source, rows, groups, capture_every)
        paths.append(folder)
        sidecars[folder] = _write_sidecar(out / f"{source}_episodes.csv", rows)
        ids.update({row["episode_id"]: f"{source}-{i:06d}" for i, row in enumerate(rows)})
    element = {"dynamics": "state", "policy": "action", "perception": "perception",
               "system": "system"}
    names = {n: f"{element[c.family]}_{n}" for n, c in ds.channels.items()}
    mapping = out / "mapping.yaml"
    mapping.write_text(yaml.safe_dump({"source": {"path": "/(real|sim)$"}}))
    return Recorded("lerobot", paths, mapping, _families_csv(out / "channels.csv", ds, names),
                    sidecars, ids)


def _record_robomimic(ds: Dataset, out: Path, only: set[str] | None,
                      capture_every: int) -> Recorded:
    h5py = require("h5py", "ingest")
    groups = _groups(ds)
    paths, ids = [], {}
    out.mkdir(parents=True, exist_ok=True)
    observed = groups.perception + groups.system
    for source, rows in _sources(ds, only):
        path = out / f"{source}.hdf5"
        with h5py.File(path, "w") as f:
            data = f.create_group("data")
            rate = 1.0 / float(np.median(np.diff(ds.read_signals([rows[0]["episode_id"]], [])
                                                  ["t"].to_numpy())))
            data.attrs["env_args"] = json.dumps({"env_name": rows[0]["task"],
                                                 "env_kwargs": {"control_freq": rate}})
            for index, (row, frames) in enumerate(_frames(ds, rows)):
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
                        demo.attrs[key] = _text(value)
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
                    _families_csv(out / "channels.csv", ds, names), {}, ids)


def record_world(dataset: str | Path, out: str | Path, fmt: str, *,
                 episodes: Sequence[str] | None = None, capture_every: int = 2,
                 latency_s: float = 0.03) -> Recorded:
    """Write the episodes of ``dataset`` as recordings of format ``fmt`` under ``out``.

    Args:
        dataset: a wide dataset with one rate per episode (a generated world).
        out: the folder to write (``real/``, ``sim/``, ``mapping.yaml``...).
        fmt: one of :data:`FORMATS`.
        episodes: record only these (default: all).
        capture_every: the perception estimate comes every this many ticks.
        latency_s: it is stamped this long after its capture.

    Returns:
        What to ingest and how.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}; expected one of {', '.join(FORMATS)}")
    ds = load_dataset(dataset)
    out = Path(out)
    only = None if episodes is None else set(episodes)
    if fmt == "lerobot":
        return _record_lerobot(ds, out, only, capture_every)
    if fmt == "robomimic":
        return _record_robomimic(ds, out, only, capture_every)
    return _record_messages(ds, out, fmt, only, capture_every, round(latency_s * 1e9))


def ingest_recorded(rec: Recorded, out: str | Path) -> list[str]:
    """Ingest a recorded world into the dataset ``out`` with its mapping (what
    ``sim2real ingest KIND ...`` does, each LeRobot folder with its own sidecar).

    Returns:
        The IDs of the episodes written.
    """
    from sim2real.ingest import ingest_recordings, load_mapping
    from sim2real.ingest._tables import EpisodeDefaults
    from sim2real.ingest.lerobot import ingest_lerobot
    from sim2real.ingest.robomimic import ingest_robomimic

    mapping = load_mapping(rec.mapping)
    if rec.kind in ("mcap", "rosbag"):
        return ingest_recordings(rec.paths, mapping, out, kind=rec.kind).episodes  # type: ignore[arg-type]
    ids: list[str] = []
    for i, path in enumerate(rec.paths):
        defaults = EpisodeDefaults(sidecar=rec.sidecars.get(path))
        read = ingest_lerobot if rec.kind == "lerobot" else ingest_robomimic
        ids += read(path, out, defaults=defaults, append=i > 0, mapping=mapping,
                    families=rec.families)
    return ids

"""Recordings of messages: MCAP (Foxglove JSON, ROS 2 CDR), rosbag2 (sqlite3, mcap), ROS 1."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import yaml

from sim2real._optional import require
from sim2real.dataset import Dataset
from sim2real.demo.recorded._world import (
    Groups,
    Recorded,
    by_source,
    channel_groups,
    episode_frames,
)

__all__ = ["TYPES", "WRITERS", "record_messages"]

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


def _stamp(ns: int) -> dict[str, int]:
    return {"sec": ns // 1_000_000_000, "nanosec": ns % 1_000_000_000}


def _joints(ns: int, names: list[str], values: np.ndarray) -> dict[str, Any]:
    return {"header": {"stamp": _stamp(ns), "frame_id": ""}, "name": names,
            "position": [float(v) for v in values], "velocity": [], "effort": []}


def _episode_messages(row: dict[str, Any], frames: pa.Table, groups: Groups,
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


WRITERS: dict[str, tuple[str, str, Callable[[Path, list[Msg], dict[str, str]], None]]] = {
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


def _recording_mapping(fmt: str, ds: Dataset, groups: Groups) -> dict[str, Any]:
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


def record_messages(ds: Dataset, out: Path, fmt: str, only: set[str] | None,
                     capture_every: int, latency_ns: int) -> Recorded:
    kind, suffix, write = WRITERS[fmt]
    groups = channel_groups(ds)
    paths, ids = [], {}
    for source, rows in by_source(ds, only):
        (out / source).mkdir(parents=True, exist_ok=True)
        for row, frames in episode_frames(ds, rows):
            msgs = _episode_messages(row, frames, groups, _start_ns(row), capture_every,
                                     latency_ns)
            path = out / source / f"{row['episode_id']}{suffix}"
            write(path, msgs, _facts(row))
            paths.append(path)
            ids[row["episode_id"]] = row["episode_id"]
    mapping = out / "mapping.yaml"
    mapping.write_text(yaml.safe_dump(_recording_mapping(fmt, ds, groups), sort_keys=False))
    return Recorded(kind, paths, mapping, None, {}, ids)

"""Recordings written with the formats' official writers (imported by the ingest tests)."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mcap_ros2")
pytest.importorskip("rosbags")
pytest.importorskip("PIL")

from PIL import Image
from rosbags.typesys import Stores, get_typestore

T0 = 1_767_000_000_000_000_000  # ns: a fixed start, 2025-12-29
JOINT_HZ = 100
IMAGE_HZ = 10
TYPES = {"/joint_states": "sensor_msgs/msg/JointState", "/outcome": "std_msgs/msg/String",
         "/failure": "std_msgs/msg/String", "/camera/compressed": "sensor_msgs/msg/CompressedImage",
         "/camera/raw": "sensor_msgs/msg/Image"}
Msg = tuple[str, int, dict[str, Any]]


def joint_position(k: int, j: int) -> float:
    """The value written for joint ``j`` in message ``k``."""
    return float(np.sin(0.05 * k + j)) + j


def frame(k: int, size: tuple[int, int] = (48, 64)) -> np.ndarray:
    """An RGB frame that darkens with ``k``."""
    rng = np.random.default_rng(k)
    base = max(200 - 8 * k, 10)
    return np.clip(base + rng.integers(-20, 20, (*size, 3)), 0, 255).astype(np.uint8)


def png(pixels: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


def _stamp(t: int) -> dict[str, int]:
    return {"sec": t // 1_000_000_000, "nanosec": t % 1_000_000_000}


def episode_messages(n_joint: int = 50, n_frames: int = 5, outcome: str = "failure",
                     fail_at: float | None = 0.3, t0: int = T0) -> list[Msg]:
    """JointState at 100 Hz, compressed and raw frames at 10 Hz, an outcome and a failure."""
    msgs: list[Msg] = []
    for k in range(n_joint):
        t = t0 + k * 1_000_000_000 // JOINT_HZ
        msgs.append(("/joint_states", t, {
            "header": {"stamp": _stamp(t), "frame_id": ""}, "name": ["j1", "j2", "j3"],
            "position": [joint_position(k, j) for j in range(3)],
            "velocity": [0.1 * k, 0.0, 0.0], "effort": []}))
    for k in range(n_frames):
        t = t0 + k * 1_000_000_000 // IMAGE_HZ + 1
        pixels = frame(k)
        header = {"stamp": _stamp(t), "frame_id": "cam"}
        msgs.append(("/camera/compressed", t, {"header": header, "format": "png",
                                               "data": png(pixels)}))
        msgs.append(("/camera/raw", t, {"header": header, "height": 48, "width": 64,
                                        "encoding": "rgb8", "is_bigendian": 0, "step": 64 * 3,
                                        "data": pixels.tobytes()}))
    if fail_at is not None:
        msgs.append(("/failure", t0 + int(fail_at * 1e9), {"data": "missed_pick"}))
    msgs.append(("/outcome", t0 + (n_joint - 1) * 10_000_000, {"data": outcome}))
    return sorted(msgs, key=lambda m: m[1])


def write_ros2_mcap(path: Path, msgs: list[Msg]) -> Path:
    """An MCAP file with the ROS 2 profile, via mcap-ros2-support's writer."""
    from mcap_ros2.writer import Writer

    store = get_typestore(Stores.ROS2_HUMBLE)
    with path.open("wb") as f:
        writer = Writer(f)
        schemas = {}
        for topic, t, msg in msgs:
            msgtype = TYPES[topic]
            if msgtype not in schemas:
                schemas[msgtype] = writer.register_msgdef(
                    msgtype, store.generate_msgdef(msgtype, ros_version=2)[0])
            writer.write_message(topic, schemas[msgtype], msg, log_time=t, publish_time=t)
        writer.finish()
    return path


def _to_json(topic: str, msg: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Foxglove-style JSON: times as {sec, nsec}, bytes as base64."""
    if topic == "/camera/compressed":
        stamp = msg["header"]["stamp"]
        return "foxglove.CompressedImage", {
            "timestamp": {"sec": stamp["sec"], "nsec": stamp["nanosec"]}, "frame_id": "cam",
            "format": "png", "data": base64.b64encode(msg["data"]).decode()}
    if topic == "/camera/raw":
        stamp = msg["header"]["stamp"]
        return "foxglove.RawImage", {
            "timestamp": {"sec": stamp["sec"], "nsec": stamp["nanosec"]}, "frame_id": "cam",
            "width": msg["width"], "height": msg["height"], "encoding": "rgb8",
            "step": msg["step"], "data": base64.b64encode(msg["data"]).decode()}
    return f"sim2real.{topic.strip('/')}", msg


def write_json_mcap(path: Path, msgs: list[Msg]) -> Path:
    """An MCAP file with JSON-schema channels, as the Foxglove SDK writes them."""
    from mcap.writer import Writer

    with path.open("wb") as f:
        writer = Writer(f)
        writer.start(profile="", library="sim2real-tests")
        channels: dict[str, int] = {}
        for topic, t, msg in msgs:
            name, body = _to_json(topic, msg)
            if topic not in channels:
                schema = writer.register_schema(name, "jsonschema",
                                                json.dumps({"type": "object"}).encode())
                channels[topic] = writer.register_channel(topic, "json", schema)
            writer.add_message(channels[topic], log_time=t, data=json.dumps(body).encode(),
                               publish_time=t)
        writer.finish()
    return path


def _typed(store: Any, msgtype: str, data: Any) -> Any:
    """A typestore message instance from nested dicts (bytes become uint8 arrays)."""
    cls = store.types[msgtype]
    _, fields = store.fielddefs[msgtype]
    kwargs = {}
    for name, (kind, detail) in fields:
        value = data.get(name) if isinstance(data, dict) else None
        kwargs[name] = _convert(store, kind, detail, value)
    return cls(**kwargs)


def _convert(store: Any, kind: int, detail: Any, value: Any) -> Any:
    from rosbags.typesys.base import Nodetype

    if kind == Nodetype.NAME:
        return _typed(store, detail, value or {})
    if kind == Nodetype.BASE:
        default = "" if detail[0] == "string" else 0
        return default if value is None else value
    sub_kind, sub_detail = detail[0]
    if sub_kind == Nodetype.BASE and sub_detail[0] != "string":
        dtype = {"uint8": np.uint8, "int8": np.int8, "float32": np.float32}.get(
            sub_detail[0], np.float64)
        if isinstance(value, bytes | bytearray):
            return np.frombuffer(value, dtype=np.uint8).copy()
        return np.asarray(value or [], dtype=dtype)
    return [_convert(store, sub_kind, sub_detail, v) for v in (value or [])]


def write_rosbag2(path: Path, msgs: list[Msg], storage: str = "sqlite3") -> Path:
    """A rosbag2 folder (sqlite3 or mcap storage) via rosbags' writer."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    store = get_typestore(Stores.ROS2_HUMBLE)
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        conns = {}
        for topic, t, msg in msgs:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, TYPES[topic], typestore=store)
            data = store.serialize_cdr(_typed(store, TYPES[topic], msg), TYPES[topic])
            writer.write(conns[topic], t, data)
    return path


def write_ros1(path: Path, msgs: list[Msg]) -> Path:
    """A ROS 1 bag via rosbags' writer."""
    from rosbags.rosbag1 import Writer

    store = get_typestore(Stores.ROS1_NOETIC)
    with Writer(path) as writer:
        conns = {}
        for topic, t, msg in msgs:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, TYPES[topic], typestore=store)
            writer.write(conns[topic], t,
                         store.serialize_ros1(_typed(store, TYPES[topic], msg), TYPES[topic]))
    return path


MAPPING = {
    "task": "pick_place", "source": "real", "deployment": {"filename": r"^(w\d+)_"},
    "outcome": {"topic": "/outcome", "field": "data"},
    "failure_time": {"topic": "/failure"},
    "failure_label": {"topic": "/failure", "field": "data"},
    "channels": ["/joint_states.position[0] -> j1_pos", "/joint_states.position[2] -> j3_pos",
                 {"from": "/joint_states.velocity[0]", "name": "j1_vel", "family": "dynamics",
                  "unit": "rad/s"}],
    "images": [{"topic": "/camera/compressed", "prefix": "cam"},
               {"topic": "/camera/raw", "prefix": "raw"}],
    "ctx": {"object_type": "bottle"},
}

"""Ingest rate against a plain iteration over the same file with the same reader library.

Writes a ROS 2 MCAP with N ``sensor_msgs/JointState`` messages (100 Hz), a second one
with JPEG ``CompressedImage`` frames (640x480, 30 Hz), and a multi-rate fleet (a generated
world recorded by :mod:`sim2real.demo.recorded`: one file per episode, joint states and
commands at 20 Hz, a 10 Hz perception estimate, real-only system topics and a 1 Hz
``DiagnosticArray``, facts in metadata records) as Foxglove JSON MCAP, ROS 2 MCAP, rosbag2
(sqlite3) and ROS 1 bags, then times in this process:

- plain: every message read and decoded by the reader library, nothing else
  (mcap + its decoder; rosbags' AnyReader for the rosbag path), file by file;
- ingest: ``sim2real.ingest.ingest_recordings`` into a dataset (field extraction, image
  statistics, episode split and facts, Parquet write).

The ratio ingest/plain is the figure. Image decoding is reported as frames/s against the
recorded 30 frames/s. Results are appended to the "## Ingest" section of bench/README.md.

Run: ``.venv/bin/python -m bench.ingest_bench [--messages 100000] [--frames 300]
[--fleet-scale 0.1]``
"""

from __future__ import annotations

import argparse
import io
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

README = Path(__file__).with_name("README.md")
SECTION = "## Ingest"
IMAGE_HZ = 30


def _msgdef(msgtype: str) -> str:
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_HUMBLE).generate_msgdef(msgtype, ros_version=2)[0]


def write_joints(path: Path, n: int) -> Path:
    """N JointState messages of 7 joints at 100 Hz."""
    from mcap_ros2.writer import Writer

    rng = np.random.default_rng(0)
    names = [f"j{i}" for i in range(1, 8)]
    with path.open("wb") as f:
        writer = Writer(f)
        schema = writer.register_msgdef("sensor_msgs/msg/JointState",
                                        _msgdef("sensor_msgs/msg/JointState"))
        for k in range(n):
            t = 1_700_000_000_000_000_000 + k * 10_000_000
            stamp = {"sec": t // 1_000_000_000, "nanosec": t % 1_000_000_000}
            writer.write_message("/joint_states", schema, {
                "header": {"stamp": stamp, "frame_id": ""}, "name": names,
                "position": rng.normal(size=7).tolist(), "velocity": rng.normal(size=7).tolist(),
                "effort": rng.normal(size=7).tolist()}, log_time=t, publish_time=t)
        writer.finish()
    return path


def write_frames(path: Path, n: int) -> Path:
    """N JPEG frames (640x480) at 30 Hz."""
    from mcap_ros2.writer import Writer
    from PIL import Image

    rng = np.random.default_rng(1)
    base = rng.integers(0, 255, (480, 640, 3), dtype=np.uint8)
    with path.open("wb") as f:
        writer = Writer(f)
        schema = writer.register_msgdef("sensor_msgs/msg/CompressedImage",
                                        _msgdef("sensor_msgs/msg/CompressedImage"))
        for k in range(n):
            t = 1_700_000_000_000_000_000 + k * 1_000_000_000 // IMAGE_HZ
            buf = io.BytesIO()
            Image.fromarray(np.roll(base, k * 4, axis=1)).save(buf, format="JPEG", quality=85)
            stamp = {"sec": t // 1_000_000_000, "nanosec": t % 1_000_000_000}
            writer.write_message("/camera/compressed", schema, {
                "header": {"stamp": stamp, "frame_id": "cam"}, "format": "jpeg",
                "data": buf.getvalue()}, log_time=t, publish_time=t)
        writer.finish()
    return path


def plain_mcap(paths: list[Path]) -> int:
    """Read and decode every message with mcap + mcap-ros2-support (and a JSON decoder)."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    from sim2real.ingest.mcap import _json_decoder_factory

    n = 0
    for path in paths:
        with path.open("rb") as f:
            reader = make_reader(f, decoder_factories=[DecoderFactory(), _json_decoder_factory()])
            for _ in reader.iter_decoded_messages():
                n += 1
    return n


def plain_rosbags(paths: list[Path]) -> int:
    """Read and deserialize every message with rosbags' AnyReader, one recording at a time."""
    from rosbags.highlevel import AnyReader

    n = 0
    for path in paths:
        with AnyReader([path]) as reader:
            for conn, _, raw in reader.messages():
                reader.deserialize(raw, conn.msgtype)
                n += 1
    return n


def _timed(func: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    return best


def ingest(paths: list[Path], mapping: Any, kind: str, out: Path) -> None:
    from sim2real.ingest import ingest_recordings, parse_mapping

    if isinstance(mapping, dict):
        mapping = parse_mapping(mapping)
    ingest_recordings(paths, mapping, out, kind=kind)


def fleet_cases(root: Path, scale: float) -> list[tuple[str, list[Path], Any, str]]:
    """The multi-rate fleet recorded in each message format: ``(case, files, mapping,
    kind)``."""
    import dataclasses

    from sim2real.demo.recorded import record_world
    from sim2real.demo.synthetic import generate_world, standard_world
    from sim2real.ingest import load_mapping

    spec = dataclasses.replace(standard_world(), real_rate_hz=20.0, sim_rate_hz=20.0)
    world = generate_world(spec, root / "world", seed=0, scale=scale)
    cases = []
    for fmt in ("mcap-json", "mcap-ros2", "rosbag2", "ros1"):
        rec = record_world(world.dataset, root / fmt, fmt)
        cases.append((f"multi-rate fleet, {fmt} ({len(rec.paths)} files)", rec.paths,
                      load_mapping(rec.mapping), rec.kind))
    return cases


def run(messages: int, frames: int, fleet_scale: float) -> list[tuple[str, int, float, float]]:
    """``(case, messages, plain seconds, ingest seconds)`` per case."""
    joints_map = {"task": "t", "outcome": "success", "deployment": "w01",
                  "channels": [f"/joint_states.{f}[{i}] -> j{i + 1}_{f[:3]}"
                               for f in ("position", "velocity", "effort") for i in range(7)]}
    image_map = {"task": "t", "outcome": "success", "deployment": "w01",
                 "images": [{"topic": "/camera/compressed", "prefix": "cam"}]}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        joints = write_joints(root / "joints.mcap", messages)
        images = write_frames(root / "frames.mcap", frames)
        cases: list[tuple[str, list[Path], Any, str]] = [
            ("JointState, mcap", [joints], joints_map, "mcap"),
            ("JointState, rosbags", [joints], joints_map, "rosbag"),
            *fleet_cases(root / "fleet", fleet_scale),
            ("JPEG 640x480, mcap", [images], image_map, "mcap")]
        for case, paths, mapping, kind in cases:
            plain = plain_mcap if kind == "mcap" else plain_rosbags
            n = plain(paths)
            t_plain = _timed(lambda p=paths, f=plain: f(p))
            t_ingest = _timed(lambda p=paths, m=mapping, k=kind: ingest(p, m, k, root / "ds"))
            rows.append((case, n, t_plain, t_ingest))
    return rows


def table(rows: list[tuple[str, int, float, float]]) -> str:
    """A Markdown table of the results."""
    lines = ["| case | messages | plain msg/s | ingest msg/s | ratio |", "|---|---|---|---|---|"]
    for case, n, t_plain, t_ingest in rows:
        lines.append(f"| {case} | {n:,} | {n / t_plain:,.0f} | {n / t_ingest:,.0f} | "
                     f"{t_plain / t_ingest:.2f} |")
    case, n, _, t_ingest = rows[-1]
    lines.append("")
    lines.append(f"Image decode + statistics inside ingest: {n / t_ingest:,.0f} frames/s against "
                 f"{IMAGE_HZ} frames/s recorded ({n / t_ingest / IMAGE_HZ:.1f}x real time).")
    return "\n".join(lines)


def append_readme(text: str, command: str, *, section: str = SECTION,
                  about: str = __doc__.splitlines()[0]) -> None:
    """Append the results under ``section`` of bench/README.md (created after the others,
    with the line ``about``, if absent), leaving other sections alone."""
    current = README.read_text() if README.exists() else "# Benchmarks\n"
    stamp = time.strftime("%Y-%m-%d %H:%M")
    entry = (f"\n### {stamp}, Python {platform.python_version()}, {platform.machine()}\n\n"
             f"`{command}`\n\n{text}\n")
    if f"{section}\n" not in current:
        current = current.rstrip("\n") + f"\n\n{section}\n\n{about}\n"
        README.write_text(current + entry)
        return
    head, _, tail = current.partition(f"{section}\n")
    nxt = tail.find("\n## ")
    body, rest = (tail, "") if nxt < 0 else (tail[:nxt], tail[nxt:])
    README.write_text(head + section + "\n" + body.rstrip("\n") + "\n" + entry + rest)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark, print the table, record it in bench/README.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--fleet-scale", type=float, default=0.1,
                        help="size of the multi-rate fleet (1.0: ~1000 real, 600 sim episodes)")
    parser.add_argument("--no-readme", action="store_true")
    args = parser.parse_args(argv)
    text = table(run(args.messages, args.frames, args.fleet_scale))
    print(text)
    if not args.no_readme:
        command = ".venv/bin/python -m bench.ingest_bench " + " ".join(
            argv if argv is not None else sys.argv[1:])
        append_readme(text, command.strip())


if __name__ == "__main__":
    main()

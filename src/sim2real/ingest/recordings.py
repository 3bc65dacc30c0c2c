"""Ingest message recordings (MCAP files, ROS 1 bags, rosbag2 folders) with a mapping."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Literal

import pyarrow as pa

from sim2real.dataset import Channel, ParamRange, infer_family, write_dataset
from sim2real.errors import IngestError
from sim2real.ingest._episodes import Episode, split_episodes
from sim2real.ingest._extract import extract
from sim2real.ingest._source import RecordingReader
from sim2real.ingest._tables import episodes_table, read_sidecar
from sim2real.ingest.images import STATS
from sim2real.ingest.mapping import Mapping
from sim2real.ingest.mcap import McapRecording
from sim2real.ingest.rosbag import RosbagRecording, is_rosbag2_dir

__all__ = ["READERS", "Kind", "collect_files", "ingest_recordings", "open_recording"]

Kind = Literal["mcap", "rosbag"]
READERS: dict[str, Callable[[Path], RecordingReader]] = {
    "mcap": McapRecording,
    "rosbag": RosbagRecording,
}
_SUFFIXES = {"mcap": (".mcap",), "rosbag": (".bag", ".db3", ".mcap")}


def open_recording(path: Path, kind: Kind | None = None) -> RecordingReader:
    """Open a recording with the reader for ``kind`` (guessed from the path when ``None``)."""
    if kind is None:
        kind = "mcap" if path.suffix == ".mcap" else "rosbag"
    return READERS[kind](path)


def collect_files(paths: Iterable[str | Path], kind: Kind) -> list[Path]:
    """Expand folders into the recordings they hold (rosbag2 folders count as one).

    Raises:
        IngestError: a path does not exist or a folder holds no recording.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise IngestError(f"{path}: no such file or folder")
        if path.is_file() or (kind == "rosbag" and is_rosbag2_dir(path)):
            found.append(path)
            continue
        inside = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _SUFFIXES[kind]
                        and not (kind == "rosbag" and is_rosbag2_dir(p.parent)))
        if kind == "rosbag":
            inside += sorted(p for p in path.rglob("metadata.yaml") if is_rosbag2_dir(p.parent))
            inside = sorted(p.parent if p.name == "metadata.yaml" else p for p in inside)
        if not inside:
            expected = " or ".join(_SUFFIXES[kind])
            raise IngestError(f"{path}: the folder holds no {expected} recording")
        found.extend(inside)
    return found


def _channels(mapping: Mapping) -> list[Channel]:
    out = [Channel(c.name, c.family or infer_family(c.name) or infer_family(c.topic) or "dynamics",
                   c.unit) for c in mapping.channels]
    for image in mapping.images:
        out += [Channel(f"{image.column_prefix}_{s}", "perception")
                for s in (*STATS, "hist_dist")]
    return out


def read_episodes(files: Sequence[Path], mapping: Mapping, kind: Kind,
                  progress: Callable[[int], None] | None = None) -> list[Episode]:
    """Extract and split every recording; nothing is written."""
    sidecar = {}
    if mapping.sidecar is not None:
        sidecar = read_sidecar(mapping.base_dir / mapping.sidecar.path, mapping.sidecar.key)
    episodes: list[Episode] = []
    for path in files:
        reader = open_recording(path, kind)
        try:
            extracted = extract(reader, mapping, progress)
        finally:
            reader.close()
        episodes.extend(split_episodes(extracted, mapping, path, sidecar))
    return episodes


def ingest_recordings(paths: Iterable[str | Path], mapping: Mapping, out: str | Path, *,
                      kind: Kind = "mcap", append: bool = False,
                      progress: Callable[[int], None] | None = None) -> list[str]:
    """Convert recordings into the dataset at ``out``.

    Every file is read and checked before anything is written, and the dataset is written
    through :func:`sim2real.dataset.write_dataset`, so an error leaves ``out`` as it was.

    Args:
        paths: files or folders of recordings.
        mapping: the validated mapping (:func:`sim2real.ingest.load_mapping`).
        out: the dataset folder.
        kind: ``"mcap"`` (mcap package) or ``"rosbag"`` (rosbags' AnyReader).
        append: add the episodes to an existing dataset.
        progress: called with the number of messages read since its last call.

    Returns:
        The IDs of the episodes written.

    Raises:
        IngestError: a file, topic, field or value is missing or malformed.
    """
    files = collect_files(paths, kind)
    episodes = read_episodes(files, mapping, kind, progress)
    table = episodes_table([e.row for e in episodes])
    signals = pa.concat_tables([e.signals for e in episodes], promote_options="default")
    params = [ParamRange(n, p.low, p.high, p.nominal) for n, p in mapping.params.items()]
    write_dataset(out, table, signals, channels=_channels(mapping), params=params, append=append)
    return [e.row["episode_id"] for e in episodes]

"""Ingest message recordings (MCAP files, ROS 1 bags, rosbag2 folders) with a mapping."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pyarrow as pa

from sim2real.dataset import Channel, ParamRange, infer_family, write_dataset
from sim2real.errors import IngestError
from sim2real.ingest._episodes import Episode, split_episodes
from sim2real.ingest._extract import extract, plan_of
from sim2real.ingest._source import RecordingReader
from sim2real.ingest._tables import episodes_table, read_sidecar
from sim2real.ingest.images import STATS
from sim2real.ingest.mapping import Mapping
from sim2real.ingest.mcap import McapRecording
from sim2real.ingest.rosbag import RosbagRecording, is_rosbag2_dir

__all__ = ["READERS", "IngestSummary", "Kind", "collect_files", "ingest_recordings",
           "open_recording", "read_episodes"]

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


@dataclass(frozen=True)
class IngestSummary:
    """What an ingest wrote and what it had to leave out.

    Attributes:
        episodes: the IDs of the episodes written.
        skipped: ``(file, why)`` of each recording left out (``keep_going``).
        warnings: optional channels left null, non-finite samples left out, families kept.
    """

    episodes: list[str]
    skipped: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _channels(mapping: Mapping) -> list[Channel]:
    """Every channel of every variant, with its declared (or inferred) family."""
    out: dict[str, Channel] = {}
    for variant in mapping.all_variants:
        for c in variant.channels:
            family = c.family or infer_family(c.name) or infer_family(c.topic) or "dynamics"
            out.setdefault(c.name, Channel(c.name, family, c.unit))
        for image in variant.images:
            for stat in (*STATS, "hist_dist"):
                name = f"{image.column_prefix}_{stat}"
                out.setdefault(name, Channel(name, "perception"))
    return list(out.values())


def read_episodes(files: Sequence[Path], mapping: Mapping, kind: Kind,
                  progress: Callable[[int], None] | None = None, *,
                  keep_going: bool = False) -> tuple[list[Episode], list[tuple[str, str]]]:
    """Extract and split every recording; nothing is written.

    Returns:
        The episodes, and ``(file, why)`` of each recording left out (only with
        ``keep_going``; otherwise the first bad recording raises).

    Raises:
        IngestError: a recording cannot be read or does not fit the mapping.
    """
    sidecar = {}
    if mapping.sidecar is not None:
        sidecar = read_sidecar(mapping.base_dir / mapping.sidecar.path, mapping.sidecar.key)
    plan = plan_of(mapping)
    episodes: list[Episode] = []
    skipped: list[tuple[str, str]] = []
    for path in files:
        try:
            reader = open_recording(path, kind)
            try:
                extracted = extract(reader, mapping, plan, progress)
            finally:
                reader.close()
            episodes.extend(split_episodes(extracted, plan, mapping, path, sidecar))
        except IngestError as err:
            if not keep_going:
                raise
            skipped.append((str(path), str(err)))
    return episodes, skipped


def ingest_recordings(paths: Iterable[str | Path], mapping: Mapping, out: str | Path, *,
                      kind: Kind = "mcap", append: bool = False, keep_going: bool = False,
                      progress: Callable[[int], None] | None = None) -> IngestSummary:
    """Convert recordings into the dataset at ``out`` (signals in the long layout: every
    channel keeps its own message times).

    Every file is read and checked before anything is written, and the dataset is written
    through :func:`sim2real.dataset.write_dataset`, so an error leaves ``out`` as it was.

    Args:
        paths: files or folders of recordings.
        mapping: the validated mapping (:func:`sim2real.ingest.load_mapping`).
        out: the dataset folder.
        kind: ``"mcap"`` (mcap package) or ``"rosbag"`` (rosbags' AnyReader).
        append: add the episodes to an existing dataset (its ``channels.csv`` entries win).
        keep_going: leave out a recording that cannot be read (listed in the summary)
            instead of stopping at it.
        progress: called with the number of messages read since its last call.

    Returns:
        What was written, left out and warned about.

    Raises:
        IngestError: a file, topic, field or value is missing or malformed (the first one;
            with ``keep_going``, only when no recording could be read).
    """
    if not mapping.channels and not mapping.images:
        raise IngestError("the mapping names no channels and no images")
    files = collect_files(paths, kind)
    episodes, skipped = read_episodes(files, mapping, kind, progress, keep_going=keep_going)
    if not episodes:
        reasons = "; ".join(why for _, why in skipped[:3])
        raise IngestError(f"no recording could be read ({len(skipped)} left out: {reasons})")
    table = episodes_table([e.row for e in episodes])
    signals = pa.concat_tables([e.signals for e in episodes])
    params = [ParamRange(n, p.low, p.high, p.nominal) for n, p in mapping.params.items()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        write_dataset(out, table, signals, channels=_channels(mapping), params=params,
                      append=append)
    notes = [w for e in episodes for w in e.warnings] + [str(w.message) for w in caught]
    return IngestSummary([e.row["episode_id"] for e in episodes], skipped, notes)

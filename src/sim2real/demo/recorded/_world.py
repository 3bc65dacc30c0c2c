"""What every recorded format shares: the dataset's channels by topic, its episodes by
source, what ingest needs to read a recording back."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sim2real.dataset import Dataset

__all__ = ["Groups", "Recorded", "by_source", "channel_groups", "episode_frames",
           "families_csv", "text"]


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
class Groups:
    """The dataset's channels by the topic that carries them."""

    dynamics: list[str]
    policy: list[str]
    perception: list[str]
    system: list[str]  # [0] on /system at full rate, the rest in /diagnostics at 1 Hz


def channel_groups(ds: Dataset) -> Groups:
    by: dict[str, list[str]] = {"dynamics": [], "policy": [], "perception": [], "system": []}
    for name, channel in ds.channels.items():
        by[channel.family].append(name)
    return Groups(by["dynamics"], by["policy"], by["perception"], by["system"])


def by_source(ds: Dataset,
             only: set[str] | None) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Each source's episode rows (``only`` those, when given), each with ``_index``, its
    position among its source's episodes: a recording does not change with the subset."""
    for source in ("real", "sim"):
        rows = ds.episodes.filter(pc.equal(ds.episodes["source"], source)).to_pylist()
        rows = [{**r, "_index": i} for i, r in enumerate(rows)
                if only is None or r["episode_id"] in only]
        if rows:
            yield source, rows


def episode_frames(ds: Dataset,
                   rows: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], pa.Table]]:
    """Each episode's rows of the wide signals, read a block of episodes at a time."""
    for start in range(0, len(rows), 256):
        block = rows[start : start + 256]
        table = ds.read_signals([r["episode_id"] for r in block])
        for row in block:
            yield row, table.filter(pc.equal(table["episode_id"], row["episode_id"]))


def text(value: Any) -> str:
    if value is None:
        return ""
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def families_csv(path: Path, ds: Dataset, names: dict[str, str]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["channel", "family", "unit"])
        for ours, theirs in names.items():
            writer.writerow([theirs, ds.channels[ours].family, ds.channels[ours].unit])
    return path

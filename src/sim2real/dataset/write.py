"""Write a dataset in the canonical format, atomically."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sim2real._atomic import atomic_files, link_tree
from sim2real.dataset.schema import Channel, ParamRange
from sim2real.errors import DatasetError

__all__ = ["write_dataset"]

_ROW_GROUP_ROWS = 128_000
_Named = TypeVar("_Named", Channel, ParamRange)
_REWRITTEN = frozenset({"episodes.parquet", "episodes.csv", "channels.csv", "params.csv"})


def write_dataset(
    path: str | Path,
    episodes: pa.Table,
    signals: pa.Table | Iterable[pa.Table],
    *,
    channels: Sequence[Channel] = (),
    params: Sequence[ParamRange] = (),
    append: bool = False,
) -> Path:
    """Write (or extend) a dataset folder.

    ``signals`` may be one table or an iterable of tables (one Parquet part each), so a large
    dataset can be streamed. Each part is sorted by ``episode_id`` then ``t`` so that readers can
    prune row groups by episode. The folder is replaced or extended only once every file is
    written: an error leaves an existing dataset untouched.

    Args:
        path: the dataset folder.
        episodes: one row per episode (``episode_id``, ``source``, ``task``, ...).
        signals: samples with ``episode_id``, ``t`` and one float column per channel.
        channels: families and units to record in ``channels.csv``.
        params: randomisation ranges to record in ``params.csv``.
        append: add to an existing dataset instead of replacing it; episode IDs must be new.

    Returns:
        The dataset folder.

    Raises:
        DatasetError: an appended episode ID already exists.
    """
    root = Path(path)
    parts = [signals] if isinstance(signals, pa.Table) else signals
    existing = root / "episodes.parquet"
    if append and existing.exists():
        old = pq.read_table(existing)
        clash = pc.is_in(episodes["episode_id"], value_set=old["episode_id"])
        if pc.any(clash).as_py():
            first = pc.index(clash, True).as_py()
            msg = f"episode_id {episodes['episode_id'][first].as_py()!r} is already in the dataset"
            raise DatasetError(msg, file=str(existing), column="episode_id", row=first)
        episodes = pa.concat_tables([old, episodes], promote_options="permissive")
        channels = _merge(_read_channels(root), channels)
        params = _merge(_read_params(root), params)
        first_part = len(list((root / "signals").glob("*.parquet")))
    else:
        append = False
        first_part = 0
    with atomic_files(root, replace=True) as stage:
        if append:
            link_tree(root, stage, skip=_REWRITTEN)
        pq.write_table(episodes, stage / "episodes.parquet", write_page_checksum=True)
        (stage / "signals").mkdir(exist_ok=True)
        for i, part in enumerate(parts, start=first_part):
            ordered = part if _is_sorted(part) else part.sort_by(
                [("episode_id", "ascending"), ("t", "ascending")])
            # Dictionary-encode only the episode IDs: float channels gain nothing from a
            # dictionary and building one costs ~5x the write time (2.56 s vs 0.50 s for
            # a 2M-row part).
            # Page checksums: the readers verify them, so a corrupt page is an error, never
            # silently different values.
            pq.write_table(
                ordered, stage / "signals" / f"part-{i:05d}.parquet",
                row_group_size=_ROW_GROUP_ROWS, use_dictionary=["episode_id"],
                write_page_checksum=True,
            )
        if channels:
            _write_csv(stage / "channels.csv", ["channel", "family", "unit"],
                       [(c.name, c.family, c.unit) for c in channels])
        if params:
            _write_csv(stage / "params.csv", ["param", "low", "high", "nominal"],
                       [(p.name, p.low, p.high, p.nominal) for p in params])
    return root


def _is_sorted(part: pa.Table) -> bool:
    """Whether ``part`` is already in (``episode_id``, ``t``) order: generators write it so."""
    if part.num_rows < 2:
        return True
    ids = part["episode_id"].combine_chunks()
    if pa.types.is_dictionary(ids.type):
        ids = ids.cast(pa.string())
    t = part["t"].combine_chunks()
    head, tail = ids.slice(0, len(ids) - 1), ids.slice(1)
    same = pc.equal(head, tail)
    ordered = pc.or_(pc.less(head, tail),
                     pc.and_(same, pc.less(t.slice(0, len(t) - 1), t.slice(1))))
    return bool(pc.all(pc.fill_null(ordered, False)).as_py())


def _merge(old: Sequence[_Named], new: Sequence[_Named]) -> list[_Named]:
    merged = {item.name: item for item in old}
    merged.update({item.name: item for item in new})
    return list(merged.values())


def _write_csv(path: Path, header: list[str], rows: Iterable[tuple[object, ...]]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def _read_channels(root: Path) -> list[Channel]:
    path = root / "channels.csv"
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return [Channel(r["channel"], r["family"], r.get("unit") or "")  # type: ignore[arg-type]
                for r in csv.DictReader(f)]


def _read_params(root: Path) -> list[ParamRange]:
    path = root / "params.csv"
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return [ParamRange(r["param"], float(r["low"]), float(r["high"]), float(r["nominal"]))
                for r in csv.DictReader(f)]

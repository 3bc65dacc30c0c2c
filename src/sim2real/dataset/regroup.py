"""Signals in any file order, read as if sorted by episode: the check, and the one-pass regroup.

The analysis reads the samples of chosen episodes (every sim rollout, the real failures, a
sample of successes). Where the parts are *clustered by episode* (each part's row groups in
``episode_id`` order, or the part small enough to read whole, and no two parts' ID ranges
overlapping: what ``write_dataset`` writes, or any sort by ``episode_id``), the row groups
holding them are found from the footers' statistics and read where they lie
(:mod:`sim2real.match.shards`). Where they are not (a log written in time order, sim first
then real under random IDs, many small files each spanning the fleet), any row group may hold
any episode, and every read of some episodes would be a pass over all the files. Instead the
wanted episodes' rows are routed, in one streaming pass, into *buckets*: Parquet files in a
scratch folder, each holding a contiguous range of episode IDs. From then on the buckets are
the signals, clustered by construction: one read and one write of what is needed, whatever
the order the files came in.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from sim2real.dataset.ids import EpisodeIndex
from sim2real.dataset.layout import layout_of
from sim2real.dataset.load import Dataset, signal_batches
from sim2real.dataset.location import Location

__all__ = ["Clustering", "PartOrder", "clustering", "part_order", "regroup"]

# A part whose row groups are not in episode order is still read as one piece up to this
# many decoded bytes: a bucket written here, or a small file of whole episodes.
WHOLE_PART_BYTES = 512 << 20
# Rows waiting to be written, all buckets together: one flush writes a row group to each.
_BUFFER_BYTES = 128 << 20


class PartOrder(NamedTuple):
    """One Parquet part's ``episode_id`` range per row group, from its footer.

    Attributes:
        file: the part.
        bounds: ``(min, max)`` episode ID of each row group.
        in_order: the row groups follow each other in ``episode_id`` order.
        decoded_bytes: the part's size decoded (uncompressed column chunks).
        long: the part is in the long layout.
    """

    file: Location
    bounds: list[tuple[str, str]]
    in_order: bool
    decoded_bytes: int
    long: bool

    @property
    def first(self) -> str:
        """The smallest episode ID in the part (that of any row group: they may overlap)."""
        return min(lo for lo, _ in self.bounds)

    @property
    def last(self) -> str:
        return max(hi for _, hi in self.bounds)

    @property
    def whole(self) -> bool:
        """Read as one piece: its row groups are not in order, but it is small."""
        return not self.in_order and self.decoded_bytes <= WHOLE_PART_BYTES


class Clustering(NamedTuple):
    """Whether the signals are clustered by episode, and why (for the progress display).

    Attributes:
        parts: each part's order, in file order; empty when not clustered.
        why: one line: what was found.
    """

    parts: list[PartOrder]
    why: str

    @property
    def clustered(self) -> bool:
        return bool(self.parts)


def part_order(file: Location) -> PartOrder | str:
    """The order of one part from its footer, or why it cannot be pruned by episode."""
    if file.suffix != ".parquet":
        return f"{file.name} is {file.suffix[1:].upper()}, which has no row-group statistics"
    parquet = pq.ParquetFile(file.path, filesystem=file.filesystem)
    meta = parquet.metadata
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    col = names.index("episode_id")
    bounds = []
    decoded = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        decoded += sum(group.column(j).total_uncompressed_size for j in range(group.num_columns))
        stats = group.column(col).statistics
        if stats is None or not stats.has_min_max:
            return f"{file.name} has no episode_id statistics in row group {g}"
        bounds.append((str(stats.min), str(stats.max)))
    in_order = all(a[1] <= b[0] for a, b in itertools.pairwise(bounds))
    long = layout_of(parquet.schema_arrow, str(file)) == "long"
    order = PartOrder(file, bounds, in_order, decoded, long)
    if not in_order and not order.whole:
        return (f"the row groups of {file.name} are not in episode_id order (each spans "
                "many episodes' ID range)")
    return order


def clustering(files: Sequence[Location]) -> Clustering:
    """Whether the row groups of ``files`` can be pruned by episode (see the module)."""
    parts = []
    for file in files:
        order = part_order(file)
        if isinstance(order, str):
            return Clustering([], order)
        parts.append(order)
    ranges = sorted((p.first, p.last, p.file.name) for p in parts if p.bounds)
    for a, b in itertools.pairwise(ranges):
        if a[1] > b[0]:
            return Clustering([], f"the episode_id ranges of {a[2]} and {b[2]} overlap")
    what = "one part" if len(parts) == 1 else f"{len(parts)} parts"
    return Clustering(parts, f"{what} clustered by episode_id: row groups pruned by their "
                      "statistics")


def regroup(ds: Dataset, episode_ids: Sequence[str], scratch: Path) -> Dataset:
    """``ds`` with its signals replaced by buckets in ``scratch`` holding the rows of
    ``episode_ids`` (every channel), clustered by episode; one streaming pass.

    Rows of other episodes are left behind: they were read, never written.

    Raises:
        DatasetError: a part cannot be read (named), or ``scratch`` cannot be written.
    """
    wanted = np.unique(np.asarray(list(episode_ids), dtype=object).astype(str))
    total = sum(_decoded_bytes(f) for f in ds.signal_files)
    share = len(wanted) / max(ds.episodes.num_rows, 1)
    # A quarter of the bound on a whole part, so that a bucket is always read whole.
    n_buckets = max(1, math.ceil(total * share / (WHOLE_PART_BYTES // 4)))
    # Buckets by rank in ID order: each holds a contiguous range, none overlaps another.
    bucket_of = np.arange(len(wanted)) * n_buckets // max(len(wanted), 1)
    index = EpisodeIndex(wanted.tolist())
    schema = _target_schema(ds)
    scratch.mkdir(parents=True, exist_ok=True)
    writers = _Buckets(scratch, n_buckets, schema)
    for file in ds.signal_files:
        for batch in signal_batches(file, schema.names):
            codes = index.rows(batch["episode_id"])
            bucket = np.where(codes >= 0, bucket_of[np.maximum(codes, 0)], -1)
            keep = np.flatnonzero(bucket >= 0)
            if not keep.size:
                continue
            order = keep[np.argsort(bucket[keep], kind="stable")]
            counts = np.bincount(bucket[order], minlength=n_buckets)
            rows = _conform(pa.Table.from_batches([batch]).take(order), schema)
            for b, start, stop in zip(range(n_buckets), np.cumsum(counts) - counts,
                                      np.cumsum(counts), strict=True):
                if stop > start:
                    writers.add(int(b), rows.slice(int(start), int(stop - start)))
    return dataclasses.replace(ds, signal_files=writers.close())


def _decoded_bytes(file: Location) -> int:
    if file.suffix != ".parquet":
        return int(file.filesystem.get_file_info(file.path).size)
    meta = pq.read_metadata(file.path, filesystem=file.filesystem)
    return sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups))


def _target_schema(ds: Dataset) -> pa.Schema:
    """The buckets' columns: ``episode_id`` and ``t`` (float64), then every channel, each of
    the type its first part gives it (long layout: ``channel`` and ``value``)."""
    fields = [pa.field("episode_id", pa.string()), pa.field("t", pa.float64())]
    if ds.layout == "long":
        return pa.schema([*fields, pa.field("channel", pa.string()),
                          pa.field("value", pa.float64())])
    types: dict[str, pa.DataType] = {}
    for file in ds.signal_files:
        for field in _schema_of(file):
            types.setdefault(field.name, field.type)
    return pa.schema(fields + [pa.field(c, types.get(c, pa.float64())) for c in ds.channels])


def _schema_of(file: Location) -> pa.Schema:
    if file.suffix == ".parquet":
        return pq.read_schema(file.path, filesystem=file.filesystem)
    return pads.dataset(file.path, filesystem=file.filesystem, format="csv").schema


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with ``schema``'s columns and types (a channel its part lacks: null)."""
    columns = []
    for field in schema:
        if field.name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        column = table[field.name]
        if column.type != field.type:
            column = pc.cast(column, field.type)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


class _Buckets:
    """One Parquet writer per bucket; rows wait in memory until enough are buffered."""

    def __init__(self, folder: Path, n: int, schema: pa.Schema) -> None:
        self.files = [folder / f"bucket-{b:05d}.parquet" for b in range(n)]
        self.schema = schema
        self._waiting: list[list[pa.Table]] = [[] for _ in range(n)]
        self._bytes = 0
        self._writers: dict[int, pq.ParquetWriter] = {}

    def add(self, bucket: int, rows: pa.Table) -> None:
        self._waiting[bucket].append(rows)
        self._bytes += rows.nbytes
        if self._bytes > _BUFFER_BYTES:
            self._flush()

    def _flush(self) -> None:
        for b, tables in enumerate(self._waiting):
            if not tables:
                continue
            writer = self._writers.get(b)
            if writer is None:
                keys = [k for k in ("episode_id", "channel") if k in self.schema.names]
                # Scratch, read once, soon: no compression; statistics only where pruned.
                writer = self._writers[b] = pq.ParquetWriter(
                    self.files[b], self.schema, compression="none", use_dictionary=keys,
                    write_statistics=["episode_id"])
            writer.write_table(pa.concat_tables(tables), row_group_size=1 << 30)
            tables.clear()
        self._bytes = 0

    def close(self) -> tuple[Location, ...]:
        """Write what waits and close every bucket; the buckets written, in ID order."""
        try:
            if not self._writers:  # no wanted episode has a sample: one empty bucket
                self._waiting[0].append(self.schema.empty_table())
            self._flush()
        finally:
            for writer in self._writers.values():
                writer.close()
        return tuple(Location.parse(str(self.files[b])) for b in sorted(self._writers))


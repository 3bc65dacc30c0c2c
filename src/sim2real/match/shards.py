"""One pass over sorted Parquet parts: the row groups holding wanted episodes, shard by shard.

A shard is a run of row groups of one file. Each shard is read (only the named channels),
filtered to the wanted episodes and resampled where it is read, so only grid-sized blocks
travel back, never raw samples. An episode may continue past a shard's edge; those
(at most the first and last episode of each shard) come back raw and are resampled once
all their pieces are in. This needs parts whose ``episode_id`` ranges do not overlap,
each sorted by ``episode_id`` (what ``write_dataset`` writes); otherwise
:func:`plan_shards` says ``None`` and the caller reads by ID.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sim2real.dataset import Location

if TYPE_CHECKING:
    from sim2real.engine import Executor

__all__ = ["Shard", "plan_shards", "read_sharded"]

# Row groups per shard: ~0.5 M rows, so that a worker's decoded block stays ~100-200 MB.
_GROUPS_PER_SHARD = 4
_RESAMPLE_EPISODES = 2048

Resampler = Callable[[pa.Table, list[str], list[str], float, int], tuple[np.ndarray, np.ndarray]]


class Shard(NamedTuple):
    """Row groups ``groups`` of ``file``, whose ``episode_id`` runs from ``first`` to ``last``.

    ``file`` carries its filesystem, so a task on another machine reads the same object
    (a shared folder, ``s3://``...).
    """

    file: Location
    groups: tuple[int, ...]
    first: str
    last: str


class _Job(NamedTuple):
    wanted: pa.Array
    channels: tuple[str, ...]
    dt: float
    n_steps: int
    resample: Resampler


class _Piece(NamedTuple):
    ids: list[str]
    values: np.ndarray
    durations: np.ndarray
    edge: pa.Table


def plan_shards(files: Sequence[Location], episode_ids: Sequence[str]) -> list[Shard] | None:
    """The shards holding ``episode_ids``, or ``None`` when the parts do not allow it."""
    if not files or any(f.suffix != ".parquet" for f in files):
        return None
    wanted = np.sort(np.asarray(list(episode_ids), dtype=str))
    ranges: list[tuple[str, str]] = []
    shards: list[Shard] = []
    for file in files:
        meta = pq.ParquetFile(file.path, filesystem=file.filesystem).metadata
        names = [meta.schema.column(i).name for i in range(meta.num_columns)]
        if "episode_id" not in names:
            return None
        col = names.index("episode_id")
        bounds = []
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(col).statistics
            if stats is None or not stats.has_min_max:
                return None
            bounds.append((str(stats.min), str(stats.max)))
        if any(a[1] > b[0] for a, b in itertools.pairwise(bounds)):
            return None  # row groups not in episode order
        if bounds:
            ranges.append((bounds[0][0], bounds[-1][1]))
        shards.extend(_file_shards(file, bounds, wanted))
    ranges.sort()
    if any(a[1] > b[0] for a, b in itertools.pairwise(ranges)):
        return None  # parts overlap: an episode could be anywhere
    return shards


def _file_shards(file: Location, bounds: list[tuple[str, str]],
                 wanted: np.ndarray) -> list[Shard]:
    """Runs of at most ``_GROUPS_PER_SHARD`` row groups that hold a wanted episode."""
    hit = [int(np.searchsorted(wanted, lo, "left")) < int(np.searchsorted(wanted, hi, "right"))
           for lo, hi in bounds]
    shards: list[Shard] = []
    run: list[int] = []
    for g, keep in enumerate(hit):
        if keep:
            run.append(g)
        if run and (not keep or len(run) == _GROUPS_PER_SHARD or g == len(hit) - 1):
            shards.append(Shard(file, tuple(run), bounds[run[0]][0], bounds[run[-1]][1]))
            run = []
    return shards


def read_sharded(
    shards: Sequence[Shard],
    episode_ids: Sequence[str],
    channels: Sequence[str],
    dt: float,
    n_steps: int,
    resample: Resampler,
    executor: Executor | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(values, durations)`` of :class:`~sim2real.match.grid.SignalGrid` for ``episode_ids``."""
    job = _Job(pa.array(list(episode_ids), pa.string()), tuple(channels), dt, n_steps, resample)
    if executor is None or not executor.remote or len(shards) <= 1:
        pieces = [_read_shard(job, s) for s in shards]
    else:
        pieces = executor.map_shared(_read_shard, job, list(shards))
    values = np.full((len(episode_ids), n_steps, len(channels)), np.nan, dtype=np.float32)
    durations = np.zeros(len(episode_ids))
    lookup = {e: i for i, e in enumerate(episode_ids)}
    for piece in pieces:
        rows = np.array([lookup[e] for e in piece.ids], dtype=np.int64)
        values[rows], durations[rows] = piece.values, piece.durations
    edges = pa.concat_tables([p.edge for p in pieces]) if pieces else None
    if edges is not None and edges.num_rows:
        ids = pc.unique(edges["episode_id"]).to_pylist()
        block, dur = _resample_all(job, edges, ids)
        rows = np.array([lookup[e] for e in ids], dtype=np.int64)
        values[rows], durations[rows] = block, dur
    return values, durations


def _read_shard(job: _Job, shard: Shard) -> _Piece:
    """Read one shard, keep the wanted episodes, resample those wholly inside it."""
    source = pq.ParquetFile(shard.file.path, filesystem=shard.file.filesystem)
    present = set(source.schema_arrow.names)
    columns = ["episode_id", "t", *(c for c in job.channels if c in present)]
    table = source.read_row_groups(list(shard.groups), columns=columns)
    table = table.filter(pc.is_in(table["episode_id"], value_set=job.wanted))
    for name in job.channels:
        if name not in present:
            table = table.append_column(name, pa.nulls(table.num_rows, pa.float32()))
    on_edge = pc.is_in(table["episode_id"], value_set=pa.array([shard.first, shard.last]))
    inner = table.filter(pc.invert(on_edge))
    ids = pc.unique(inner["episode_id"]).to_pylist()
    values, durations = _resample_all(job, inner, ids)
    return _Piece(ids, values, durations, table.filter(on_edge))


def _resample_all(job: _Job, table: pa.Table, ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Resample ``ids`` of ``table`` in chunks, so the interpolation's temporaries stay small."""
    values = np.empty((len(ids), job.n_steps, len(job.channels)), dtype=np.float32)
    durations = np.zeros(len(ids))
    codes = pc.index_in(table["episode_id"], value_set=pa.array(ids, pa.string()))
    codes_np = codes.to_numpy(zero_copy_only=False)
    for start in range(0, len(ids), _RESAMPLE_EPISODES):
        stop = min(start + _RESAMPLE_EPISODES, len(ids))
        part = table.filter(pa.array((codes_np >= start) & (codes_np < stop)))
        block, dur = job.resample(part, ids[start:stop], list(job.channels), job.dt,
                                  job.n_steps)
        values[start:stop], durations[start:stop] = block, dur
    return values, durations

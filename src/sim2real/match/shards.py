"""One pass over sorted Parquet parts: the row groups holding wanted episodes, shard by shard.

A shard is a run of row groups of one file (a whole small file, where its row groups
overlap: a bucket of :func:`~sim2real.dataset.regroup.regroup`). Each shard is read (only
the named channels), filtered to the wanted episodes and resampled where it is read, so
only grid-sized blocks travel back, never raw samples. An episode may continue past a
shard's edge; those (at most the first and last episode of each shard) come back raw and
are resampled once all their pieces are in. This needs parts clustered by episode
(:func:`~sim2real.dataset.regroup.clustering`: what ``write_dataset`` writes); otherwise
:func:`plan_shards` says ``None`` and the caller regroups them or reads by ID.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sim2real.dataset import EpisodeIndex, Location
from sim2real.dataset.layout import LONG_COLUMNS
from sim2real.dataset.regroup import clustering
from sim2real.errors import DatasetError
from sim2real.match.resample import Resampler

if TYPE_CHECKING:
    from sim2real.engine import Executor

__all__ = ["Shard", "plan_shards", "read_pieces", "read_sharded"]

# Row groups per shard: ~0.5 M rows, so that a worker's decoded block stays ~100-200 MB.
_GROUPS_PER_SHARD = 4


class Shard(NamedTuple):
    """Row groups ``groups`` of ``file``, whose ``episode_id`` runs from ``first`` to ``last``;
    ``long``: the file is in the long layout (``episode_id, t, channel, value``).

    ``file`` carries its filesystem, so a task on another machine reads the same object
    (a shared folder, ``s3://``...).
    """

    file: Location
    groups: tuple[int, ...]
    first: str
    last: str
    long: bool


class _Job(NamedTuple):
    wanted: EpisodeIndex
    channels: tuple[str, ...]
    dt: float
    n_steps: int
    periods: dict[str, float]


class _Piece(NamedTuple):
    rows: np.ndarray
    values: np.ndarray
    durations: np.ndarray
    edge: pa.Table


def plan_shards(files: Sequence[Location], episode_ids: Sequence[str]) -> list[Shard] | None:
    """The shards holding ``episode_ids``, or ``None`` when the parts are not clustered by
    episode (:func:`~sim2real.dataset.regroup.clustering`)."""
    if not files:
        return None
    layout = clustering(files)
    wanted = np.sort(np.asarray(list(episode_ids), dtype=str))
    shards: list[Shard] = []
    for part in layout.parts:
        if part.whole and part.bounds:  # one piece: its row groups overlap each other
            if _holds(wanted, part.first, part.last):
                shards.append(Shard(part.file, tuple(range(len(part.bounds))), part.first,
                                    part.last, part.long))
            continue
        shards.extend(_file_shards(part.file, part.bounds, wanted, part.long))
    return shards if layout.clustered else None


def _holds(wanted: np.ndarray, lo: str, hi: str) -> bool:
    """Whether a sorted ``wanted`` holds an ID from ``lo`` to ``hi``."""
    return int(np.searchsorted(wanted, lo, "left")) < int(np.searchsorted(wanted, hi, "right"))


def _file_shards(file: Location, bounds: list[tuple[str, str]], wanted: np.ndarray,
                 long: bool) -> list[Shard]:
    """Runs of at most ``_GROUPS_PER_SHARD`` row groups that hold a wanted episode."""
    hit = [_holds(wanted, lo, hi) for lo, hi in bounds]
    shards: list[Shard] = []
    run: list[int] = []
    for g, keep in enumerate(hit):
        if keep:
            run.append(g)
        if run and (not keep or len(run) == _GROUPS_PER_SHARD or g == len(hit) - 1):
            shards.append(Shard(file, tuple(run), bounds[run[0]][0], bounds[run[-1]][1], long))
            run = []
    return shards


def read_sharded(
    shards: Sequence[Shard],
    wanted: EpisodeIndex,
    channels: Sequence[str],
    dt: float,
    out: np.ndarray,
    durations: np.ndarray,
    executor: Executor | None = None,
    periods: Mapping[str, float] | None = None,
) -> np.ndarray:
    """Resample the ``wanted`` episodes held by ``shards`` into ``out`` and ``durations``.

    On this machine each shard is interpolated straight into ``out`` (the kernel uses every
    core); a remote ``executor`` reads and resamples shards where its tasks run and sends
    back grid blocks.

    Returns:
        The rows of ``out`` written.
    """
    job = _Job(wanted, tuple(channels), dt, out.shape[1], dict(periods or {}))
    resampler = Resampler(channels, dt, job.periods)
    written: list[np.ndarray] = []
    edges: list[pa.Table] = []
    if executor is None or not executor.remote or len(shards) <= 1:
        for shard in shards:
            table, rows, edge = _read_shard_table(job, shard)
            written.append(resampler.into(table, rows, out, durations))
            edges.append(edge)
    else:
        for piece in executor.map_shared(_read_shard, job, list(shards)):
            out[piece.rows], durations[piece.rows] = piece.values, piece.durations
            written.append(piece.rows)
            edges.append(piece.edge)
    if edges:
        # Parts may differ in which channels they hold: absent ones come back null.
        edge = pa.concat_tables(edges, promote_options="permissive")
        written.append(resampler.into(edge, wanted.rows(edge["episode_id"]), out, durations))
    return np.concatenate(written) if written else np.zeros(0, np.int64)


def read_pieces(shards: Sequence[Shard], wanted: EpisodeIndex,
                channels: Sequence[str]) -> list[tuple[pa.Table, np.ndarray]]:
    """Each shard's samples of ``channels`` as its file holds them, with each row's
    episode's index in ``wanted`` (-1: not wanted)."""
    job = _Job(wanted, tuple(channels), 0.0, 0, {})
    return [_read_rows(job, shard) for shard in shards]


def _read_shard(job: _Job, shard: Shard) -> _Piece:
    """Read one shard and resample the wanted episodes wholly inside it (a remote task)."""
    table, rows, edge = _read_shard_table(job, shard)
    resampler = Resampler(job.channels, job.dt, job.periods)
    found, values, durations = resampler.block(table, rows, job.n_steps)
    return _Piece(found, values, durations, edge)


def _read_shard_table(job: _Job, shard: Shard) -> tuple[pa.Table, np.ndarray, pa.Table]:
    """One shard's samples with each row's destination (-1: an episode not wanted, or one of
    the two at the shard's edges, which may continue in the neighbouring shards), and the
    edge episodes' samples, raw."""
    table, rows = _read_rows(job, shard)
    edge_rows = job.wanted.rows(pa.array([shard.first, shard.last]))
    on_edge = np.isin(rows, edge_rows[edge_rows >= 0])
    return table, np.where(on_edge, -1, rows), table.filter(pa.array(on_edge))


def _read_rows(job: _Job, shard: Shard) -> tuple[pa.Table, np.ndarray]:
    """One shard's ``episode_id``, ``t`` and channel columns (every ``channel, value`` row, in
    the long layout), and each row's episode's index in ``job.wanted`` (-1: not wanted).

    ``episode_id`` and ``channel`` are read dictionary-encoded: a row group holds a few
    hundred episodes, so looking them up per dictionary entry is far cheaper than decoding
    a string per row.
    """
    keys = ["episode_id", "channel"] if shard.long else ["episode_id"]
    try:
        source = pq.ParquetFile(shard.file.path, filesystem=shard.file.filesystem,
                                read_dictionary=keys, page_checksum_verification=True)
        if shard.long:
            columns = list(LONG_COLUMNS)
        else:
            present = set(source.schema_arrow.names)
            columns = ["episode_id", "t", *(c for c in job.channels if c in present)]
        table = source.read_row_groups(list(shard.groups), columns=columns)
    except (pa.ArrowException, OSError) as err:
        # Loading decoded only episode_id and t; a channel's corrupt page shows here.
        msg = f"row groups {shard.groups[0]}-{shard.groups[-1]} cannot be read: {err}"
        raise DatasetError(msg, file=str(shard.file)) from err
    if table["t"].type != pa.float64():
        # t written as text that reads as numbers throughout (checked when loaded)
        table = table.set_column(1, "t", table["t"].cast(pa.float64()))
    return table, job.wanted.rows(table["episode_id"])

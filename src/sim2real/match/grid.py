"""Episodes resampled onto one shared time grid, so sources of any sample rate compare."""

from __future__ import annotations

import mmap
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numba
import numpy as np

from sim2real.dataset import Dataset, EpisodeIndex
from sim2real.match.resample import Resampler
from sim2real.match.shards import plan_shards, read_sharded

if TYPE_CHECKING:
    from sim2real.engine import Executor

__all__ = ["SignalGrid", "build_grid", "mapped_empty", "release"]

_CHUNK_EPISODES = 2048
# Rows per block of a scan over a whole grid (a few tens of megabytes on a large bank).
_SCAN_ROWS = 1024
# Bytes per read-ahead request: Linux's default read-ahead, what a request may ask for
# everywhere.
_PREFETCH_BYTES = 128 << 10
# Grids above this size get a file of their own when a scratch folder is given.
_MAPPED_BYTES = 64 << 20


@dataclass(frozen=True)
class SignalGrid:
    """Episodes sampled every ``dt`` seconds from their start.

    Attributes:
        episode_ids: row order of ``values``.
        channels: column order of the last axis of ``values``.
        dt: grid step in seconds.
        values: ``(n_episodes, n_steps, n_channels)`` float32; NaN past an episode's end and
            where a channel was not recorded.
        durations: ``(n_episodes,)`` time of each episode's last sample.
    """

    episode_ids: tuple[str, ...]
    channels: tuple[str, ...]
    dt: float
    values: np.ndarray
    durations: np.ndarray

    def rows(self, episode_ids: Sequence[str]) -> np.ndarray:
        """Row numbers of the given episodes."""
        lookup = {e: i for i, e in enumerate(self.episode_ids)}
        return np.array([lookup[e] for e in episode_ids], dtype=np.int64)

    def recorded(self) -> np.ndarray:
        """``(n_channels,)`` whether each channel holds a value anywhere in the grid."""
        seen = np.zeros(self.values.shape[2], dtype=bool)
        for rows in self.scan():
            seen |= _any_finite(self.values[rows])
        return seen

    def scan(self, rows_per_block: int = _SCAN_ROWS) -> Iterator[slice]:
        """Consecutive blocks of rows covering the grid, read ahead (:meth:`read_ahead`):
        for passes over every row."""
        n = self.values.shape[0]
        spans = [(start, min(start + rows_per_block, n)) for start in range(0, n, rows_per_block)]
        for first, stop in self.read_ahead(spans):
            yield slice(first, stop)

    def read_ahead(self, spans: Sequence[tuple[int, int]]) -> Iterator[tuple[int, int]]:
        """The row spans ``(first, stop)`` in order, each next one read from disk
        (:meth:`prefetch`) while the one before is processed."""
        for k, (first, stop) in enumerate(spans):
            if k == 0:
                self.prefetch(first, stop)
            if k + 1 < len(spans):
                self.prefetch(*spans[k + 1])
            yield first, stop

    def prefetch(self, first: int, stop: int) -> None:
        """Have rows ``first`` to ``stop`` (exclusive) of a grid mapped from disk read in the
        background, in one request (nothing for a grid in memory).

        A mapped grid is read at random by default (:func:`mapped_empty`): a scan over rows
        in order says here which rows come next.
        """
        found = _mapping(self.values)
        stop = min(stop, self.values.shape[0])
        if found is None or first >= stop or not hasattr(mmap, "MADV_WILLNEED"):
            return
        mapping, offset = found
        begin = offset + first * self.values.strides[0]
        end = offset + stop * self.values.strides[0]
        # In pieces: the kernel reads at most the device's read-ahead size per request.
        for start in range(begin - begin % mmap.PAGESIZE, end, _PREFETCH_BYTES):
            mapping.madvise(mmap.MADV_WILLNEED, start, min(_PREFETCH_BYTES, end - start))

    def narrow(self, channels: Sequence[str]) -> SignalGrid:
        """The grid restricted to ``channels`` (a subsequence of its own, in order), without
        a second copy of the values: each step's kept channels move to its front in place
        and the result views them. This grid's values are overwritten: use only the result.
        """
        if tuple(channels) == self.channels:
            return self
        keep = np.array([self.channels.index(c) for c in channels], dtype=np.int64)
        if keep.size and np.any(np.diff(keep) <= 0):
            raise ValueError("narrow keeps channels in their own order")
        for rows in self.scan():
            _move_to_front(self.values[rows], keep)
        return SignalGrid(self.episode_ids, tuple(channels), self.dt,
                          self.values[:, :, : keep.size], self.durations)

    def at(self, rows: np.ndarray, times: np.ndarray) -> np.ndarray:
        """Values of ``rows`` at ``times`` by linear interpolation on the grid.

        Args:
            rows: ``(n,)`` row numbers.
            times: ``(n, n_points)`` seconds from each episode's start.

        Returns:
            ``(n, n_points, n_channels)`` values.
        """
        rows = np.asarray(rows, dtype=np.int64)
        times = np.asarray(times, dtype=np.float64)
        times = times.reshape(rows.size, times.shape[-1])
        return _at(self.values, rows, times, float(self.dt))


def build_grid(
    dataset: Dataset,
    episode_ids: Sequence[str],
    channels: Sequence[str],
    dt: float,
    t_max: float,
    executor: Executor | None = None,
    periods: Mapping[str, float] | None = None,
    scratch: Path | None = None,
) -> SignalGrid:
    """Resample the given episodes onto a grid of step ``dt`` from 0 to ``t_max`` seconds.

    Reads only the named channels of the named episodes and interpolates each within its
    own samples straight into the grid (:mod:`sim2real.match.resample`; ``periods``, each
    channel's sample period, bound the gaps it bridges), so memory stays at the size of
    the grid plus one read's worth of samples. Episodes of sorted Parquet parts (what
    ``write_dataset`` writes) are read in one pass over the row groups that hold them, shard
    by shard (as tasks of a remote ``executor``); those of other parts are read by ID, in
    chunks. Given a ``scratch`` folder, a grid of more than 64 MiB lives in a file there,
    memory-mapped (:func:`mapped_empty`).
    """
    n_steps = int(np.ceil(t_max / dt)) + 1
    values = mapped_empty((len(episode_ids), n_steps, len(channels)), scratch)
    durations = np.zeros(len(episode_ids))
    wanted = EpisodeIndex(episode_ids)
    written = np.zeros(len(episode_ids), dtype=bool)
    shards = plan_shards(dataset.signal_files, episode_ids)
    if shards is not None:
        written[read_sharded(shards, wanted, channels, dt, values, durations, executor,
                             periods)] = True
    else:
        resampler = Resampler(channels, dt, periods)
        for start in range(0, len(episode_ids), _CHUNK_EPISODES):
            chunk = list(episode_ids[start : start + _CHUNK_EPISODES])
            table = dataset.read_raw(chunk, list(channels))
            rows = wanted.rows(table["episode_id"])
            written[resampler.into(table, rows, values, durations)] = True
    values[~written] = np.nan  # episodes without a single sample
    release(values)
    return SignalGrid(tuple(episode_ids), tuple(channels), dt, values, durations)


def mapped_empty(shape: tuple[int, ...], scratch: Path | None) -> np.ndarray:
    """An uninitialised float32 array, in a file in ``scratch`` where it is large.

    A file-backed array is page cache, not process memory: the kernel writes it out and
    drops what is not in use when memory runs short, so a bank larger than the machine's
    memory share still fits, and only the rows a step touches are resident. The file is
    removed at once (the mapping keeps it alive until the array is freed).

    The mapping is advised as read at random: a page fault then reads that page, not the
    device's read-ahead around it (8 MB on some virtual disks, where the windows of a few
    thousand scattered rows read the whole bank); scans in row order ask for their rows
    ahead (:meth:`SignalGrid.prefetch`).
    """
    size = int(np.prod(shape)) * 4
    if scratch is None or size <= _MAPPED_BYTES:
        return np.empty(shape, dtype=np.float32)
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=scratch, prefix="grid-", suffix=".f32") as file:
        file.truncate(size)
        mapped = np.memmap(file.name, dtype=np.float32, mode="r+", shape=shape)
    found = _mapping(mapped)
    if found is not None and hasattr(mmap, "MADV_RANDOM"):
        found[0].madvise(mmap.MADV_RANDOM)
    return mapped.view(np.ndarray)  # a plain array (pickles as one) over the mapping


def release(values: np.ndarray) -> None:
    """Let the kernel take back the resident pages of a file-backed array (written pages
    stay in the page cache, and come back on the next touch); nothing for others."""
    found = _mapping(values)
    if found is not None and hasattr(mmap, "MADV_DONTNEED"):
        found[0].madvise(mmap.MADV_DONTNEED)


def _mapping(values: np.ndarray) -> tuple[mmap.mmap, int] | None:
    """The file mapping under ``values`` and the byte offset of ``values[0]`` in it; ``None``
    for an array in memory."""
    base = values
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if not isinstance(base, mmap.mmap):
        return None
    start = np.frombuffer(base, dtype=np.uint8, count=1).ctypes.data
    return base, values.ctypes.data - start


@numba.njit(nogil=True, cache=True)
def _at(values: np.ndarray, rows: np.ndarray, times: np.ndarray,
        dt: float) -> np.ndarray:  # pragma: no cover - compiled
    # Serial on purpose: it runs inside forked workers, where a parallel region would be
    # unsafe. The float32 arithmetic is that of the NumPy expression
    # ``v[left] * (1 - w) + v[right] * w`` with ``w`` rounded to float32.
    n_points, n_ch = times.shape[1], values.shape[2]
    last = values.shape[1] - 1
    out = np.empty((rows.size, n_points, n_ch), dtype=np.float32)
    one = np.float32(1.0)
    for i in range(rows.size):
        r = rows[i]
        for j in range(n_points):
            pos = min(max(times[i, j] / dt, 0.0), float(last))
            left = int(np.floor(pos))
            right = min(left + 1, last)
            w = np.float32(pos - left)
            for c in range(n_ch):
                out[i, j, c] = values[r, left, c] * (one - w) + values[r, right, c] * w
    return out


@numba.njit(parallel=True, nogil=True, cache=True)
def _any_finite(values: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    n_ch = values.shape[2]
    seen = np.zeros((values.shape[0], n_ch), dtype=np.bool_)
    for i in numba.prange(values.shape[0]):
        for s in range(values.shape[1]):
            for c in range(n_ch):
                if np.isfinite(values[i, s, c]):
                    seen[i, c] = True
    return seen.sum(axis=0) > 0


@numba.njit(parallel=True, nogil=True, cache=True)
def _move_to_front(values: np.ndarray, keep: np.ndarray) -> None:  # pragma: no cover
    # keep is increasing, so keep[k] >= k: writing slot k never clobbers a later source.
    for i in numba.prange(values.shape[0]):
        for s in range(values.shape[1]):
            for k in range(keep.size):
                values[i, s, k] = values[i, s, keep[k]]

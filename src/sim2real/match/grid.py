"""Episodes resampled onto one shared time grid, so sources of any sample rate compare."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sim2real.dataset import Dataset
from sim2real.match.shards import plan_shards, read_sharded

if TYPE_CHECKING:
    from sim2real.engine import Executor

__all__ = ["SignalGrid", "build_grid", "grid_step"]

_CHUNK_EPISODES = 2048


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

    def at(self, rows: np.ndarray, times: np.ndarray) -> np.ndarray:
        """Values of ``rows`` at ``times`` by linear interpolation on the grid.

        Args:
            rows: ``(n,)`` row numbers.
            times: ``(n, n_points)`` seconds from each episode's start.

        Returns:
            ``(n, n_points, n_channels)`` values.
        """
        pos = np.clip(times / self.dt, 0, self.values.shape[1] - 1)
        left = np.floor(pos).astype(np.int64)
        right = np.minimum(left + 1, self.values.shape[1] - 1)
        weight = (pos - left)[..., None].astype(np.float32)
        r = rows[:, None]
        return self.values[r, left] * (1 - weight) + self.values[r, right] * weight


def grid_step(dataset: Dataset, episode_ids: Sequence[str]) -> float:
    """The median sample interval of the given episodes (a sample of at most 200).

    Call it per source and keep the largest: resampling finer than the coarsest source
    would invent detail it never recorded.
    """
    sample = list(episode_ids[:: max(1, len(episode_ids) // 200)])
    table = dataset.read_signals(sample, columns=[])
    codes = pc.dictionary_encode(table["episode_id"]).combine_chunks().indices.to_numpy()
    t = table["t"].to_numpy()
    order = np.lexsort((t, codes))
    same = codes[order][1:] == codes[order][:-1]
    gaps = np.diff(t[order])[same]
    # Rounded so that 1/50 s reads 0.02, not the float noise of the recorded stamps.
    return float(f"{np.median(gaps):.4g}") if gaps.size else 0.1


def build_grid(
    dataset: Dataset,
    episode_ids: Sequence[str],
    channels: Sequence[str],
    dt: float,
    t_max: float,
    executor: Executor | None = None,
) -> SignalGrid:
    """Resample the given episodes onto a grid of step ``dt`` from 0 to ``t_max`` seconds.

    Reads only the named channels of the named episodes, in chunks, so memory stays at the
    size of the grid. Many episodes of sorted Parquet parts (what ``write_dataset`` writes)
    are read in one pass over the row groups that hold them, shard by shard on
    ``executor``; a few episodes (or unsorted parts) are read by ID.
    """
    n_steps = int(np.ceil(t_max / dt)) + 1
    shards = plan_shards(dataset.signal_files, episode_ids) \
        if len(episode_ids) > _CHUNK_EPISODES else None
    if shards is not None:
        values, durations = read_sharded(shards, episode_ids, channels, dt, n_steps,
                                         _resample, executor)
        return SignalGrid(tuple(episode_ids), tuple(channels), dt, values, durations)
    values = np.full((len(episode_ids), n_steps, len(channels)), np.nan, dtype=np.float32)
    durations = np.zeros(len(episode_ids))
    for start in range(0, len(episode_ids), _CHUNK_EPISODES):
        chunk = list(episode_ids[start : start + _CHUNK_EPISODES])
        table = dataset.read_signals(chunk, columns=list(channels))
        block, dur = _resample(table, chunk, list(channels), dt, n_steps)
        values[start : start + len(chunk)] = block
        durations[start : start + len(chunk)] = dur
    return SignalGrid(tuple(episode_ids), tuple(channels), dt, values, durations)


def _resample(
    table: pa.Table, episode_ids: list[str], channels: list[str], dt: float, n_steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """Linear interpolation of every episode at once, through one sorted key array."""
    n_ep = len(episode_ids)
    codes = pc.index_in(table["episode_id"], value_set=pa.array(episode_ids)).to_numpy(
        zero_copy_only=False
    )
    t = table["t"].to_numpy().astype(np.float64)
    order = np.lexsort((t, codes))
    codes, t = codes[order], t[order]
    samples = np.column_stack(
        [table[c].to_numpy(zero_copy_only=False).astype(np.float64)[order] for c in channels]
    ) if channels else np.zeros((len(t), 0))
    first = np.searchsorted(codes, np.arange(n_ep), side="left")
    last = np.searchsorted(codes, np.arange(n_ep), side="right") - 1
    present = last >= first
    durations = np.where(present, t[np.maximum(last, 0)], 0.0)
    # Episode k's samples live at keys k * span + t, so one searchsorted serves all episodes.
    span = float(t.max() if t.size else 0.0) + 2 * dt + 1.0
    keys = codes * span + t
    grid_t = np.arange(n_steps) * dt
    query = (np.arange(n_ep)[:, None] * span + grid_t[None, :]).ravel()
    ep_of_query = np.repeat(np.arange(n_ep), n_steps)
    lo = np.clip(np.searchsorted(keys, query, side="right") - 1, first[ep_of_query],
                 np.maximum(last[ep_of_query], first[ep_of_query]))
    hi = np.minimum(lo + 1, np.maximum(last[ep_of_query], first[ep_of_query]))
    lo = np.minimum(lo, len(t) - 1)
    hi = np.minimum(hi, len(t) - 1)
    gap = keys[hi] - keys[lo]
    weight = np.where(gap > 0, np.clip((query - keys[lo]) / np.where(gap > 0, gap, 1), 0, 1), 0)
    out = samples[lo] * (1 - weight[:, None]) + samples[hi] * weight[:, None]
    beyond = (np.tile(grid_t, n_ep) > durations[ep_of_query] + 1e-9) | ~present[ep_of_query]
    out[beyond] = np.nan
    return out.reshape(n_ep, n_steps, len(channels)).astype(np.float32), durations

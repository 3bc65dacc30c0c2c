"""The analysis' time base: each channel's own sample period, the grid step, the memory bound.

Channels of one episode may be recorded at different rates (odometry at 20 Hz, a pose
estimate at 10 Hz, diagnostics at 1 Hz), each with its own timestamps. Every period here is
measured between samples of one channel, never between rows of different channels, so
topics stamped microseconds apart cannot shrink the grid step to microseconds.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from sim2real.dataset import Dataset, EpisodeIndex
from sim2real.dataset.layout import channel_codes
from sim2real.errors import DatasetError
from sim2real.match.shards import plan_shards, read_pieces

__all__ = ["TimeBase", "channel_periods", "check_grid_fits", "time_base"]

# Episodes sampled per source to measure the periods: the median settles long before.
_SAMPLE_EPISODES = 200
# One grid may take at most this share of the machine's memory: the analysis holds the
# sim grid and the real one, and their temporaries, at the same time.
_MEMORY_SHARE = 0.5
_DEFAULT_STEP = 0.1


@dataclass(frozen=True)
class TimeBase:
    """The grid step and each channel's sample period, per source.

    Attributes:
        dt: grid step, seconds.
        periods: per source (``real``, ``sim``), each channel's median interval between
            its own samples, seconds; a channel never recorded by a source is absent.
        step_from: what set ``dt``, for messages (``channel 'odom_x' (real) at 20 Hz``).
    """

    dt: float
    periods: Mapping[str, Mapping[str, float]]
    step_from: str


def channel_periods(dataset: Dataset, episode_ids: Sequence[str],
                    channels: Sequence[str]) -> dict[str, float]:
    """Each channel's median interval between its own samples, over a sample of at most
    200 of the given episodes; channels with no two samples in one episode are left out.

    The sample is 200 episodes consecutive in ID order (from the middle): they lie in one
    or two row groups of sorted parts, or one bucket of regrouped signals, where a sample
    spread over the fleet would read nearly every row group a second time.

    Rounded to four significant digits, so that 1/50 s reads 0.02, not the float noise of
    the recorded stamps.
    """
    ordered = sorted(episode_ids)
    start = max(0, (len(ordered) - _SAMPLE_EPISODES) // 2)
    sample = ordered[start : start + _SAMPLE_EPISODES]
    wanted = EpisodeIndex(sample)
    shards = plan_shards(dataset.signal_files, sample)
    if shards is not None:
        pieces = read_pieces(shards, wanted, channels)
    else:
        table = dataset.read_raw(sample, channels)
        pieces = [(table, wanted.rows(table["episode_id"]))]
    found = [_gaps(table, rows, channels) for table, rows in pieces]
    chan = np.concatenate([c for c, _ in found]) if found else np.zeros(0, np.int64)
    gaps = np.concatenate([g for _, g in found]) if found else np.zeros(0)
    periods = {}
    for k, name in enumerate(channels):
        mine = gaps[chan == k]
        if mine.size:
            periods[name] = float(f"{np.median(mine):.4g}")
    return periods


def _gaps(table: pa.Table, rows: np.ndarray,
          channels: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(channel, gap)``: every interval between consecutive samples of one channel in one
    episode, with the channel's position in ``channels``."""
    t = table["t"].to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    if "channel" in table.column_names:  # long: one value column, a channel per row
        chan = channel_codes(table["channel"], channels)
        value = table["value"].to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        valid = (rows >= 0) & (chan >= 0) & np.isfinite(value)
        series = [(k, valid & (chan == k)) for k in range(len(channels))]
    else:
        series = [(k, (rows >= 0) & np.isfinite(
                      table[name].to_numpy(zero_copy_only=False).astype(np.float64)))
                  for k, name in enumerate(channels) if name in table.column_names]
    found = [(k, _episode_gaps(rows[keep], t[keep])) for k, keep in series]
    if not found:
        return np.zeros(0, np.int64), np.zeros(0)
    return (np.concatenate([np.full(g.size, k) for k, g in found]),
            np.concatenate([g for _, g in found]))


def _episode_gaps(episode: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Intervals between consecutive samples of one episode; rows already in (episode, t)
    order, as sorted parts and regrouped buckets hold them, are not sorted again."""
    step, dt = np.diff(episode), np.diff(t)
    if not np.all((step > 0) | ((step == 0) & (dt >= 0))):
        order = np.lexsort((t, episode))
        episode, t = episode[order], t[order]
        step, dt = np.diff(episode), np.diff(t)
    return dt[step == 0]


def time_base(dataset: Dataset, sources: Mapping[str, Sequence[str]], channels: Sequence[str],
              rate_hz: float | None = None) -> TimeBase:
    """Measure each source's channel periods and choose the grid step.

    The step is the period of a source's fastest channel, so that the grid keeps every
    channel's detail; of the sources, the coarsest wins: resampling finer than a source
    recorded would invent detail it never had. ``rate_hz`` sets the step instead.

    Args:
        dataset: the dataset.
        sources: the episodes to sample, by source (``{"sim": [...], "real": [...]}``).
        channels: the channels of the analysis.
        rate_hz: grid rate chosen by the user, samples per second.
    """
    periods = {s: channel_periods(dataset, ids, channels) for s, ids in sources.items()}
    if rate_hz is not None:
        return TimeBase(1.0 / rate_hz, periods, f"--rate {rate_hz:g}")
    fastest = [(min(p.values()), s, min(p, key=p.__getitem__)) for s, p in periods.items() if p]
    if not fastest:
        return TimeBase(_DEFAULT_STEP, periods, "the default step (no channel has two "
                        "samples in one episode)")
    dt, source, channel = max(fastest)
    return TimeBase(dt, periods, f"channel {channel!r} ({source}) at {1.0 / dt:g} Hz")


def check_grid_fits(base: TimeBase, durations: Mapping[str, float], episode_ids: Sequence[str],
                    n_channels: int, where: str, scratch: Path | None = None) -> None:
    """Raise before allocating a grid that would not fit in memory (or, mapped from a file
    in ``scratch``, on its disk).

    Raises:
        DatasetError: the grid of ``episode_ids`` x their longest duration x
            ``n_channels`` would take more than half the machine's memory (half the free
            space of ``scratch``'s disk); names what set the step and the longest episode.
    """
    if not episode_ids:
        return
    longest = max(episode_ids, key=lambda e: durations.get(e, 0.0))
    t_max = durations.get(longest, 0.0)
    n_steps = math.ceil(t_max / base.dt) + 1
    need = 4.0 * len(episode_ids) * n_steps * n_channels
    if scratch is None:
        budget, of = _MEMORY_SHARE * memory_bytes(), "half this machine's memory"
    else:
        budget = _MEMORY_SHARE * shutil.disk_usage(scratch).free
        of = f"half the free disk space of the scratch folder {scratch.parent}"
    if need <= budget:
        return
    gib = 1024.0**3
    msg = (f"the time grid of {len(episode_ids):,} episodes x {n_steps:,} steps x "
           f"{n_channels} channels would take {need / gib:,.1f} GiB, more than "
           f"{budget / gib:.1f} GiB ({of}): its step of {base.dt:g} s "
           f"comes from {base.step_from}, and the longest episode, {longest!r}, lasts "
           f"{t_max:g} s. Pass --rate with fewer samples per second, or leave the fast "
           "channel or the long episode out")
    raise DatasetError(msg, file=where)


def memory_bytes() -> int:
    """Physical memory, or the container's limit when lower (cgroup v2 / v1)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit_file in ("/sys/fs/cgroup/memory.max",
                       "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return int(total)

"""Raw samples onto the shared time grid: linear interpolation compiled with numba.

Each channel is interpolated within its own samples only: in the wide layout a null is "no
sample of this channel at this t" and is stepped over, in the long layout each channel's
rows are a run of their own. A sample speaks for the grid up to half a gap limit away
where it has no neighbour to interpolate towards, and two samples further apart than the
limit (``_GAP_PERIODS`` of the channel's own period) are never joined by a line: a dropout
stays a dropout, whatever the rate of the other channels.

Each episode is one run of rows sorted by ``t`` (wide) or by channel, then ``t`` (long);
pointers walk the samples while the grid steps advance, so the cost is one read of the
samples and one write of the grid, on every core (``prange`` over episodes). Values are
written straight into the destination grid: no per-chunk temporaries.

The arithmetic is that of :func:`numpy.interp` with the grid's edge rules: before a
channel's first sample its first value, between samples the straight line (in float64),
past the episode's last sample (by more than 1e-9 s) NaN.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numba
import numpy as np
import pyarrow as pa

from sim2real.dataset import EpisodeIndex
from sim2real.dataset.ids import one_run_each

__all__ = ["GAP_PERIODS", "Resampler"]

# A grid step counts as inside an episode up to this long after its last sample, so that
# the float noise of ``k * dt`` never drops the last step.
_END_TOLERANCE = 1e-9
# Samples further apart than this many of their channel's periods are not interpolated
# between: two dropped messages are bridged, a dropout of a second at 20 Hz is not.
GAP_PERIODS = 3.0


class Resampler:
    """Resamples tables of samples onto a grid of step ``dt``, channel by channel.

    One instance serves many tables (the shards of one pass): the samples are gathered into
    one scratch buffer, reused, because fresh memory costs a page fault per page touched,
    as much again as the copy itself.

    Args:
        channels: the channels of the grid's last axis, in order.
        dt: grid step, seconds.
        periods: each channel's sample period in seconds (see
            :func:`sim2real.match.timebase.channel_periods`); a channel without one is
            interpolated across gaps of any length.
    """

    def __init__(self, channels: Sequence[str], dt: float,
                 periods: Mapping[str, float] | None = None) -> None:
        self.channels = list(channels)
        self.dt = dt
        known = periods or {}
        period = np.array([known.get(c, np.inf) for c in self.channels], dtype=np.float64)
        self.gap_limit = np.where(np.isfinite(period) & (period > 0), GAP_PERIODS * period,
                                  np.inf)
        self._index = EpisodeIndex(self.channels)
        self._buffers: dict[np.dtype, np.ndarray] = {}

    def into(self, table: pa.Table, rows: np.ndarray, out: np.ndarray,
             durations: np.ndarray) -> np.ndarray:
        """Resample the episodes of ``table`` into ``out[row]``.

        Args:
            table: ``t`` and the channel columns (absent ones read as NaN), or the long
                layout's ``t``, ``channel`` and ``value``.
            rows: ``(table.num_rows,)`` the row of ``out`` each sample belongs to, -1 to
                skip it (:meth:`~sim2real.dataset.EpisodeIndex.rows`).
            out: ``(n_episodes, n_steps, n_channels)`` float32, written in place.
            durations: ``(n_episodes,)`` each episode's last sample time, written in place.

        Returns:
            The rows of ``out`` written (one per episode found), in no particular order.
        """
        runs = self._runs(table, rows)
        self._fill(table, runs, runs.rows, out, durations)
        return runs.rows

    def block(self, table: pa.Table, rows: np.ndarray,
              n_steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The episodes of ``table`` on the grid, compactly: ``(rows, values, durations)``.

        ``values[i]`` (``(n_steps, n_channels)`` float32) and ``durations[i]`` belong to
        the episode of destination row ``rows[i]``. For a task that sends its result
        elsewhere: only the grid travels, never the samples.
        """
        runs = self._runs(table, rows)
        values = np.empty((runs.rows.size, n_steps, len(self.channels)), dtype=np.float32)
        durations = np.zeros(runs.rows.size)
        self._fill(table, runs, np.arange(runs.rows.size), values, durations)
        return runs.rows, values, durations

    def _runs(self, table: pa.Table, rows: np.ndarray) -> _Runs:
        chan = self._index.rows(table["channel"]) if "channel" in table.column_names else None
        return _Runs.of(rows, table["t"], chan)

    def _fill(self, table: pa.Table, runs: _Runs, dest: np.ndarray, out: np.ndarray,
              durations: np.ndarray) -> None:
        """Interpolate run ``i`` into ``out[dest[i]]``."""
        if not runs.rows.size:
            return
        if runs.chan is not None:
            _interpolate_long(runs.starts, runs.stops, runs.t, runs.chan,
                              self._values(table, runs.order), dest, self.dt, self.gap_limit,
                              out, durations)
        else:
            samples, gappy = self._samples(table, runs.order)
            _interpolate(runs.starts, runs.stops, runs.t, samples, gappy, dest, self.dt,
                         self.gap_limit, out, durations)

    def _values(self, table: pa.Table, order: np.ndarray | None) -> np.ndarray:
        """The long layout's ``value`` column in run order, float64, NaN where null."""
        column = table["value"].to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        return column if order is None else column[order]

    def _samples(self, table: pa.Table,
                 order: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """``(n_channels, n_rows)`` samples in run order (channel-major: each column is one
        contiguous copy), float32 when every channel is float32 (interpolated in float64
        all the same), float64 otherwise; NaN where absent or null. And ``(n_channels,)``
        whether each channel has a NaN anywhere (the others share one pointer)."""
        present = [c for c in self.channels if c in table.column_names]
        dtype = np.dtype(np.float32 if all(table[c].type == pa.float32() for c in present)
                         else np.float64)
        n_rows = table.num_rows if order is None else order.size
        size = len(self.channels) * n_rows
        buffer = self._buffers.get(dtype)
        if buffer is None or buffer.size < size:
            buffer = self._buffers[dtype] = np.empty(size, dtype=dtype)
        samples = buffer[:size].reshape(len(self.channels), n_rows)
        gappy = np.ones(len(self.channels), dtype=bool)
        take = np.zeros(0, np.int64) if order is None else order
        for k, name in enumerate(self.channels):
            if name not in table.column_names:
                samples[k] = np.nan
                continue
            column = table[name].to_numpy(zero_copy_only=False).astype(dtype, copy=False)
            gappy[k] = _gather(column, take, samples[k])
        return samples, gappy


class _Runs:
    """The samples of each wanted episode as one contiguous run, sorted by ``t`` (wide) or
    by channel then ``t`` (long).

    Attributes:
        starts, stops: ``(n_runs,)`` row range of each run (after ``order``).
        rows: ``(n_runs,)`` each run's destination row.
        t: sample times, in run order.
        chan: long layout: each sample's channel (-1: one not wanted), in run order.
        order: the table rows, in run order, or ``None`` when the table holds only wanted
            rows already in runs (sorted Parquet parts, as ``write_dataset`` writes).
    """

    def __init__(self, starts: np.ndarray, stops: np.ndarray, rows: np.ndarray, t: np.ndarray,
                 chan: np.ndarray | None, order: np.ndarray | None) -> None:
        self.starts, self.stops, self.rows, self.t = starts, stops, rows, t
        self.chan, self.order = chan, order

    @classmethod
    def of(cls, rows: np.ndarray, t_column: pa.ChunkedArray | pa.Array,
           chan: np.ndarray | None = None) -> _Runs:
        codes = np.asarray(rows, dtype=np.int64)
        t = t_column.to_numpy().astype(np.float64, copy=False)
        order = None
        if codes.size and codes.min() < 0:  # other episodes' rows: drop them first
            order = np.flatnonzero(codes >= 0)
            codes, t = codes[order], t[order]
            chan = None if chan is None else chan[order]
        if not _grouped(codes, t, chan):
            # By series (episode, or episode and channel), keeping file order within each:
            # where that order is already by t (as validated for each file) it is the
            # order of a sort by series then t, for the price of one key.
            series = codes if chan is None else codes * (int(chan.max()) + 2) + chan + 1
            runs = np.argsort(series, kind="stable")
            if not _increasing(series[runs], t[runs]):
                runs = np.lexsort((t, codes) if chan is None else (t, chan, codes))
            codes, t = codes[runs], t[runs]
            chan = None if chan is None else chan[runs]
            order = runs if order is None else order[runs]
        if not codes.size:
            empty = np.zeros(0, np.int64)
            return cls(empty, empty, empty, t, chan, order)
        change = np.flatnonzero(np.diff(codes)) + 1
        starts = np.concatenate([[0], change]).astype(np.int64)
        stops = np.concatenate([change, [codes.size]]).astype(np.int64)
        return cls(starts, stops, codes[starts], t, chan, order)


def _increasing(series: np.ndarray, t: np.ndarray) -> bool:
    """Whether ``t`` increases within each run of equal ``series``."""
    return bool(np.all((series[1:] != series[:-1]) | (np.diff(t) > 0)))


def _grouped(codes: np.ndarray, t: np.ndarray, chan: np.ndarray | None) -> bool:
    """Whether each episode's rows already form one run, with ``t`` increasing (within
    each channel's run, in the long layout)."""
    new_run = codes[1:] != codes[:-1]
    if chan is not None:
        if np.any(~new_run & (np.diff(chan) < 0)):
            return False
        new_run = new_run | (chan[1:] != chan[:-1])
    increasing = np.all(new_run | (np.diff(t) > 0))
    return bool(increasing) and one_run_each(codes)


@numba.njit(inline="always")
def _value(t_lo: float, v_lo: float, t_hi: float, v_hi: float, g: float,
           limit: float) -> float:  # pragma: no cover - compiled
    # The channel's last sample at or before g (t_lo = -inf: none) and its next one
    # (t_hi = inf: none; v_hi NaN then).
    reach = 0.5 * limit
    if t_lo == -np.inf:
        return v_hi if t_hi - g <= reach else np.nan
    if t_hi == np.inf or t_hi - t_lo > limit:
        if g - t_lo <= reach:
            return v_lo
        return v_hi if t_hi - g <= reach else np.nan
    gap = t_hi - t_lo
    w = 0.0
    if gap > 0:
        w = min(max((g - t_lo) / gap, 0.0), 1.0)
    return v_lo * (1.0 - w) + v_hi * w


@numba.njit(parallel=True, nogil=True, cache=True)
def _interpolate(starts: np.ndarray, stops: np.ndarray, t: np.ndarray, samples: np.ndarray,
                 gappy: np.ndarray, rows: np.ndarray, dt: float, limit: np.ndarray,
                 out: np.ndarray, durations: np.ndarray) -> None:  # pragma: no cover - compiled
    # Wide layout. Channels sampled on every row (the usual case) share one pointer, in a
    # loop over all channels that the compiler vectorises; the ``gappy`` ones (a null or NaN
    # somewhere) are then overwritten, each from a walk over its own samples.
    sparse = np.flatnonzero(gappy)
    min_limit = np.inf
    for c in range(limit.size):
        if not gappy[c]:
            min_limit = min(min_limit, limit[c])
    for r in numba.prange(starts.size):
        first, stop, row = starts[r], stops[r], rows[r]
        durations[row] = t[stop - 1]
        _fill_dense(first, stop, t, samples, row, dt, limit, min_limit, out)
        if sparse.size:
            _fill_sparse(first, stop, t, samples, sparse, row, dt, limit, out)


@numba.njit(nogil=True, cache=True)
def _fill_dense(first: int, stop: int, t: np.ndarray, samples: np.ndarray, row: int, dt: float,
                limit: np.ndarray, min_limit: float,
                out: np.ndarray) -> None:  # pragma: no cover - compiled
    n_ch = out.shape[2]
    last = stop - 1
    end = t[last]
    j = first
    for s in range(out.shape[1]):
        g = s * dt
        if g > end + _END_TOLERANCE:
            for c in range(n_ch):
                out[row, s, c] = np.nan
            continue
        while j < last and t[j + 1] <= g:
            j += 1
        hi = min(j + 1, last)
        gap = t[hi] - t[j]
        if g >= t[j] and gap <= min_limit:  # the common case: a line to the next row
            w = 0.0
            if gap > 0:
                w = min((g - t[j]) / gap, 1.0)
            for c in range(n_ch):
                out[row, s, c] = np.float64(samples[c, j]) * (1.0 - w) + \
                    np.float64(samples[c, hi]) * w
            continue
        before = g < t[j]  # before the first sample: nothing to its left
        for c in range(n_ch):
            out[row, s, c] = _value(
                -np.inf if before else t[j], np.nan if before else np.float64(samples[c, j]),
                t[j] if before else (t[hi] if hi > j else np.inf),
                np.float64(samples[c, j if before else hi]) if before or hi > j else np.nan,
                g, limit[c])


@numba.njit(nogil=True, cache=True)
def _fill_sparse(first: int, stop: int, t: np.ndarray, samples: np.ndarray,
                 channels: np.ndarray, row: int, dt: float, limit: np.ndarray,
                 out: np.ndarray) -> None:  # pragma: no cover - compiled
    end = t[stop - 1]
    for c in channels:
        lo = -1
        hi = first
        while hi < stop and np.isnan(samples[c, hi]):
            hi += 1
        for s in range(out.shape[1]):
            g = s * dt
            if g > end + _END_TOLERANCE:
                out[row, s, c] = np.nan
                continue
            while hi < stop and t[hi] <= g:
                lo = hi
                hi += 1
                while hi < stop and np.isnan(samples[c, hi]):
                    hi += 1
            out[row, s, c] = _value(
                t[lo] if lo >= 0 else -np.inf, np.float64(samples[c, lo]) if lo >= 0 else np.nan,
                t[hi] if hi < stop else np.inf,
                np.float64(samples[c, hi]) if hi < stop else np.nan, g, limit[c])


@numba.njit(nogil=True, cache=True)
def _gather(column: np.ndarray, order: np.ndarray, dest: np.ndarray) -> bool:  # pragma: no cover
    # dest = column[order] (column itself when order is empty), and whether any is NaN: one
    # pass, where a copy and a separate check would read the samples twice.
    gappy = False
    if order.size == 0:
        for i in range(dest.size):
            v = column[i]
            dest[i] = v
            gappy |= np.isnan(v)
    else:
        for i in range(dest.size):
            v = column[order[i]]
            dest[i] = v
            gappy |= np.isnan(v)
    return gappy


@numba.njit(parallel=True, nogil=True, cache=True)
def _interpolate_long(starts: np.ndarray, stops: np.ndarray, t: np.ndarray, chan: np.ndarray,
                      values: np.ndarray, rows: np.ndarray, dt: float, limit: np.ndarray,
                      out: np.ndarray, durations: np.ndarray) -> None:  # pragma: no cover
    # Long layout: an episode's rows are runs of one channel each; channels it lacks stay NaN.
    n_steps, n_ch = out.shape[1], out.shape[2]
    for r in numba.prange(starts.size):
        first, stop, row = starts[r], stops[r], rows[r]
        end = -np.inf
        for i in range(first, stop):
            end = max(end, t[i])
        durations[row] = end
        for s in range(n_steps):
            for c in range(n_ch):
                out[row, s, c] = np.nan
        i = first
        while i < stop:
            c = chan[i]
            j = i
            while j < stop and chan[j] == c:
                j += 1
            if c >= 0:
                lo = -1
                hi = i
                while hi < j and np.isnan(values[hi]):
                    hi += 1
                for s in range(n_steps):
                    g = s * dt
                    if g > end + _END_TOLERANCE:
                        break
                    while hi < j and t[hi] <= g:
                        lo = hi
                        hi += 1
                        while hi < j and np.isnan(values[hi]):
                            hi += 1
                    out[row, s, c] = _value(
                        t[lo] if lo >= 0 else -np.inf, values[lo] if lo >= 0 else np.nan,
                        t[hi] if hi < j else np.inf, values[hi] if hi < j else np.nan,
                        g, limit[c])
            i = j

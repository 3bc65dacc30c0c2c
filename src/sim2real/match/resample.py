"""Raw samples onto the shared time grid: linear interpolation compiled with numba.

Each episode is one run of rows sorted by ``t``; a pointer walks its samples while the grid
steps advance, so the cost is one read of the samples and one write of the grid, on every
core (``prange`` over episodes). Values are written straight into the destination grid:
no per-chunk temporaries, whatever the number of episodes.

The arithmetic is that of :func:`numpy.interp` with the grid's edge rules: before the first
sample the first value, between samples the straight line (in float64), past the last
sample (by more than 1e-9 s) NaN; a NaN sample spreads to the steps it bounds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np
import pyarrow as pa

from sim2real.dataset.ids import one_run_each

__all__ = ["Resampler"]

# A grid step counts as inside an episode up to this long after its last sample, so that
# the float noise of ``k * dt`` never drops the last step.
_END_TOLERANCE = 1e-9


class Resampler:
    """Resamples tables of samples onto a grid of step ``dt``, channel by channel.

    One instance serves many tables (the shards of one pass): the samples are gathered into
    one scratch buffer, reused, because fresh memory costs a page fault per page touched,
    as much again as the copy itself.

    Args:
        channels: the channels of the grid's last axis, in order.
        dt: grid step, seconds.
    """

    def __init__(self, channels: Sequence[str], dt: float) -> None:
        self.channels = list(channels)
        self.dt = dt
        self._buffers: dict[np.dtype, np.ndarray] = {}

    def into(self, table: pa.Table, rows: np.ndarray, out: np.ndarray,
             durations: np.ndarray) -> np.ndarray:
        """Resample the episodes of ``table`` into ``out[row]``.

        Args:
            table: ``t`` and the channel columns (absent ones read as NaN).
            rows: ``(table.num_rows,)`` the row of ``out`` each sample belongs to, -1 to
                skip it (:meth:`~sim2real.dataset.EpisodeIndex.rows`).
            out: ``(n_episodes, n_steps, n_channels)`` float32, written in place.
            durations: ``(n_episodes,)`` each episode's last sample time, written in place.

        Returns:
            The rows of ``out`` written (one per episode found), in no particular order.
        """
        runs = _Runs.of(rows, table["t"])
        if runs.rows.size:
            _interpolate(runs.starts, runs.stops, runs.t, self._samples(table, runs.order),
                         runs.rows, self.dt, out, durations)
        return runs.rows

    def block(self, table: pa.Table, rows: np.ndarray,
              n_steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The episodes of ``table`` on the grid, compactly: ``(rows, values, durations)``.

        ``values[i]`` (``(n_steps, n_channels)`` float32) and ``durations[i]`` belong to
        the episode of destination row ``rows[i]``. For a task that sends its result
        elsewhere: only the grid travels, never the samples.
        """
        runs = _Runs.of(rows, table["t"])
        values = np.empty((runs.rows.size, n_steps, len(self.channels)), dtype=np.float32)
        durations = np.zeros(runs.rows.size)
        if runs.rows.size:
            _interpolate(runs.starts, runs.stops, runs.t, self._samples(table, runs.order),
                         np.arange(runs.rows.size), self.dt, values, durations)
        return runs.rows, values, durations

    def _samples(self, table: pa.Table, order: np.ndarray | None) -> np.ndarray:
        """``(n_channels, n_rows)`` samples in run order (channel-major: each column is one
        contiguous copy), float32 when every channel is float32 (interpolated in float64
        all the same), float64 otherwise; NaN where absent or null."""
        present = [c for c in self.channels if c in table.column_names]
        dtype = np.dtype(np.float32 if all(table[c].type == pa.float32() for c in present)
                         else np.float64)
        n_rows = table.num_rows if order is None else order.size
        size = len(self.channels) * n_rows
        buffer = self._buffers.get(dtype)
        if buffer is None or buffer.size < size:
            buffer = self._buffers[dtype] = np.empty(size, dtype=dtype)
        samples = buffer[:size].reshape(len(self.channels), n_rows)
        for k, name in enumerate(self.channels):
            if name not in table.column_names:
                samples[k] = np.nan
                continue
            column = table[name].to_numpy(zero_copy_only=False)
            samples[k] = column if order is None else column[order]
        return samples


class _Runs:
    """The samples of each wanted episode as one contiguous run, sorted by ``t``.

    Attributes:
        starts, stops: ``(n_runs,)`` row range of each run (after ``order``).
        rows: ``(n_runs,)`` each run's destination row.
        t: sample times, in run order.
        order: the table rows, in run order, or ``None`` when the table holds only wanted
            rows already in runs (sorted Parquet parts, as ``write_dataset`` writes).
    """

    def __init__(self, starts: np.ndarray, stops: np.ndarray, rows: np.ndarray, t: np.ndarray,
                 order: np.ndarray | None) -> None:
        self.starts, self.stops, self.rows, self.t, self.order = starts, stops, rows, t, order

    @classmethod
    def of(cls, rows: np.ndarray, t_column: pa.ChunkedArray | pa.Array) -> _Runs:
        codes = np.asarray(rows, dtype=np.int64)
        t = t_column.to_numpy().astype(np.float64, copy=False)
        order = None
        if codes.size and codes.min() < 0:  # other episodes' rows: drop them first
            order = np.flatnonzero(codes >= 0)
            codes, t = codes[order], t[order]
        if not _grouped(codes, t):
            runs = np.lexsort((t, codes))
            codes, t = codes[runs], t[runs]
            order = runs if order is None else order[runs]
        if not codes.size:
            empty = np.zeros(0, np.int64)
            return cls(empty, empty, empty, t, order)
        change = np.flatnonzero(np.diff(codes)) + 1
        starts = np.concatenate([[0], change]).astype(np.int64)
        stops = np.concatenate([change, [codes.size]]).astype(np.int64)
        return cls(starts, stops, codes[starts], t, order)


def _grouped(codes: np.ndarray, t: np.ndarray) -> bool:
    """Whether each episode's rows already form one run with ``t`` increasing."""
    increasing = np.all((codes[1:] != codes[:-1]) | (np.diff(t) > 0))
    return bool(increasing) and one_run_each(codes)


@numba.njit(parallel=True, nogil=True, cache=True)
def _interpolate(starts: np.ndarray, stops: np.ndarray, t: np.ndarray, samples: np.ndarray,
                 rows: np.ndarray, dt: float, out: np.ndarray,
                 durations: np.ndarray) -> None:  # pragma: no cover - compiled
    n_steps, n_ch = out.shape[1], out.shape[2]
    for r in numba.prange(starts.size):
        first, last, row = starts[r], stops[r] - 1, rows[r]
        end = t[last]
        durations[row] = end
        j = first
        for s in range(n_steps):
            g = s * dt
            if g > end + _END_TOLERANCE:
                for c in range(n_ch):
                    out[row, s, c] = np.nan
                continue
            while j < last and t[j + 1] <= g:
                j += 1
            hi = min(j + 1, last)
            gap = t[hi] - t[j]
            w = 0.0
            if gap > 0:
                w = min(max((g - t[j]) / gap, 0.0), 1.0)
            for c in range(n_ch):
                out[row, s, c] = np.float64(samples[c, j]) * (1.0 - w) + \
                    np.float64(samples[c, hi]) * w

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
import pyarrow.compute as pc

__all__ = ["resample_block", "resample_into"]

# A grid step counts as inside an episode up to this long after its last sample, so that
# the float noise of ``k * dt`` never drops the last step.
_END_TOLERANCE = 1e-9


def resample_into(table: pa.Table, wanted: pa.Array, channels: Sequence[str], dt: float,
                  out: np.ndarray, durations: np.ndarray) -> np.ndarray:
    """Resample the episodes of ``table`` into ``out[row]``, ``row`` their index in ``wanted``.

    Args:
        table: ``episode_id``, ``t`` and the ``channels`` columns (absent ones read as NaN);
            rows of episodes not in ``wanted`` are ignored.
        wanted: the episode IDs of the rows of ``out``.
        channels: the channels of the last axis of ``out``, in order.
        dt: grid step, seconds.
        out: ``(len(wanted), n_steps, n_channels)`` float32, written in place.
        durations: ``(len(wanted),)`` each episode's last sample time, written in place.

    Returns:
        The rows of ``out`` written (one per episode found), in no particular order.
    """
    runs = _Runs.of(table, wanted)
    if runs.rows.size:
        _interpolate(runs.starts, runs.stops, runs.t, _samples(table, channels, runs.order),
                     runs.rows, dt, out, durations)
    return runs.rows


def resample_block(table: pa.Table, wanted: pa.Array, channels: Sequence[str], dt: float,
                   n_steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The episodes of ``table`` on the grid, compactly: ``(rows, values, durations)``.

    ``rows`` are the episodes' indices in ``wanted``; ``values[i]`` (``(n_steps,
    n_channels)`` float32) and ``durations[i]`` belong to ``rows[i]``. For a task that sends
    its result elsewhere: only the grid travels, never the samples.
    """
    runs = _Runs.of(table, wanted)
    values = np.empty((runs.rows.size, n_steps, len(channels)), dtype=np.float32)
    durations = np.zeros(runs.rows.size)
    if runs.rows.size:
        _interpolate(runs.starts, runs.stops, runs.t, _samples(table, channels, runs.order),
                     np.arange(runs.rows.size), dt, values, durations)
    return runs.rows, values, durations


class _Runs:
    """The rows of each wanted episode as one contiguous run, sorted by ``t``.

    Attributes:
        starts, stops: ``(n_runs,)`` row range of each run (after ``order``).
        rows: ``(n_runs,)`` each run's index in ``wanted``.
        t: sample times, in run order.
        order: row permutation that makes the runs, or ``None`` when the table already
            holds them (Parquet parts sorted by episode, as ``write_dataset`` writes).
    """

    def __init__(self, starts: np.ndarray, stops: np.ndarray, rows: np.ndarray, t: np.ndarray,
                 order: np.ndarray | None) -> None:
        self.starts, self.stops, self.rows, self.t, self.order = starts, stops, rows, t, order

    @classmethod
    def of(cls, table: pa.Table, wanted: pa.Array) -> _Runs:
        codes_arr = pc.index_in(table["episode_id"], value_set=wanted)
        codes = codes_arr.to_numpy(zero_copy_only=False)
        t = table["t"].to_numpy().astype(np.float64, copy=False)
        if codes_arr.null_count:
            codes = np.where(np.isfinite(codes), codes, -1).astype(np.int64)
        else:
            codes = codes.astype(np.int64, copy=False)
        order = None if _grouped(codes, t) else np.lexsort((t, codes))
        if order is not None:
            codes, t = codes[order], t[order]
        change = np.flatnonzero(np.diff(codes)) + 1
        starts = np.concatenate([[0], change]).astype(np.int64) if codes.size else np.zeros(
            0, np.int64)
        stops = np.concatenate([change, [codes.size]]).astype(np.int64) if codes.size else \
            np.zeros(0, np.int64)
        rows = codes[starts]
        keep = rows >= 0
        return cls(starts[keep], stops[keep], rows[keep], t, order)


def _grouped(codes: np.ndarray, t: np.ndarray) -> bool:
    """Whether each episode's rows already form one run with ``t`` increasing."""
    if codes.size < 2:
        return True
    boundary = codes[1:] != codes[:-1]
    if not np.all(boundary | (np.diff(t) > 0)):
        return False
    heads = codes[np.concatenate([[True], boundary])]
    return bool(np.unique(heads).size == heads.size)


def _samples(table: pa.Table, channels: Sequence[str], order: np.ndarray | None) -> np.ndarray:
    """``(n_channels, n_rows)`` samples in run order (channel-major: each column is one
    contiguous copy), float32 when every channel is float32 (interpolated in float64 all
    the same), float64 otherwise; NaN where absent or null."""
    present = [c for c in channels if c in table.column_names]
    single = all(table[c].type == pa.float32() for c in present)
    samples = np.empty((len(channels), table.num_rows),
                       dtype=np.float32 if single else np.float64)
    for k, name in enumerate(channels):
        if name not in table.column_names:
            samples[k] = np.nan
            continue
        column = table[name].to_numpy(zero_copy_only=False)
        samples[k] = column if order is None else column[order]
    return samples


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

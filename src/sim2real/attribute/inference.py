"""Simulation-based inference of the parameters behind a telemetry window.

The estimator learns, from sim rollouts alone, how a change of the simulation parameters
moves the telemetry, and inverts that map for real episodes. It works *locally*, in the
spirit of ABC regression adjustment:

1. every window (a sim rollout at a random end time, or a real episode at its failure) is
   compared with the sim rollouts of the same task nearest in context (never in telemetry:
   see :meth:`ParameterInference._references`); ``d = window - mean(references)``, per
   block and channel (layout ``(n_blocks * n_channels,)``, block-major): ``n_segments``
   blocks of segment means in units of the sim's spread, then one block of each channel's
   roughness, the log of the RMS of its step changes (consecutive-sample differences) over
   the window. Friction, noise or latency change how a channel jitters more than its level,
   and a log ratio of roughness needs no scale;
2. on sim, where the parameters are known, a *forward* linear model ``d = A @ dp`` is fitted,
   ``dp`` the parameter difference to the references in units of the randomisation spread.
   Forward, because ``dp`` is exact: the slope is not attenuated as an inverse regression
   (parameters on noisy features) would be, so the inversion extrapolates beyond the range;
3. a window's parameters are its references' mean plus the ridge-regularised generalised
   least-squares inversion of ``A`` applied to its ``d``. Where the data cannot tell
   a parameter apart (its column of ``A`` is weak or collinear with another) the ridge
   pulls the correction to zero and the cross-validated R^2 (``identifiability_``, the squared
   correlation of held-out predictions with the truth) is low.

Channels every sim value of which is positive and which span more than a decade are
compared in log space, where multiplicative effects (slip, errors) become additive.
"""

from __future__ import annotations

import warnings
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sim2real.drift.signature import roughness, segment_means
from sim2real.engine import run_shared
from sim2real.match.context import ContextTable
from sim2real.match.grid import SignalGrid
from sim2real.match.matcher import RolloutBank, context_scale, window_times

if TYPE_CHECKING:
    from sim2real.engine import Executor

__all__ = ["ParamSpace", "ParameterInference", "Windows"]

_LOG_SPAN = 10.0
_CLIP = 3.0
_MAX_TRAIN = 4000
_MAX_CANDIDATES = 2000
_CHUNK = 512
_ROUGH_FLOOR = 1e-3  # of a channel's spread: steps below it are as smooth as none


@dataclass(frozen=True)
class ParamSpace:
    """The simulation parameters of the bank's rollouts.

    Attributes:
        names: parameter names without ``param.``.
        low, high, nominal: ``(n_params,)`` the randomisation ranges.
        values: ``(n_rollouts, n_params)`` each rollout's sample, bank row order.
        minimum, maximum: ``(n_params,)`` physical bounds (``-inf``/``inf`` where none):
            no estimate lies outside them.
    """

    names: tuple[str, ...]
    low: np.ndarray
    high: np.ndarray
    nominal: np.ndarray
    values: np.ndarray
    minimum: np.ndarray | None = None
    maximum: np.ndarray | None = None

    @property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """``(n_params,)`` lower and upper physical bounds."""
        n = len(self.names)
        low = self.minimum if self.minimum is not None else np.full(n, -np.inf)
        high = self.maximum if self.maximum is not None else np.full(n, np.inf)
        return low, high

    def clip(self, values: np.ndarray) -> np.ndarray:
        """``values`` (``(..., n_params)``) within the physical bounds."""
        low, high = self.bounds
        return np.clip(values, low, high)

    @property
    def spread(self) -> np.ndarray:
        """``(n_params,)`` width of each range (1 where degenerate)."""
        width = self.high - self.low
        return np.where(width > 0, width, 1.0)


@dataclass(frozen=True)
class Windows:
    """Episodes to read, each at its own window end.

    Attributes:
        grid: where the episodes live; it must hold every bank channel.
        rows: ``(n,)`` rows of ``grid``.
        ends: ``(n,)`` window end (failure time), seconds from start.
        tasks: ``(n,)`` task of each episode.
        context: their ``ctx.*`` columns, in ``rows`` order.
    """

    grid: SignalGrid
    rows: np.ndarray
    ends: np.ndarray
    tasks: np.ndarray
    context: ContextTable


class ParameterInference:
    """Estimate simulation parameters from telemetry windows; fitted on sim rollouts.

    Args:
        n_references: sim rollouts of the same task and nearest context a window is
            compared with.
        n_points: samples per window.
        n_segments: parts of the window averaged separately (one more block, the
            roughness, follows them: :attr:`n_blocks`).
        window_s: seconds before the window end.
        ridge: prior precision of a parameter correction (spread units); keeps unidentifiable
            parameters at their neighbours' value instead of guessing.
        augment: windows per sim rollout, each ending at a random time.
        n_folds: folds of the identifiability cross-validation.
        seed: random end times and folds.
    """

    def __init__(self, n_references: int = 20, n_points: int = 32, n_segments: int = 4,
                 window_s: float = 10.0, ridge: float = 1.0, augment: int = 2,
                 n_folds: int = 5, seed: int = 0) -> None:
        self.n_references = n_references
        self.n_points = n_points
        self.n_segments = n_segments
        self.window_s = window_s
        self.ridge = ridge
        self.augment = augment
        self.n_folds = n_folds
        self.seed = seed

    @property
    def n_blocks(self) -> int:
        """Feature blocks per channel: the segment means, then the roughness."""
        return self.n_segments + 1

    def fit(self, bank: RolloutBank, space: ParamSpace,
            executor: Executor | None = None) -> ParameterInference:
        """Learn how parameters move the telemetry, and how well each can be told apart.

        ``executor`` reads the training windows in parallel (``None``: here); the fit does
        not depend on it.

        Raises:
            ValueError: ``space`` does not have one row per rollout of ``bank``.
        """
        n = bank.grid.values.shape[0]
        if space.values.shape[0] != n:
            msg = (f"ParameterInference.fit: {space.values.shape[0]} parameter rows for {n} "
                   "rollouts; pass one row per bank rollout, in bank order")
            raise ValueError(msg)
        rng = np.random.default_rng(self.seed)
        self.bank_ = bank
        self.numeric_scale_ = context_scale(bank.context)
        sample = bank.grid.values[_spread_rows(n)]
        self.log_ = _log_channels(sample)
        self.scale_ = _channel_scale(sample, self.log_)
        self.space_ = space
        rows = np.tile(np.arange(n), self.augment)
        dur = bank.grid.durations[rows]
        own = np.where(np.isfinite(bank.failure_time[rows]), bank.failure_time[rows], dur)
        # The first copy of a failed rollout ends at its failure, like a real failure does.
        random_end = dur * rng.uniform(0.3, 1.0, size=rows.size)
        first = np.arange(rows.size) < n
        ends = np.where(bank.failed[rows] & first, own, random_end)
        if rows.size > _MAX_TRAIN:
            # A linear forward model is pinned down by a few thousand windows; every window
            # costs a pass over the bank, so a fleet-size bank would cost its square.
            keep_rows = np.sort(rng.choice(rows.size, size=_MAX_TRAIN, replace=False))
            rows, ends = rows[keep_rows], ends[keep_rows]
        windows = Windows(bank.grid, rows, ends, bank.tasks[rows], bank.context.take(rows))
        d, base = self._deviations(windows, exclude_self=True, executor=executor)
        dp = (space.values[rows] - base) / space.spread
        keep = np.isfinite(dp).all(axis=1)
        d, dp, base, rows = d[keep], dp[keep], base[keep], rows[keep]
        self.coef_, self.noise_ = _forward(dp, d)
        # What sim-vs-sim windows look like once their known parameter differences are
        # taken out: the no-gap yardstick a real failure is "back inside" of.
        resid = d / self.noise_ - dp @ self.columns().T
        self.null_ = (resid - np.median(resid, axis=0)).astype(np.float32)
        self.identifiability_ = self._cross_validate(d, dp, base, space.values[rows], rng)
        gram = self._gram()
        cov = np.linalg.inv(gram)
        sd = np.sqrt(np.diag(cov))
        self.correlation_ = cov / np.outer(sd, sd)
        self.posterior_sd_ = sd * space.spread
        return self

    def deviations(self, windows: Windows,
                   executor: Executor | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(n, n_features)`` whitened deviations from the neighbours, and ``(n, n_params)``
        the neighbours' mean parameters (read in parallel by ``executor``, if given)."""
        d, base = self._deviations(windows, exclude_self=False, executor=executor)
        return d / self.noise_, base

    def predict(self, windows: Windows) -> np.ndarray:
        """``(n, n_params)`` the parameter values each window points to."""
        d, base = self._deviations(windows, exclude_self=False)
        return base + self.correct(d / self.noise_) * self.space_.spread

    def correct(self, whitened: np.ndarray) -> np.ndarray:
        """``(n, n_params)`` parameter corrections (spread units) for whitened deviations."""
        a = self.coef_ / self.noise_[:, None]
        return np.linalg.solve(self._gram(), a.T @ np.atleast_2d(whitened).T).T

    def columns(self) -> np.ndarray:
        """``(n_features, n_params)`` the whitened effect of one spread of each parameter."""
        return self.coef_ / self.noise_[:, None]

    def _gram(self) -> np.ndarray:
        a = self.columns()
        return a.T @ a + self.ridge * np.eye(a.shape[1])

    def _deviations(self, w: Windows, exclude_self: bool,
                    executor: Executor | None = None) -> tuple[np.ndarray, np.ndarray]:
        names = list(self.bank_.grid.channels)
        cols = np.array([w.grid.channels.index(c) for c in names], dtype=np.int64)
        refs = self._references(w, exclude_self)
        d = np.zeros((len(w.rows), self.n_blocks * len(names)))
        base = np.full((len(w.rows), len(self.space_.names)), np.nan)
        found = np.flatnonzero([r.size > 0 for r in refs])
        # Windows are read in chunks: one interpolation pass per chunk, bounded memory.
        chunks = [(c, [refs[i] for i in c])
                  for c in np.array_split(found, max(1, -(-found.size // _CHUNK))) if c.size]
        parts = run_shared(executor, _compare_chunk, (self, w, cols), chunks)
        for (chunk, _), (d_chunk, base_chunk) in zip(chunks, parts, strict=True):
            d[chunk], base[chunk] = d_chunk, base_chunk
        return d, base

    def _compare(self, w: Windows, idx: np.ndarray, refs: list[np.ndarray],
                 cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Deviations of windows ``idx`` from the mean of their references, and the
        references' mean parameters."""
        bank = self.bank_
        ends = np.asarray(w.ends[idx], dtype=float)
        length = np.where(ends > 0, np.minimum(self.window_s, ends), self.window_s)
        times = window_times(ends, length, self.n_points)
        mine = self._blocks(w.grid.at(w.rows[idx], times)[:, :, cols])
        flat = np.concatenate(refs)
        owner = np.repeat(np.arange(idx.size), [r.size for r in refs])
        ref_times = window_times(bank.end_times(flat, ends[owner]), length[owner],
                                 self.n_points)
        theirs = _group_means(self._blocks(bank.grid.at(flat, ref_times)), owner)
        d = np.nan_to_num(mine - theirs).reshape(idx.size, -1)
        return d, _group_means(self.space_.values[flat], owner)

    def _references(self, w: Windows, exclude_self: bool) -> list[np.ndarray]:
        """Per window, the rollouts of the same task nearest in *context only* (random
        among ties), without the window's own rollout where ``exclude_self``.

        Never near in telemetry: rollouts picked for looking alike would hide the very
        parameter effects the forward model must learn (a selection bias that flattens its
        slopes and makes the inversion overshoot beyond the range).
        """
        bank = self.bank_
        rng = np.random.default_rng(self.seed + 1)
        tasks = np.asarray(w.tasks, dtype=str)
        out = [np.zeros(0, np.int64)] * len(w.rows)
        for task in np.unique(tasks):
            members = np.flatnonzero(tasks == task)
            rows = self._candidates(str(task))
            if rows.size == 0:
                continue
            candidates = bank.context.take(rows)
            for block in np.array_split(members, -(-members.size // _CHUNK)):
                dist = w.context.take(block).distances(candidates, self.numeric_scale_)
                if exclude_self:
                    dist[w.rows[block][:, None] == rows[None, :]] = np.inf
                picked = _nearest(dist, self.n_references, rng)
                for j, i in enumerate(block):
                    cols = picked[j][np.isfinite(dist[j, picked[j]])]
                    out[i] = rows[cols]
        return out

    def _candidates(self, task: str) -> np.ndarray:
        """The rollouts of ``task`` that references are drawn from: all, or for a large
        task the same random :data:`_MAX_CANDIDATES` for every window.

        The nearest in context among a random few thousand are as near as any, and a scan
        of a fleet-size bank per window would cost its square. One sample for all windows,
        not one per block of windows: the references' reads then stay within a few
        thousand rows, not spread over a bank that may be mapped from disk and larger than
        the memory left for it.
        """
        rows = self.bank_.task_rows(task)
        if rows.size <= _MAX_CANDIDATES:
            return rows
        rng = np.random.default_rng([self.seed, zlib.crc32(task.encode())])
        return np.sort(rng.choice(rows, size=_MAX_CANDIDATES, replace=False))

    def _blocks(self, windows: np.ndarray) -> np.ndarray:
        """``(k, n_blocks, n_channels)``: segment means scaled by the sim's spread, then the
        roughness; the windows are scratch (their log channels are overwritten). Sim's and
        real windows both pass here, so both sides' features are computed alike."""
        x = np.asarray(windows, dtype=float)
        if self.log_.any():  # in place, on the log channels only: windows is scratch
            x[..., self.log_] = np.log(np.maximum(x[..., self.log_], 1e-12))
        means = segment_means(x, self.n_segments) / self.scale_
        return np.concatenate([means, _roughness(x, self.scale_)[:, None, :]], axis=1)

    def _cross_validate(self, d: np.ndarray, dp: np.ndarray, base: np.ndarray,
                        truth: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``(n_params,)`` cross-validated R^2 of the predicted parameter values on sim."""
        folds = rng.permutation(len(d)) % self.n_folds
        pred = np.zeros_like(truth)
        spread = self.space_.spread
        for k in range(self.n_folds):
            test = folds == k
            coef, noise = _forward(dp[~test], d[~test])
            a = coef / noise[:, None]
            gram = a.T @ a + self.ridge * np.eye(a.shape[1])
            corr = np.linalg.solve(gram, a.T @ (d[test] / noise).T).T
            pred[test] = base[test] + corr * spread
        # Squared correlation, not 1 - SSE/SST: a weakly informed parameter's corrections
        # are noisy, yet how much of its variation the telemetry carries is what counts.
        out = np.zeros(truth.shape[1])
        for j in range(truth.shape[1]):
            ok = np.isfinite(pred[:, j]) & np.isfinite(truth[:, j])
            if ok.sum() > 2 and np.std(pred[ok, j]) > 0 and np.std(truth[ok, j]) > 0:
                r = float(np.corrcoef(pred[ok, j], truth[ok, j])[0, 1])
                out[j] = max(r, 0.0) ** 2
        return out


def _compare_chunk(job: tuple[ParameterInference, Windows, np.ndarray],
                   chunk: tuple[np.ndarray, list[np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`ParameterInference._compare` of one chunk of windows; module level, so that
    an executor's workers can run it."""
    inference, windows, cols = job
    idx, refs = chunk
    return inference._compare(windows, idx, refs, cols)


def _nearest(dist: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """``(n, min(k, m))`` columns of the ``k`` smallest of each row of ``dist`` ``(n, m)``,
    drawn at random among the values tied at the cut."""
    if dist.shape[1] <= k:
        return np.tile(np.arange(dist.shape[1]), (dist.shape[0], 1))
    cut = np.partition(dist, k - 1, axis=1)[:, k - 1 : k]
    # Below the cut always, tied at it by a random draw, above it never.
    key = np.where(dist < cut, -1.0, np.where(dist == cut, rng.random(dist.shape), 2.0))
    return np.argpartition(key, k - 1, axis=1)[:, :k]


def _group_means(values: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """NaN-aware means of ``values`` over runs of equal, sorted ``owner`` (each present)."""
    starts = np.flatnonzero(np.r_[True, np.diff(owner) > 0])
    finite = np.isfinite(values)
    sums = np.add.reduceat(np.where(finite, values, 0.0), starts, axis=0)
    counts = np.add.reduceat(finite.astype(np.int64), starts, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / counts


def _forward(dp: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Robust least squares ``d ~ c + A @ dp``: ``A`` ``(n_features, n_params)``, noise sd.

    Windows of different rollouts are never perfectly aligned in phase, so a few deviations
    are huge; the noise is a median absolute deviation and deviations are winsorised at
    :data:`_CLIP` noise units while fitting, so those few do not set the slopes.
    """
    design = np.column_stack([np.ones(len(dp)), dp])
    coef, *_ = np.linalg.lstsq(design, d, rcond=None)
    for _ in range(2):
        resid = d - design @ coef
        noise = 1.4826 * np.median(np.abs(resid - np.median(resid, axis=0)), axis=0)
        floor = max(float(np.median(noise)) * 0.1, 1e-9)  # a constant feature must not rule
        noise = np.maximum(noise, floor)
        fitted = design @ coef
        clipped = fitted + np.clip(d - fitted, -_CLIP * noise, _CLIP * noise)
        coef, *_ = np.linalg.lstsq(design, clipped, rcond=None)
    return coef[1:].T, noise


def _roughness(windows: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``(n, n_points, c)`` -> ``(n, c)`` log RMS of each channel's step changes, NaN-aware
    (NaN where a channel has no two consecutive samples).

    The RMS is floored at :data:`_ROUGH_FLOOR` of the channel's spread ``scale``: a channel
    that holds still (a noise-free sim signal, a flag) would otherwise be ``log 0``, and
    its tiniest jitter an unbounded deviation.
    """
    return np.log(np.maximum(roughness(windows), _ROUGH_FLOOR * scale))


def _spread_rows(n: int) -> np.ndarray:
    """At most :data:`_MAX_CANDIDATES` rollouts, evenly spread: a channel's range and
    spread are as well known from them as from a fleet-size bank, at a fraction of it."""
    return np.unique(np.linspace(0, n - 1, min(n, _MAX_CANDIDATES)).astype(np.int64))


def _channel_scale(values: np.ndarray, log: np.ndarray) -> np.ndarray:
    """``(n_channels,)`` each channel's spread (in log space where ``log``)."""
    flat = values.reshape(-1, values.shape[-1]).astype(float)
    flat[:, log] = np.log(np.maximum(flat[:, log], 1e-12))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        scale = np.nanstd(flat, axis=0)
    return np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)


def _log_channels(values: np.ndarray) -> np.ndarray:
    """``(n_channels,)`` channels compared in log space: positive, spanning a decade."""
    flat = values.reshape(-1, values.shape[-1]).astype(float)
    out = np.zeros(flat.shape[1], dtype=bool)
    for j in range(flat.shape[1]):
        col = flat[:, j][np.isfinite(flat[:, j])]
        if col.size and col.min() > 0:
            lo, hi = np.percentile(col, [1, 99])
            out[j] = hi / lo > _LOG_SPAN
    return out

"""Replays of real episodes in sim, and how far each real episode is from its replays.

A *scenario* is what a real episode gives a replay: its context, its initial state (read
by the adapter), its sample rate and, for open-loop adapters, its recorded commands. A
replay batch runs every (candidate parameters, scenario, seed) triple over worker
processes and keeps only a compact summary of each rollout, so little crosses processes.

Two ways to compare a replay with its real episode (the *objective*):

- ``summary``: per-episode summaries of each shared channel (mean, spread, extremes),
  the duration and the outcome; timing within the episode is ignored, which suits a
  closed-loop policy whose replays cannot follow the real episode step by step.
- ``trajectory``: every channel resampled onto the real episode's time grid and compared
  sample by sample (a replay that ends early holds its last value), plus duration and
  outcome; it suits open-loop replays of recorded commands, where timing is the evidence.

Both are standardised by how much the dataset's own simulation rollouts vary: a *replay
drift* of about 1 means "as far from its replays as domain-randomised rollouts are from
each other", the same yardstick as the analysis' drift score.
"""

from __future__ import annotations

import multiprocessing
import os
import zlib
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sim2real.dataset import Dataset
from sim2real.errors import SimulatorError, UsageError
from sim2real.sim.adapter import RolloutRequest, SimulatorAdapter

__all__ = ["OBJECTIVES", "ReplayBatch", "ReplayRunner", "Scenario", "Yardstick",
           "load_scenarios", "replay_drift", "replay_residuals", "replay_scores",
           "resolve_objective", "sim_channels_and_scales"]

OBJECTIVES = ("auto", "summary", "trajectory")

_STATS = ("mean", "std", "min", "max")
_OUTCOME_SCALE = 0.5  # a flipped outcome weighs like a 2-sigma feature gap
_SCALE_SAMPLE = 200  # sim rollouts that set the feature scales
_CHUNK = 4  # rollouts per worker task
# A gap is clipped at this many scales: one wild channel of one episode (an object flung
# off the table) must not outweigh every other feature of every other episode.
_CLIP_Z = 4.0


@dataclass(frozen=True)
class Scenario:
    """One real episode as a replay sees it.

    Attributes:
        episode_id: the real episode.
        context: its ``ctx.*`` values (without the prefix).
        init_state: as the adapter read it from the recording.
        rate_hz: its sample rate, so replays are summarised at the same rate.
        commands: ``t`` plus command channels for open-loop replay, else ``None``.
        real: ``(n_features,)`` the real episode's summary.
        real_failed: whether it failed.
        grid: the real episode's sample times, on which the trajectory objective compares.
    """

    episode_id: str
    context: dict[str, object]
    init_state: dict[str, float]
    rate_hz: float
    commands: pa.Table | None
    real: np.ndarray
    real_failed: bool
    grid: np.ndarray | None = None


@dataclass(frozen=True)
class ReplayBatch:
    """Summaries of replays: ``features`` ``(n_candidates, n_scenarios, n_seeds, n_features)``
    and ``failed`` ``(n_candidates, n_scenarios, n_seeds)``."""

    features: np.ndarray
    failed: np.ndarray


def summarise(table: pa.Table, channels: Sequence[str], outcome_failed: bool) -> np.ndarray:
    """``(n_channels * 4 + 2,)``: mean, std, min, max per channel, duration, outcome."""
    out = np.full(len(channels) * len(_STATS) + 2, np.nan)
    for j, name in enumerate(channels):
        if name not in table.column_names:
            continue
        v = np.asarray(table[name].to_numpy(zero_copy_only=False), dtype=float)
        v = v[np.isfinite(v)]
        if v.size:
            out[j * 4:j * 4 + 4] = (v.mean(), v.std(), v.min(), v.max())
    t = np.asarray(table["t"].to_numpy(zero_copy_only=False), dtype=float)
    out[-2] = float(t.max()) if t.size else np.nan
    out[-1] = 1.0 if outcome_failed else 0.0
    return out


def trajectory(table: pa.Table, channels: Sequence[str], outcome_failed: bool,
               grid: np.ndarray, length: int) -> np.ndarray:
    """``(n_channels * length + 2,)``: each channel on ``grid`` (NaN-padded to ``length``),
    channel after channel, then duration and outcome."""
    out = np.full(len(channels) * length + 2, np.nan)
    t = np.asarray(table["t"].to_numpy(zero_copy_only=False), dtype=float)
    for j, name in enumerate(channels):
        if name not in table.column_names or t.size == 0:
            continue
        v = np.asarray(table[name].to_numpy(zero_copy_only=False), dtype=float)
        ok = np.isfinite(v)
        if ok.any():
            # np.interp holds the end values: a replay that stopped early (a fall) stays
            # where it ended, as the fallen robot does.
            out[j * length:j * length + grid.size] = np.interp(grid, t[ok], v[ok])
    out[-2] = float(t.max()) if t.size else np.nan
    out[-1] = 1.0 if outcome_failed else 0.0
    return out


def resolve_objective(objective: str, adapter: SimulatorAdapter) -> str:
    """``auto`` becomes ``trajectory`` for an open-loop adapter, else ``summary``.

    Raises:
        UsageError: an unknown objective.
    """
    if objective not in OBJECTIVES:
        msg = f"unknown objective {objective!r}: choose one of {', '.join(OBJECTIVES)}"
        raise UsageError(msg)
    if objective == "auto":
        return "trajectory" if adapter.command_channels else "summary"
    return objective


def load_scenarios(ds: Dataset, episode_ids: Sequence[str], adapter: SimulatorAdapter,
                   channels: Sequence[str], objective: str = "summary") -> list[Scenario]:
    """The scenarios of real episodes, in the given order, compared by ``objective``.

    Raises:
        UsageError: an episode is not a real episode of the dataset.
    """
    eps = ds.episodes.filter(pc.is_in(ds.episodes["episode_id"],
                                      value_set=pa.array(list(episode_ids), pa.string())))
    rows = {r["episode_id"]: r for r in eps.to_pylist()}
    missing = [e for e in episode_ids if e not in rows or rows[e]["source"] != "real"]
    if missing:
        msg = f"{ds.root}: not real episodes of the dataset: {', '.join(missing[:5])}"
        raise UsageError(msg)
    wanted = sorted(set(channels) | set(adapter.command_channels))
    signals = ds.read_signals(list(episode_ids), columns=wanted)
    tables = {e: signals.filter(pc.equal(signals["episode_id"], e)).sort_by("t")
              for e in episode_ids}
    length = max(t.num_rows for t in tables.values())
    out = []
    for episode_id in episode_ids:
        row = rows[episode_id]
        table = tables[episode_id]
        context = {k[4:]: v for k, v in row.items() if k.startswith("ctx.") and v is not None}
        t = np.asarray(table["t"].to_numpy(zero_copy_only=False), dtype=float)
        rate = 1.0 / float(np.median(np.diff(t))) if t.size > 1 else 50.0
        commands = None
        if adapter.command_channels:
            commands = table.select(["t", *adapter.command_channels])
        failed = row.get("outcome") == "failure"
        if objective == "trajectory":
            real, grid = trajectory(table, channels, failed, t, length), t
        else:
            real, grid = summarise(table, channels, failed), None
        out.append(Scenario(episode_id, context, adapter.initial_state(row, table), rate,
                            commands, real, failed, grid))
    return out


@dataclass(frozen=True)
class Yardstick:
    """What replays are compared on and how far apart counts as far.

    Attributes:
        channels: the channels sim records.
        summary_scale: ``(n_channels * 4 + 2,)`` the sim rollouts' spread of each summary
            feature.
        channel_scale: ``(n_channels,)`` the sim rollouts' spread of each channel's samples.
    """

    channels: list[str]
    summary_scale: np.ndarray
    channel_scale: np.ndarray

    def scale(self, scenarios: Sequence[Scenario]) -> np.ndarray:
        """The feature scales for these scenarios' objective."""
        if not scenarios or scenarios[0].grid is None:
            return self.summary_scale
        length = (scenarios[0].real.size - 2) // max(len(self.channels), 1)
        return np.concatenate([np.repeat(self.channel_scale, length), self.summary_scale[-2:]])


def sim_channels_and_scales(ds: Dataset, seed: int) -> Yardstick:
    """The channels sim records and the feature scales its rollouts set.

    Raises:
        UsageError: the dataset has no simulation rollouts to set the scales.
    """
    sim = ds.episodes.filter(pc.equal(ds.episodes["source"], "sim"))
    if sim.num_rows == 0:
        msg = f"{ds.root}: no sim rollouts; replays are compared on the sim rollouts' spread"
        raise UsageError(msg)
    ids = sim["episode_id"].to_pylist()
    rng = np.random.default_rng(seed)
    ids = sorted(rng.choice(ids, size=min(_SCALE_SAMPLE, len(ids)), replace=False).tolist())
    signals = ds.read_signals(ids)
    channels = [c for c in ds.channels if signals[c].null_count < signals.num_rows]
    failed = dict(zip(sim["episode_id"].to_pylist(),
                      (o == "failure" for o in sim["outcome"].to_pylist()), strict=True))
    rows = []
    for episode_id in ids:
        table = signals.filter(pc.equal(signals["episode_id"], episode_id))
        rows.append(summarise(table, channels, failed[episode_id]))
    samples = np.column_stack([np.asarray(signals[c].to_numpy(zero_copy_only=False), dtype=float)
                               for c in channels]) if channels else np.zeros((0, 0))
    with np.errstate(all="ignore"):
        spread = np.nan_to_num(np.nanstd(samples, axis=0)) if samples.size else np.zeros(0)
        level = np.nan_to_num(np.nanmedian(np.abs(samples), axis=0)) if samples.size else spread
    channel_scale = np.fmax(spread, 0.05 * level + 1e-6)
    feats = np.asarray(rows)
    scale = np.nanstd(feats, axis=0)
    # A feature that never varies in sim would blow any tiny real difference up.
    floor = 0.05 * np.nanmedian(np.abs(feats), axis=0) + 1e-6
    scale = np.fmax(np.nan_to_num(scale), np.nan_to_num(floor, nan=1e-6))
    scale[-1] = _OUTCOME_SCALE
    return Yardstick(channels, scale, channel_scale)


def _gap(a: np.ndarray, b: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The clipped standardised gap per feature (NaN where a side lacks the feature)."""
    return np.clip((a - b) / scale, -_CLIP_Z, _CLIP_Z)


def _rms(a: np.ndarray, b: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """RMS clipped standardised gap over the last axis (features missing on a side skipped)."""
    return np.sqrt(np.nanmean(_gap(a, b, scale) ** 2, axis=-1))


def replay_drift(scenarios: Sequence[Scenario], batch: ReplayBatch, scale: np.ndarray
                 ) -> np.ndarray:
    """``(n_candidates, n_scenarios)``: how far each real episode is from its replays.

    The energy score of the replays as a forecast of the real episode: the mean gap from
    the real episode to each replay, less half the mean gap between replays. It is a proper
    scoring rule, so it is lowest, on average, for the parameters that make replays vary
    as reality does; a plain gap to the replays' mean would favour whatever averages out
    between a chaotic episode's failure modes.
    """
    return replay_scores(scenarios, batch, scale).mean(axis=2)


def replay_residuals(scenarios: Sequence[Scenario], batch: ReplayBatch, scale: np.ndarray
                     ) -> np.ndarray:
    """``(n_candidates, n_scenarios * n_features)``: the standardised gaps of one replay
    per episode, weighted so that their sum of squares is the mean over episodes of the
    squared replay drift (what a deterministic adapter's calibration minimises).

    Raises:
        ValueError: the batch holds more than one replay per episode.
    """
    if batch.features.shape[2] != 1:
        raise ValueError("residuals need exactly one replay per episode")
    real = np.stack([s.real for s in scenarios])[None]  # (1, n_sc, n_feat)
    z = _gap(batch.features[:, :, 0], real, scale)
    valid = np.isfinite(z)
    weight = 1.0 / np.sqrt(np.maximum(valid.sum(axis=2, keepdims=True), 1) * len(scenarios))
    return (np.where(valid, z, 0.0) * weight).reshape(z.shape[0], -1)


def replay_scores(scenarios: Sequence[Scenario], batch: ReplayBatch, scale: np.ndarray
                  ) -> np.ndarray:
    """``(n_candidates, n_scenarios, n_seeds)``: each replay's share of the replay drift.

    Replay ``k``'s gap to the real episode less half its mean gap to the other replays;
    their mean over the seeds is :func:`replay_drift`. Two candidates replayed on the same
    seeds give paired scores, which is what the counterfactual check tests.
    """
    real = np.stack([s.real for s in scenarios])[None, :, None]  # (1, n_sc, 1, n_feat)
    feats = batch.features  # (n_cand, n_sc, n_seeds, n_feat)
    to_real = _rms(feats, real, scale)
    n = feats.shape[2]
    if n < 2:
        return to_real
    pair = _rms(feats[:, :, :, None], feats[:, :, None], scale)  # (.., n_seeds, n_seeds)
    return to_real - 0.5 * pair.sum(axis=3) / (n - 1)


def _run_rollouts(adapter: SimulatorAdapter,
                  requests: Sequence[tuple[RolloutRequest, np.ndarray | None]],
                  channels: Sequence[str], length: int) -> list[np.ndarray]:
    out = []
    for req, grid in requests:
        try:
            res = adapter.rollout(req)
        except Exception as err:  # a simulator may raise anything; name the rollout
            msg = f"simulator adapter {adapter.name!r} failed on {dict(req.params)}: {err}"
            raise SimulatorError(msg) from err
        failed = res.outcome == "failure"
        out.append(summarise(res.telemetry, channels, failed) if grid is None
                   else trajectory(res.telemetry, channels, failed, grid, length))
    return out


class ReplayRunner:
    """Runs replay batches over worker processes (``workers=1``: in this process).

    Every rollout's seed derives from its episode and seed index only, so candidates are
    compared on the same sensor noise (common random numbers) and results do not depend on
    the worker count. Use as a context manager.
    """

    def __init__(self, adapter: SimulatorAdapter, scenarios: Sequence[Scenario],
                 channels: Sequence[str], n_seeds: int, *, workers: int | None = None,
                 progress: bool = False, total: int = 0, label: str = "replays") -> None:
        self.adapter = adapter
        self.scenarios = list(scenarios)
        self.channels = list(channels)
        self.n_seeds = n_seeds
        self.workers = max(1, workers if workers is not None else (os.cpu_count() or 1))
        self.rollouts = 0
        self._length = max(((s.real.size - 2) // max(len(self.channels), 1)
                            for s in self.scenarios), default=0)
        self._pool: Executor | None = None
        self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                             MofNCompleteColumn(), TimeElapsedColumn(),
                             console=Console(stderr=True), disable=not progress)
        self._task = self._bar.add_task(label, total=total or None)

    def __enter__(self) -> ReplayRunner:
        if self.workers > 1:
            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
            self._pool = ProcessPoolExecutor(self.workers, mp_context=ctx)
            # Fork every worker now, before the progress bar starts its thread.
            self._pool.submit(int).result()
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:  # a search that converged early ends its bar where it stopped
            self._bar.update(self._task, total=self.rollouts)
        self._bar.stop()
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)

    def seed_of(self, scenario: Scenario, k: int) -> int:
        return zlib.crc32(f"{scenario.episode_id}/{k}".encode()) & 0x7FFFFFFF

    def requests(self, params: Mapping[str, float]
                 ) -> Iterator[tuple[RolloutRequest, np.ndarray | None]]:
        for s in self.scenarios:
            for k in range(self.n_seeds):
                yield (RolloutRequest(dict(params), s.context, s.init_state, self.seed_of(s, k),
                                      s.rate_hz, s.commands), s.grid)

    def run(self, candidates: Sequence[Mapping[str, float]]) -> ReplayBatch:
        """Replay every scenario with every candidate's parameter values."""
        reqs = [r for c in candidates for r in self.requests(c)]
        chunks = [reqs[i:i + _CHUNK] for i in range(0, len(reqs), _CHUNK)]
        rows: list[np.ndarray] = []
        if self._pool is None:
            for chunk in chunks:
                rows.extend(_run_rollouts(self.adapter, chunk, self.channels, self._length))
                self._bar.advance(self._task, len(chunk))
        else:
            futures = [self._pool.submit(_run_rollouts, self.adapter, c, self.channels,
                                         self._length) for c in chunks]
            for chunk, fut in zip(chunks, futures, strict=True):
                rows.extend(fut.result())
                self._bar.advance(self._task, len(chunk))
        self.rollouts += len(reqs)
        shape = (len(candidates), len(self.scenarios), self.n_seeds)
        feats = np.asarray(rows).reshape(*shape, -1)
        return ReplayBatch(feats, feats[..., -1] > 0.5)

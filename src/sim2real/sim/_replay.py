"""Replays of real episodes in sim, and how far each real episode is from its replays.

A *scenario* is what a real episode gives a replay: its context, its initial state (read
by the adapter), its sample rate and, for open-loop adapters, its recorded commands. A
replay batch runs every (candidate parameters, scenario, seed) triple over worker
processes and keeps only a compact summary of each rollout, so little crosses processes.

The comparison works on per-episode summaries of each shared channel (mean, spread,
extremes, duration and outcome), standardised by how much the dataset's own simulation
rollouts vary: a *replay drift* of about 1 means "as far from its replays as domain-
randomised rollouts are from each other", the same yardstick as the analysis' drift score.
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

__all__ = ["ReplayBatch", "ReplayRunner", "Scenario", "load_scenarios", "replay_drift",
           "replay_scores"]

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
    """

    episode_id: str
    context: dict[str, object]
    init_state: dict[str, float]
    rate_hz: float
    commands: pa.Table | None
    real: np.ndarray
    real_failed: bool


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


def load_scenarios(ds: Dataset, episode_ids: Sequence[str], adapter: SimulatorAdapter,
                   channels: Sequence[str]) -> list[Scenario]:
    """The scenarios of real episodes, in the given order.

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
    out = []
    for episode_id in episode_ids:
        row = rows[episode_id]
        table = signals.filter(pc.equal(signals["episode_id"], episode_id)).sort_by("t")
        context = {k[4:]: v for k, v in row.items() if k.startswith("ctx.") and v is not None}
        t = np.asarray(table["t"].to_numpy(zero_copy_only=False), dtype=float)
        rate = 1.0 / float(np.median(np.diff(t))) if t.size > 1 else 50.0
        commands = None
        if adapter.command_channels:
            commands = table.select(["t", *adapter.command_channels])
        failed = row.get("outcome") == "failure"
        out.append(Scenario(episode_id, context, adapter.initial_state(row, table), rate,
                            commands, summarise(table, channels, failed), failed))
    return out


def sim_channels_and_scales(ds: Dataset, seed: int) -> tuple[list[str], np.ndarray]:
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
    feats = np.asarray(rows)
    scale = np.nanstd(feats, axis=0)
    # A feature that never varies in sim would blow any tiny real difference up.
    floor = 0.05 * np.nanmedian(np.abs(feats), axis=0) + 1e-6
    scale = np.fmax(np.nan_to_num(scale), np.nan_to_num(floor, nan=1e-6))
    scale[-1] = _OUTCOME_SCALE
    return channels, scale


def _rms(a: np.ndarray, b: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """RMS clipped standardised gap over the last axis (features missing on a side skipped)."""
    z = np.clip((a - b) / scale, -_CLIP_Z, _CLIP_Z)
    return np.sqrt(np.nanmean(z**2, axis=-1))


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


def _run_rollouts(adapter: SimulatorAdapter, requests: Sequence[RolloutRequest],
                  channels: Sequence[str]) -> list[np.ndarray]:
    out = []
    for req in requests:
        try:
            res = adapter.rollout(req)
        except Exception as err:  # a simulator may raise anything; name the rollout
            msg = f"simulator adapter {adapter.name!r} failed on {dict(req.params)}: {err}"
            raise SimulatorError(msg) from err
        out.append(summarise(res.telemetry, channels, res.outcome == "failure"))
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
        self._bar.stop()
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)

    def seed_of(self, scenario: Scenario, k: int) -> int:
        return zlib.crc32(f"{scenario.episode_id}/{k}".encode()) & 0x7FFFFFFF

    def requests(self, params: Mapping[str, float]) -> Iterator[RolloutRequest]:
        for s in self.scenarios:
            for k in range(self.n_seeds):
                yield RolloutRequest(dict(params), s.context, s.init_state, self.seed_of(s, k),
                                     s.rate_hz, s.commands)

    def run(self, candidates: Sequence[Mapping[str, float]]) -> ReplayBatch:
        """Replay every scenario with every candidate's parameter values."""
        reqs = [r for c in candidates for r in self.requests(c)]
        chunks = [reqs[i:i + _CHUNK] for i in range(0, len(reqs), _CHUNK)]
        rows: list[np.ndarray] = []
        if self._pool is None:
            for chunk in chunks:
                rows.extend(_run_rollouts(self.adapter, chunk, self.channels))
                self._bar.advance(self._task, len(chunk))
        else:
            futures = [self._pool.submit(_run_rollouts, self.adapter, c, self.channels)
                       for c in chunks]
            for chunk, fut in zip(chunks, futures, strict=True):
                rows.extend(fut.result())
                self._bar.advance(self._task, len(chunk))
        self.rollouts += len(reqs)
        shape = (len(candidates), len(self.scenarios), self.n_seeds)
        feats = np.asarray(rows).reshape(*shape, -1)
        return ReplayBatch(feats, feats[..., -1] > 0.5)

"""The counterfactual check: does a proposed sim update really explain a cluster?

Replay the cluster's real failures in sim twice, at the current values and with the
proposed update, on the same seeds. An update explains the cluster when the replays now
fail as the real episodes did and the replay drift of the cluster's events falls; one
that leaves the replays succeeding does not explain it, whatever else it changes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sim2real.dataset import Dataset, load_dataset
from sim2real.errors import UsageError
from sim2real.sim._replay import ReplayRunner, load_scenarios, replay_drift, sim_channels_and_scales
from sim2real.sim._target import resolve_target
from sim2real.sim.adapter import SimulatorAdapter, load_adapter

__all__ = ["CHECK_JSON", "Check", "check", "check_evidence"]

CHECK_JSON = "check.json"
_MIN_RATE = 0.5  # replays must fail at least this share of the real failure rate
_MIN_GAIN = 0.2  # ...and this much more often than at the current values


@dataclass(frozen=True)
class Check:
    """The result of :func:`check`, written as ``check.json``.

    Attributes:
        reproduces: whether the update makes sim reproduce the cluster's failures.
        failure_rate_real: share of the replayed real episodes that failed (1 for a
            cluster of failures).
        failure_rate_before / failure_rate_after: share of replays that fail at the
            current values / with the update.
        drift_before / drift_after: mean replay drift of the events (about 1: as far from
            their replays as sim rollouts are from each other).
        drift_fall: ``1 - drift_after / drift_before``.
        per_event: episode ID -> failure rates and drifts before and after.
        verdict: one sentence saying what the evidence means.
    """

    cluster_id: str | None
    adapter: str
    update: dict[str, float]
    baseline: dict[str, float]
    episodes: list[str]
    seeds: int
    reproduces: bool
    failure_rate_real: float
    failure_rate_before: float
    failure_rate_after: float
    drift_before: float
    drift_after: float
    drift_fall: float
    verdict: str
    rollouts: int
    wall_s: float
    per_event: dict[str, dict[str, float]] = field(default_factory=dict)
    schema_version: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check(
    dataset: str | Path | Dataset,
    update: Mapping[str, float],
    *,
    cluster: str | None = None,
    episodes: Sequence[str] | None = None,
    run: str | Path | None = None,
    baseline: Mapping[str, float] | None = None,
    adapter: str | SimulatorAdapter = "demo",
    seeds: int = 3,
    max_episodes: int = 12,
    seed: int = 0,
    workers: int | None = None,
    progress: bool = False,
) -> Check:
    """Replay a cluster's real failures with and without a proposed parameter update.

    Args:
        dataset: the dataset folder (or loaded dataset) the cluster came from.
        update: parameter -> proposed value (``param.`` prefix optional).
        cluster: the cluster ID; its events come from ``run`` or a fresh analysis.
        episodes: real episode IDs to replay instead of (or within) the cluster.
        run: an ``analyze`` output folder holding ``report.json``.
        baseline: the current values; default the dataset's nominal values.
        adapter: an adapter name, ``module:Class`` or instance.
        seeds: replays per episode and setting.
        max_episodes: replay at most this many of the cluster's events.
        seed: chooses the episodes of a bigger cluster.
        workers: rollout processes (all cores by default).
        progress: show a progress bar on stderr.

    Raises:
        UsageError: an empty update or a parameter the dataset does not have.
        SimulatorError: the adapter cannot be loaded or a rollout fails.
    """
    start = time.perf_counter()
    ds = dataset if isinstance(dataset, Dataset) else load_dataset(dataset)
    if not update:
        raise UsageError("give the proposed update, e.g. --set param.friction=0.35")
    new = _named(ds, update)
    old = {n: r.nominal for n, r in ds.params.items()} | _named(ds, baseline or {})
    sim = load_adapter(adapter)
    target = resolve_target(ds, cluster=cluster, episodes=episodes, run=run,
                            max_episodes=max_episodes, seed=seed, progress=progress)
    channels, scale = sim_channels_and_scales(ds, seed)
    scenarios = load_scenarios(ds, target.episodes, sim, channels)
    with ReplayRunner(sim, scenarios, channels, seeds, workers=workers, progress=progress,
                      total=2 * len(scenarios) * seeds, label="counterfactual replays") as runner:
        batch = runner.run([old, old | new])
        rollouts = runner.rollouts
    drift = replay_drift(scenarios, batch, scale)  # (2, n_scenarios)
    rates = batch.failed.mean(axis=2)  # (2, n_scenarios)
    real_rate = float(np.mean([s.real_failed for s in scenarios]))
    before, after = float(rates[0].mean()), float(rates[1].mean())
    d0, d1 = float(drift[0].mean()), float(drift[1].mean())
    fall = 1.0 - d1 / d0 if d0 > 0 else 0.0
    ok = after >= _MIN_RATE * real_rate and after - before >= _MIN_GAIN and d1 < d0
    per_event = {s.episode_id: {"failure_rate_before": round(float(rates[0, i]), 3),
                                "failure_rate_after": round(float(rates[1, i]), 3),
                                "drift_before": round(float(drift[0, i]), 3),
                                "drift_after": round(float(drift[1, i]), 3)}
                 for i, s in enumerate(scenarios)}
    return Check(target.cluster_id, sim.name, new, {k: old[k] for k in new}, list(target.episodes),
                 seeds, ok, round(real_rate, 3), round(before, 3), round(after, 3), round(d0, 4),
                 round(d1, 4), round(fall, 4), _verdict(ok, new, before, after, fall),
                 rollouts, round(time.perf_counter() - start, 2), per_event)


def _named(ds: Dataset, values: Mapping[str, float]) -> dict[str, float]:
    out = {}
    for name, value in values.items():
        key = name.removeprefix("param.")
        if key not in ds.params:
            known = ", ".join(f"param.{p}" for p in ds.params) or "none"
            msg = f"{ds.root}: no simulation parameter {name!r}; the dataset's: {known}"
            raise UsageError(msg)
        out[key] = float(value)
    return out


def _verdict(ok: bool, update: Mapping[str, float], before: float, after: float,
             fall: float) -> str:
    what = ", ".join(f"param.{k}={v:g}" for k, v in update.items())
    rates = f"replays fail {after:.0%} of the time with it, {before:.0%} without"
    if ok:
        return (f"reproduces: with {what} sim fails as reality did ({rates}) and the "
                f"events' replay drift falls {fall:.0%}; the update explains the cluster")
    return (f"does not reproduce: with {what} {rates}, replay drift change {-fall:+.0%}; "
            "this update does not explain the cluster")


def check_evidence(run_dir: str | Path) -> dict[str, str]:
    """The counterfactual evidence beside a report: cluster ID -> one line per check.

    Reads every ``check.json`` in ``run_dir`` and its direct subfolders (``sim2real check
    -o RUN/checks/friction`` keeps several), for the report's actions' ``evidence``.
    """
    root = Path(run_dir)
    found: dict[str, list[str]] = {}
    for path in sorted([root / CHECK_JSON, *root.glob(f"*/{CHECK_JSON}")]):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        cluster = data.get("cluster_id")
        if isinstance(cluster, str) and isinstance(data.get("verdict"), str):
            found.setdefault(cluster, []).append("counterfactual check: " + data["verdict"])
    return {c: " ".join(lines) for c, lines in found.items()}

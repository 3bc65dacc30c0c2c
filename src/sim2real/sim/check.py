"""The counterfactual check: does a proposed sim update really explain a cluster?

Replay the cluster's real episodes in sim twice, at the current values and with the
proposed update, on the same seeds. The update explains the cluster when two tests agree:

- **the outcome is reproduced**: the replays' failure share under the update is
  consistent with the real episodes' (Fisher's exact test on the two sets of counts does
  not tell them apart; the replays' exact interval is reported beside it);
- **the drift falls**: the replays' drift under the update is significantly lower than at
  the current values (a one-sided Wilcoxon signed-rank test over the replays paired by
  episode and seed; at least five replays are needed for significance at 0.05).

How much more often the replays fail than at the current values is reported, not required:
a sim that already fails most replays at the current values (80 % where reality failed
every time) cannot gain much, and the true parameters must still pass. Every threshold is a
p-value on integer counts or paired scores, never a difference of rates compared as floats.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from sim2real.dataset import Dataset, load_dataset
from sim2real.errors import UsageError
from sim2real.report.model import ReportModel
from sim2real.sim._replay import (
    ReplayRunner,
    load_scenarios,
    replay_scores,
    sim_channels_and_scales,
)
from sim2real.sim._target import resolve_target
from sim2real.sim.adapter import SimulatorAdapter, is_deterministic, load_adapter

__all__ = ["CHECK_JSON", "Check", "check", "check_evidence"]

CHECK_JSON = "check.json"
ALPHA = 0.05  # the level of both tests
_MIN_PAIRS = 5  # the fewest paired replays whose signed-rank test can reach ALPHA


@dataclass(frozen=True)
class Check:
    """The result of :func:`check`, written as ``check.json``.

    Attributes:
        reproduces: whether the update explains the events: ``outcome_reproduced`` and
            ``drift_falls`` both hold.
        failures_real / episodes_real: how many of the replayed real episodes failed.
        failures_after / replays: how many replays failed with the update, of how many.
        failure_rate_real: ``failures_real / episodes_real``.
        failure_rate_before / failure_rate_after: share of replays that fail at the
            current values / with the update.
        failure_rate_after_low / failure_rate_after_high: the exact (Clopper-Pearson) 95 %
            interval of ``failure_rate_after``.
        outcome_p_value: Fisher's exact test, real counts against the update's replays;
            ``outcome_reproduced`` when it is at least ``alpha``.
        drift_before / drift_after: mean replay drift of the events (about 1: as far from
            their replays as sim rollouts are from each other).
        drift_fall: ``1 - drift_after / drift_before``.
        drift_p_value: one-sided Wilcoxon signed-rank test that the drift falls, replays
            paired by episode and seed; ``drift_falls`` when it is below ``alpha``.
        failure_gain: ``failure_rate_after - failure_rate_before`` (reported, not required).
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
    outcome_reproduced: bool
    drift_falls: bool
    failures_real: int
    episodes_real: int
    failures_before: int
    failures_after: int
    replays: int
    failure_rate_real: float
    failure_rate_before: float
    failure_rate_after: float
    failure_rate_after_low: float
    failure_rate_after_high: float
    failure_gain: float
    outcome_p_value: float
    drift_before: float
    drift_after: float
    drift_fall: float
    drift_p_value: float
    alpha: float
    verdict: str
    rollouts: int
    wall_s: float
    per_event: dict[str, dict[str, float]] = field(default_factory=dict)
    schema_version: int = 2

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check(
    dataset: str | Path | Dataset,
    update: Mapping[str, float],
    *,
    cluster: str | None = None,
    episodes: Sequence[str] | None = None,
    run: str | Path | ReportModel | None = None,
    baseline: Mapping[str, float] | None = None,
    adapter: str | SimulatorAdapter = "demo",
    adapter_options: Mapping[str, object] | None = None,
    seeds: int = 3,
    max_episodes: int = 12,
    seed: int = 0,
    workers: int | None = None,
    progress: bool = False,
) -> Check:
    """Replay a cluster's real episodes with and without a proposed parameter update.

    Args:
        dataset: the dataset folder (or loaded dataset) the cluster came from.
        update: parameter -> proposed value (``param.`` prefix optional).
        cluster: the cluster ID; its events come from ``run`` or a fresh analysis.
        episodes: real episode IDs to replay instead of (or within) the cluster.
        run: an ``analyze`` output folder holding ``report.json``, or its report.
        baseline: the current values; default the dataset's nominal values.
        adapter: an adapter name, ``module:Class`` or instance.
        adapter_options: keyword arguments for the adapter's constructor.
        seeds: replays per episode and setting (1 for a deterministic adapter).
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
    sim = load_adapter(adapter, adapter_options)
    seeds = 1 if is_deterministic(sim) else seeds
    target = resolve_target(ds, cluster=cluster, episodes=episodes, run=run,
                            max_episodes=max_episodes, seed=seed, progress=progress)
    yard = sim_channels_and_scales(ds, seed)
    scenarios = load_scenarios(ds, target.episodes, sim, yard.channels)
    scale = yard.scale(scenarios)
    with ReplayRunner(sim, scenarios, yard.channels, seeds, workers=workers, progress=progress,
                      total=2 * len(scenarios) * seeds, label="counterfactual replays") as runner:
        batch = runner.run([old, old | new])
        rollouts = runner.rollouts
    scores = replay_scores(scenarios, batch, scale)  # (2, n_scenarios, seeds)
    drift = scores.mean(axis=2)
    rates = batch.failed.mean(axis=2)
    k_real = sum(s.real_failed for s in scenarios)
    n_real, n_rep = len(scenarios), int(batch.failed[1].size)
    k_before, k_after = int(batch.failed[0].sum()), int(batch.failed[1].sum())
    p_outcome = float(stats.fisher_exact([[k_real, n_real - k_real],
                                          [k_after, n_rep - k_after]]).pvalue)
    ci = stats.binomtest(k_after, n_rep).proportion_ci(0.95, method="exact")
    p_drift = _paired_fall_p((scores[0] - scores[1]).ravel())
    d0, d1 = float(drift[0].mean()), float(drift[1].mean())
    fall = 1.0 - d1 / d0 if d0 > 0 else 0.0
    reproduced, falls = p_outcome >= ALPHA, p_drift < ALPHA
    per_event = {s.episode_id: {"failure_rate_before": round(float(rates[0, i]), 3),
                                "failure_rate_after": round(float(rates[1, i]), 3),
                                "drift_before": round(float(drift[0, i]), 3),
                                "drift_after": round(float(drift[1, i]), 3)}
                 for i, s in enumerate(scenarios)}
    after = k_after / n_rep
    return Check(
        cluster_id=target.cluster_id, adapter=sim.name, update=new,
        baseline={k: old[k] for k in new}, episodes=list(target.episodes), seeds=seeds,
        reproduces=reproduced and falls, outcome_reproduced=reproduced, drift_falls=falls,
        failures_real=k_real, episodes_real=n_real, failures_before=k_before,
        failures_after=k_after, replays=n_rep, failure_rate_real=round(k_real / n_real, 3),
        failure_rate_before=round(k_before / n_rep, 3), failure_rate_after=round(after, 3),
        failure_rate_after_low=round(float(ci.low), 3),
        failure_rate_after_high=round(float(ci.high), 3),
        failure_gain=round((k_after - k_before) / n_rep, 3),
        outcome_p_value=_p(p_outcome), drift_before=round(d0, 4), drift_after=round(d1, 4),
        drift_fall=round(fall, 4), drift_p_value=_p(p_drift), alpha=ALPHA,
        verdict=_verdict(new, reproduced, falls, k_real, n_real, k_after, n_rep, k_before,
                         fall),
        rollouts=rollouts, wall_s=round(time.perf_counter() - start, 2), per_event=per_event)


def _paired_fall_p(diff: np.ndarray) -> float:
    """One-sided Wilcoxon signed-rank p-value that paired differences (before - after) are
    positive. Rank-based: one episode whose drift collapses does not drown the others, as
    it would a t-test's variance; five replays that all improve are needed to reach 0.05."""
    diff = diff[np.isfinite(diff)]
    if not np.any(diff):
        return 1.0
    return float(stats.wilcoxon(diff, alternative="greater").pvalue)


def _p(p: float) -> float:
    return float(f"{p:.3g}")


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


def _verdict(update: Mapping[str, float], reproduced: bool, falls: bool, k_real: int,
             n_real: int, k_after: int, n_rep: int, k_before: int, fall: float) -> str:
    what = ", ".join(f"param.{k}={v:g}" for k, v in update.items())
    counts = (f"replays fail {k_after} of {n_rep} with it ({k_before} without), reality "
              f"{k_real} of {n_real}")
    drift = f"replay drift {'falls' if fall >= 0 else 'rises'} {abs(fall):.0%}"
    if reproduced and falls:
        return (f"reproduces: with {what} {counts}, and the events' {drift}; the update "
                "explains the cluster")
    why = []
    if not reproduced:
        why.append("the replays' outcomes do not match reality's")
    if not falls:
        why.append("the drift does not fall significantly"
                   + (f" (only {n_rep} replays: give 5 or more episodes or seeds)"
                      if n_rep < _MIN_PAIRS else ""))
    return (f"does not reproduce: with {what} {counts}, {drift}; {' and '.join(why)}: "
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

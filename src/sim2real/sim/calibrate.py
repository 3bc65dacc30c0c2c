"""Real-to-sim calibration: the parameter values under which sim reproduces a cluster.

For a cluster's real episodes, replay their initial states (and recorded commands, where
the adapter replays open-loop) in sim and minimise the mean replay drift (see
:mod:`sim2real.sim._replay`) over the chosen parameters with CMA-ES. Several independent
fits from different starts give the uncertainty together with the spread of each fit's
final population; fits that disagree, or a discrepancy that stays flat when a parameter
moves, mean the data cannot pin that parameter down, and the result says so.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sim2real._optional import require
from sim2real.dataset import Dataset, load_dataset
from sim2real.dataset.schema import ParamRange
from sim2real.errors import UsageError
from sim2real.sim._replay import (
    ReplayRunner,
    load_scenarios,
    replay_drift,
    sim_channels_and_scales,
)
from sim2real.sim._space import SearchSpace
from sim2real.sim._target import resolve_target
from sim2real.sim.adapter import SimulatorAdapter, load_adapter

__all__ = ["Calibration", "CalibrationConfig", "ParamFit", "calibrate"]

_DISAGREE = 0.25  # fits further apart than this (range units) disagree
_PROBE = 0.35  # range units a parameter is moved to test for a flat discrepancy
_FLAT = 0.03  # relative rise of the discrepancy below which it counts as flat
_DEFAULT_PARAMS = 2  # parameters fitted when neither the user nor a report names them


@dataclass(frozen=True)
class CalibrationConfig:
    """The search budget: ``restarts * generations * popsize`` candidates, each replaying
    ``max_episodes`` episodes ``seeds`` times.

    Attributes:
        popsize: CMA-ES population per generation.
        generations: generations per fit, the first being the scan.
        restarts: independent fits, each a scan of the search box then CMA-ES from its
            best point; their spread is part of the uncertainty.
        max_episodes: real episodes replayed (a seeded subset of a bigger cluster).
        seeds: replays per episode and candidate (sensor noise seeds).
        widen: how far beyond the randomisation range to search (see ``SearchSpace``).
        sigma0: initial step size, in randomisation-range units.
        seed: every random choice derives from it.
    """

    popsize: int = 8
    generations: int = 8
    restarts: int = 2
    max_episodes: int = 6
    seeds: int = 2
    widen: float = 4.0
    sigma0: float = 0.6
    seed: int = 0


@dataclass(frozen=True)
class ParamFit:
    """One fitted parameter (values in the parameter's own units)."""

    param: str
    sim_low: float
    sim_high: float
    sim_nominal: float
    search_low: float
    search_high: float
    fitted: float
    std: float
    fits: list[float]
    outside_range: bool
    identifiable: bool
    note: str | None = None


@dataclass(frozen=True)
class Calibration:
    """The result of :func:`calibrate`, written as ``calibration.json``."""

    cluster_id: str | None
    adapter: str
    episodes: list[str]
    params: list[ParamFit]
    discrepancy_before: float
    discrepancy_after: float
    rollouts: int
    wall_s: float
    config: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    schema_version: int = 1

    @property
    def fitted(self) -> dict[str, float]:
        return {p.param: p.fitted for p in self.params}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def calibrate(
    dataset: str | Path | Dataset,
    *,
    cluster: str | None = None,
    episodes: Sequence[str] | None = None,
    run: str | Path | None = None,
    params: Sequence[str] | None = None,
    adapter: str | SimulatorAdapter = "demo",
    adapter_options: Mapping[str, object] | None = None,
    config: CalibrationConfig | None = None,
    workers: int | None = None,
    progress: bool = False,
) -> Calibration:
    """Fit simulation parameters so that sim reproduces a cluster's real episodes.

    Args:
        dataset: the dataset folder (or loaded dataset) the cluster came from.
        cluster: the cluster ID; its events are taken from ``run`` or a fresh analysis.
        episodes: real episode IDs to replay instead of (or within) the cluster.
        run: an ``analyze`` output folder holding ``report.json``.
        params: parameters to fit (without ``param.``); default: the report's most
            shifted ``sim_params``, else the first two of the dataset.
        adapter: an adapter name, ``module:Class`` or instance.
        adapter_options: keyword arguments for the adapter's constructor.
        config: the search budget.
        workers: rollout processes (all cores by default).
        progress: show a progress bar on stderr.

    Returns:
        The fitted values with their uncertainty and the discrepancy before and after.

    Raises:
        UsageError: no episodes to replay, or a parameter the dataset has no range for.
        SimulatorError: the adapter cannot be loaded or a rollout fails.
    """
    start = time.perf_counter()
    cfg = config or CalibrationConfig()
    ds = dataset if isinstance(dataset, Dataset) else load_dataset(dataset)
    sim = load_adapter(adapter, adapter_options)
    target = resolve_target(ds, cluster=cluster, episodes=episodes, run=run,
                            max_episodes=cfg.max_episodes, seed=cfg.seed, progress=progress)
    names = _param_names(ds, params, target.suggested)
    space = SearchSpace(tuple(ds.params[n] for n in names), cfg.widen)
    channels, scale = sim_channels_and_scales(ds, cfg.seed)
    scenarios = load_scenarios(ds, target.episodes, sim, channels)
    base = {n: r.nominal for n, r in ds.params.items()}
    per_candidate = len(scenarios) * cfg.seeds
    total = per_candidate * (cfg.restarts * (cfg.generations * cfg.popsize + 2) + 1
                             + 2 * len(names))
    with ReplayRunner(sim, scenarios, channels, cfg.seeds, workers=workers, progress=progress,
                      total=total, label="calibration replays") as runner:
        def objective(xs: Sequence[np.ndarray]) -> np.ndarray:
            batch = runner.run([base | space.values(x) for x in xs])
            return replay_drift(scenarios, batch, scale).mean(axis=1)

        raw = [_fit(objective, space, cfg, r) for r in range(cfg.restarts)]
        # Each fit offers its final mean and its best candidate; on a cliff-edged
        # discrepancy either may be the better one, so both are replayed once more.
        offers = [np.zeros(len(names))] + [x for f in raw for x in (f[0], f[2])]
        d_offers = objective(offers)
        fits = []
        for r, f in enumerate(raw):
            pick = int(np.argmin(d_offers[1 + 2 * r:3 + 2 * r]))
            fits.append((f[2] if pick else f[0], f[1], float(d_offers[1 + 2 * r + pick])))
        best = min(fits, key=lambda f: f[2])
        x_fit, d_before, d_after = best[0], float(d_offers[0]), best[2]
        lo, hi = space.bounds()
        probes = []  # each parameter moved below and above the fit
        for i in range(len(names)):
            for step in (-_PROBE, _PROBE):
                p = x_fit.copy()
                p[i] = float(np.clip(p[i] + step, lo[i], hi[i]))
                probes.append(p)
        d_probe = objective(probes)
        results = _param_fits(space, fits, x_fit, d_after, d_probe)
        rollouts = runner.rollouts
    notes = [f"{p.param}: {p.note}" for p in results if p.note]
    if d_after >= d_before:
        notes.append("the fit did not reduce the discrepancy: the chosen parameters do not "
                     "explain these episodes, or the budget is too small")
    return Calibration(target.cluster_id, sim.name, list(target.episodes), results,
                       round(d_before, 4), round(d_after, 4), rollouts,
                       round(time.perf_counter() - start, 2), asdict(cfg) | {"params": names},
                       notes)


def _param_names(ds: Dataset, params: Sequence[str] | None, suggested: Sequence[str]
                 ) -> list[str]:
    names = [p.removeprefix("param.") for p in params] if params else []
    if not names:
        names = [p for p in suggested if p in ds.params][:_DEFAULT_PARAMS]
    if not names:
        names = list(ds.params)[:_DEFAULT_PARAMS]
    unknown = [n for n in names if n not in ds.params]
    if unknown or not names:
        known = ", ".join(ds.params) or "none"
        msg = (f"{ds.root}: no randomisation range for parameter(s) {', '.join(unknown)}; "
               f"the dataset's parameters: {known}")
        raise UsageError(msg)
    return names


def _fit(objective: Any, space: SearchSpace, cfg: CalibrationConfig, restart: int
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One fit: a space-filling scan of the search box, then CMA-ES from its best point.

    Returns the final distribution mean, its per-coordinate spread and the best candidate
    seen (the scan's included). The scan (one
    generation's worth of a Latin hypercube) is there because reality's value is often
    far outside the randomisation range, behind a plateau where the discrepancy does not
    change (a grip that holds whatever the friction, until it slips): CMA-ES started at
    nominal would never see past it.
    """
    n = len(space.ranges)
    rng = np.random.default_rng([cfg.seed, restart])
    lo, hi = np.array(space.bounds()[0]), np.array(space.bounds()[1])
    cells = (rng.permuted(np.tile(np.arange(cfg.popsize), (n, 1)), axis=1).T
             + rng.uniform(size=(cfg.popsize, n))) / cfg.popsize
    scan = lo + cells * (hi - lo)
    if restart == 0:
        scan[0] = 0.0  # nominal is always a candidate: no fit ends worse than no change
    f_scan = objective(list(scan))
    x0 = scan[int(np.argmin(f_scan))]
    # pycma needs two dimensions at least: a lone parameter gets a phantom partner that the
    # objective never reads.
    pad = 1 if n == 1 else 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cma warns that matplotlib is missing: we never plot
        cma = require("cma", "calibrate")
    es = cma.CMAEvolutionStrategy(
        list(x0) + [0.0] * pad, cfg.sigma0,
        {"bounds": [list(lo) + [-1.0] * pad, list(hi) + [1.0] * pad], "popsize": cfg.popsize,
         "seed": cfg.seed * 1000 + restart + 1, "verbose": -9})
    best, f_best = x0, float(np.min(f_scan))
    for _ in range(max(cfg.generations - 1, 1)):
        xs = es.ask()
        f = objective([np.asarray(x[:n]) for x in xs])
        es.tell(xs, list(f))
        if float(np.min(f)) < f_best:
            best, f_best = np.asarray(xs[int(np.argmin(f))][:n]), float(np.min(f))
    res = es.result
    return np.asarray(res.xfavorite[:n]), np.asarray(res.stds[:n]), np.asarray(best)


def _param_fits(space: SearchSpace, fits: Sequence[tuple[np.ndarray, np.ndarray, float]],
                x_fit: np.ndarray, d_fit: float, d_probe: np.ndarray) -> list[ParamFit]:
    """Per parameter: value, uncertainty (population and between-fit spread), flags."""
    lo, hi = space.bounds()
    out = []
    for i, r in enumerate(space.ranges):
        xs = np.array([f[0][i] for f in fits])
        pop = float(np.sqrt(np.mean([f[1][i] ** 2 for f in fits])))
        x_std = float(np.sqrt(pop**2 + (xs.var(ddof=1) if xs.size > 1 else 0.0)))
        rises = (float(d_probe[2 * i] - d_fit), float(d_probe[2 * i + 1] - d_fit))
        tol = _FLAT * max(d_fit, 1e-9)
        notes, bound = [], None
        if xs.size > 1 and float(np.ptp(xs)) > _DISAGREE:
            notes.append("independent fits disagree")
        if max(rises) < tol:
            notes.append("the discrepancy is flat along it")
        elif min(rises) < tol:
            side = "below" if rises[0] < tol else "above"
            bound = f"the discrepancy stays flat {side} the fit: the data bound it on one side only"
        value = space.value(r, float(x_fit[i]))
        out.append(ParamFit(
            param=r.name, sim_low=r.low, sim_high=r.high, sim_nominal=r.nominal,
            search_low=_r(space.value(r, lo[i])), search_high=_r(space.value(r, hi[i])),
            fitted=_r(value), std=_r(space.value_std(r, float(x_fit[i]), x_std)),
            fits=[_r(space.value(r, float(x))) for x in xs],
            outside_range=not r.low <= value <= r.high, identifiable=not notes,
            note=("not identifiable: " + " and ".join(notes)) if notes else bound))
    return out


def _r(v: float) -> float:
    return float(f"{v:.4g}")


def param_range(ds: Dataset, name: str) -> ParamRange:
    """The dataset's range of ``name`` (``param.`` prefix optional).

    Raises:
        UsageError: the dataset has no such parameter.
    """
    key = name.removeprefix("param.")
    if key not in ds.params:
        msg = f"{ds.root}: no parameter {key!r}; the dataset's parameters: {', '.join(ds.params)}"
        raise UsageError(msg)
    return ds.params[key]

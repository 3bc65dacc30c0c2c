"""Real-to-sim calibration: the parameter values under which sim reproduces a cluster.

For a cluster's real episodes, replay their initial states (and recorded commands, where
the adapter replays open-loop) in sim and minimise the mean replay drift (see
:mod:`sim2real.sim._replay`) over the chosen parameters with CMA-ES, each fit finished by
a least-squares polish where one replay per episode is compared sample by sample. The
budget counts candidate evaluations: one candidate is every chosen episode replayed on
every seed.

The result says how far to trust each value, and what to do when not:

- **uncertainty**: the local curvature of the discrepancy at the fit (how far the
  parameter moves before the discrepancy rises by one standard error of the episodes'
  paired changes), combined with the spread between independent fits (restarts); with a
  single restart the between-fit spread is not estimated and the result says so;
- **convergence**: the restarts agree and the discrepancy stopped falling; fits that
  disagree while one ends clearly worse mean the budget ran out (raise it), not that the
  data are silent;
- **identifiability**: the discrepancy is flat along the parameter at the fit, or fits
  far apart explain the data equally well (add episodes that tell them apart);
- **the search box**: a fit on its edge may have the truth beyond it (widen the search).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sim2real._optional import require
from sim2real.dataset import Dataset, load_dataset
from sim2real.dataset.schema import ParamRange
from sim2real.errors import UsageError
from sim2real.report.model import ReportModel
from sim2real.sim._replay import (
    ReplayRunner,
    load_scenarios,
    replay_drift,
    replay_residuals,
    resolve_objective,
    sim_channels_and_scales,
)
from sim2real.sim._space import SearchSpace
from sim2real.sim._target import resolve_target
from sim2real.sim.adapter import SimulatorAdapter, is_deterministic, load_adapter

__all__ = ["Calibration", "CalibrationConfig", "ParamFit", "Plan", "calibrate", "plan",
           "screening_cost"]

_DISAGREE = 0.25  # fits further apart than this (range units) disagree
_PROBE = 0.35  # range units a parameter is moved to measure the curvature
# A change of the discrepancy below this share of its value at nominal counts as none: the
# yardstick is what the fit has to explain, whatever the objective's own scale.
_FLAT = 0.03
_EDGE = 0.03  # a fit within this share of the search box's width from a bound is on its edge
_DEFAULT_PARAMS = 2  # parameters fitted when neither the user nor a report names them
_SCREEN = (-1.0, -0.5, 0.5, 1.0)  # where each parameter is tried alone, in box half-widths
# Generations per fit (the scan included) per parameter, plus a base, before a second
# restart is worth its share of the budget: a fit cut shorter stops before it converges,
# and two unconverged fits only disagree (4 parameters, 16 generations: budget 269+).
_GENERATIONS_PER_PARAM, _MIN_GENERATIONS = 3, 4
# With one replay per episode, compared sample by sample, each fit ends with a
# least-squares polish paid from this share of its evaluations, if that buys it
# _MIN_POLISH iterations (Hopper bench, seeds 0-23: shares 0.33 and 0.5 and 1 to 3
# restarts tried; 0.33 with 2 restarts kept).
_POLISH_SHARE, _MIN_POLISH = 0.33, 3
_FD_STEP = 0.01  # forward-difference step of the polish's Jacobian, in range units


@dataclass(frozen=True)
class CalibrationConfig:
    """What a calibration may spend and how it compares.

    Attributes:
        budget: candidate evaluations in all (see :func:`plan`); each replays
            ``max_episodes`` episodes ``seeds`` times.
        restarts: independent fits, each a scan of the search box then CMA-ES from its
            best point; ``None`` chooses 2 where the budget gives each fit at least
            ``4 + 3 * n_params`` generations, else 1.
        max_episodes: real episodes replayed (a seeded subset of a bigger cluster).
        seeds: replays per episode and candidate (sensor noise seeds); 1 for an adapter
            that declares ``deterministic = True``.
        widen: how far beyond the randomisation range to search (see ``SearchSpace``).
        sigma0: initial step size, in randomisation-range units.
        objective: ``summary``, ``trajectory`` or ``auto`` (see :mod:`sim2real.sim._replay`;
            ``auto`` is ``trajectory`` for an open-loop adapter).
        seed: every random choice derives from it.
    """

    budget: int = 120
    restarts: int | None = None
    max_episodes: int = 6
    seeds: int = 2
    widen: float = 4.0
    sigma0: float = 0.6
    objective: str = "auto"
    seed: int = 0


@dataclass(frozen=True)
class Plan:
    """How a budget is spent: ``screening + restarts * (generations * popsize + polish + 2)
    + 1 + 2 * n_params`` candidates (choosing the parameters, when nothing named them; each
    fit's generations, the first being the scan, then its least-squares polish; its mean
    and best re-evaluated; nominal; two curvature probes per parameter)."""

    budget: int
    screening: int
    restarts: int
    popsize: int
    generations: int
    candidates: int
    polish: int = 0


def plan(budget: int, n_params: int, restarts: int | None = None, screening: int = 0,
         polish: bool = False) -> Plan:
    """Split ``budget`` candidate evaluations into restarts, generations and population.

    The population is CMA-ES's default for the dimension; it shrinks (to 4) before a fit
    gets fewer than two generations. ``screening`` evaluations are taken off the top.
    ``polish`` (one replay per episode compared sample by sample, so the discrepancy is a
    smooth sum of squares): each fit ends with a Gauss-Newton refinement paid from
    ``_POLISH_SHARE`` of its evaluations.

    Raises:
        UsageError: the budget cannot pay for two generations of every restart.
    """
    fixed = screening + 1 + 2 * n_params
    popsize = 4 + int(3 * math.log(max(n_params, 2)))
    step = n_params + 1  # a polish iteration: one candidate and its forward differences

    def local(r: int) -> int:
        iterations = int(_POLISH_SHARE * (budget - fixed) / r / step) if polish else 0
        return step * iterations if iterations >= _MIN_POLISH else 0

    def generations(r: int, p: int) -> int:
        return (budget - fixed - r * (2 + local(r))) // (r * p)

    if restarts is None:
        # A polished fit converges on its own, so a second restart buys a second basin and
        # an honest spread between fits as soon as each still gets a short exploration; an
        # unpolished fit needs the generations to converge first.
        enough = _MIN_GENERATIONS + (0 if local(2) else _GENERATIONS_PER_PARAM * n_params)
        restarts = 2 if generations(2, popsize) >= enough else 1
    if restarts < 1:
        raise UsageError(f"--restarts must be at least 1, got {restarts}")
    while generations(restarts, popsize) < 2 and popsize > 4:
        popsize -= 1
    g = generations(restarts, popsize)
    if g < 2:
        need = restarts * (2 * 4 + 2) + fixed
        what = f" (after {screening} evaluations choosing them)" if screening else ""
        msg = (f"--budget {budget} is too small for {n_params} parameter(s){what} and "
               f"{restarts} restart(s): give at least {need} candidate evaluations")
        raise UsageError(msg)
    polish_each = local(restarts)
    return Plan(budget, screening, restarts, popsize, g,
                restarts * (g * popsize + polish_each + 2) + fixed, polish_each)


@dataclass(frozen=True)
class ParamFit:
    """One fitted parameter (values in the parameter's own units).

    Attributes:
        std: the uncertainty: ``std_curvature`` and ``std_between`` combined, as far as
            they are estimated; ``None`` when neither is.
        std_curvature: how far the parameter moves before the discrepancy rises by one
            standard error (``None`` where the discrepancy does not curve up around the fit).
        std_between: the spread of the independent fits (``None`` with one restart).
        fits: each restart's value.
        converged: the restarts agree (``None`` with one restart: not tested).
        identifiable: the data pin it down (the discrepancy is not flat along it, and fits
            that disagree do not explain the data equally well).
        at_edge: the fit lies on the edge of the search box.
        note: what the flags mean and what to do.
    """

    param: str
    sim_low: float
    sim_high: float
    sim_nominal: float
    search_low: float
    search_high: float
    fitted: float
    std: float | None
    std_curvature: float | None
    std_between: float | None
    fits: list[float]
    outside_range: bool
    identifiable: bool
    converged: bool | None
    at_edge: bool
    note: str | None = None


@dataclass(frozen=True)
class Calibration:
    """The result of :func:`calibrate`, written as ``calibration.json``.

    ``plan`` says how the budget was spent (``candidates`` evaluated, each ``seeds``
    replays of every episode, ``screening`` of them spent choosing the parameters;
    ``rollouts`` in all); ``converged`` is false when the discrepancy was still falling at
    the end or fits disagree with one clearly worse. ``screened``: when nothing named the
    parameters, each one's best discrepancy moved alone (the two lowest were fitted).
    """

    cluster_id: str | None
    adapter: str
    episodes: list[str]
    params: list[ParamFit]
    discrepancy_before: float
    discrepancy_after: float
    fit_discrepancies: list[float]
    converged: bool
    objective: str
    seeds: int
    plan: dict[str, int]
    rollouts: int
    wall_s: float
    config: dict[str, Any]
    screened: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    schema_version: int = 2

    @property
    def fitted(self) -> dict[str, float]:
        return {p.param: p.fitted for p in self.params}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Fit:
    """One restart: its chosen point, the discrepancy there (mean and per episode) and the
    best discrepancy after each generation."""

    x: np.ndarray
    d: float
    per_episode: np.ndarray
    history: list[float]


def calibrate(
    dataset: str | Path | Dataset,
    *,
    cluster: str | None = None,
    episodes: Sequence[str] | None = None,
    run: str | Path | ReportModel | None = None,
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
        run: an ``analyze`` output folder holding ``report.json``, or its report.
        params: parameters to fit (without ``param.``); default: the two the report's
            attribution says explain most of the cluster, else the two that, moved alone,
            bring the replays closest to the events (a screening paid from the budget).
        adapter: an adapter name, ``module:Class`` or instance.
        adapter_options: keyword arguments for the adapter's constructor.
        config: the budget and how candidates are compared.
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
    seeds = 1 if is_deterministic(sim) else cfg.seeds
    objective = resolve_objective(cfg.objective, sim)
    # Summary statistics of episodes that end at an event (a fall one sample earlier) are
    # step functions of the parameters, where a local gradient says nothing: the polish
    # needs one replay per episode compared sample by sample.
    polish = seeds == 1 and objective == "trajectory"
    screening = 0 if params else screening_cost(len(ds.params))
    # A budget the fit cannot spend is an error before any work (the analysis included).
    n_default = min(_DEFAULT_PARAMS, len(ds.params))
    plan(cfg.budget, len(params) if params else n_default, cfg.restarts, screening, polish)
    target = resolve_target(ds, cluster=cluster, episodes=episodes, run=run,
                            max_episodes=cfg.max_episodes, seed=cfg.seed, progress=progress)
    names = _param_names(ds, params, target.suggested)
    if names:
        screening = 0
    how = plan(cfg.budget, len(names) or n_default, cfg.restarts, screening, polish)
    yard = sim_channels_and_scales(ds, cfg.seed)
    scenarios = load_scenarios(ds, target.episodes, sim, yard.channels, objective)
    scale = yard.scale(scenarios)
    base = {n: r.nominal for n, r in ds.params.items()}
    with ReplayRunner(sim, scenarios, yard.channels, seeds, workers=workers,
                      progress=progress,
                      total=len(scenarios) * seeds * how.candidates,
                      label="calibration replays") as runner:
        def replays(candidates: Sequence[Mapping[str, float]]) -> np.ndarray:
            return replay_drift(scenarios, runner.run([base | dict(c) for c in candidates]),
                                scale)

        def residuals(xs: Sequence[np.ndarray]) -> np.ndarray:
            batch = runner.run([base | space.values(x) for x in xs])
            return replay_residuals(scenarios, batch, scale)

        screened = {} if names else _screen(replays, ds, cfg.widen)
        names = names or _screened_names(screened)
        space = SearchSpace(tuple(ds.params[n] for n in names), cfg.widen)

        def per_episode(xs: Sequence[np.ndarray]) -> np.ndarray:
            return replays([space.values(x) for x in xs])

        # One replay per episode: the replay drift is a plain distance, and least squares
        # over the episodes guides the search better than their mean distance (Hopper
        # bench: median squared mass error 0.073 against 0.19). With several seeds the
        # energy score stays as it is: squared, it would stop rewarding the right spread.
        power = 2 if seeds == 1 else 1
        raw = [_fit(lambda xs: (per_episode(xs) ** power).mean(axis=1), space, how, cfg, r,
                    residuals if how.polish else None)
               for r in range(how.restarts)]
        # Each fit offers its final mean and its best candidate; on a cliff-edged
        # discrepancy either may be the better one, so both are replayed once more.
        offers = [np.zeros(len(names))] + [x for f in raw for x in f[:2]]
        d_offers = per_episode(offers)
        fits = []
        for r, (mean, best_x, history) in enumerate(raw):
            rows = d_offers[1 + 2 * r:3 + 2 * r]
            pick = int(np.argmin((rows ** power).mean(axis=1)))
            fits.append(_Fit((mean, best_x)[pick], float(rows[pick].mean()), rows[pick],
                             history))
        best = min(fits, key=lambda f: float((f.per_episode ** power).mean()))
        lo, hi = space.bounds()
        probes, steps = [], []  # each parameter moved below and above the fit
        for i in range(len(names)):
            for step in (-_PROBE, _PROBE):
                p = best.x.copy()
                p[i] = float(np.clip(p[i] + step, lo[i], hi[i]))
                probes.append(p)
                steps.append(abs(p[i] - best.x[i]))
        d_probe = per_episode(probes)
        rollouts = runner.rollouts
    d_before = float(d_offers[0].mean())
    tol = _FLAT * max(d_before, 1e-9)
    results = _param_fits(space, fits, best, d_probe, np.array(steps), cfg.widen, tol)
    notes = [f"{p.param}: {p.note}" for p in results if p.note]
    falling = [r + 1 for r, f in enumerate(fits) if _still_falling(f.history, tol)]
    if falling:
        notes.append(f"the discrepancy was still falling when the budget ran out (fit "
                     f"{', '.join(map(str, falling))} of {how.restarts}): not converged; "
                     "raise --budget")
    if how.restarts == 1:
        notes.append("one restart: the spread between independent fits is not estimated, so "
                     "the uncertainty is the local curvature's alone and convergence is "
                     "judged on one fit; give --restarts 2 or a larger --budget")
    if best.d >= d_before:
        notes.append("the fit did not reduce the discrepancy: the chosen parameters do not "
                     "explain these episodes, or the budget is too small")
    converged = not falling and all(p.converged is not False for p in results)
    return Calibration(
        cluster_id=target.cluster_id, adapter=sim.name, episodes=list(target.episodes),
        params=results, discrepancy_before=round(d_before, 4),
        discrepancy_after=round(best.d, 4), fit_discrepancies=[round(f.d, 4) for f in fits],
        converged=converged, objective=objective, seeds=seeds,
        # the polish stops early once converged: the candidates actually evaluated
        plan=asdict(how) | {"candidates": rollouts // (len(scenarios) * seeds)},
        rollouts=rollouts, wall_s=round(time.perf_counter() - start, 2),
        config=asdict(cfg) | {"params": names}, screened=screened, warnings=notes)


def _param_names(ds: Dataset, params: Sequence[str] | None, suggested: Sequence[str]
                 ) -> list[str]:
    """The parameters to fit: those given, else the report's; empty: screen them all.

    Raises:
        UsageError: a given parameter has no randomisation range, or the dataset has none.
    """
    names = [p.removeprefix("param.") for p in params] if params else []
    if not names:
        names = [p for p in suggested if p in ds.params][:_DEFAULT_PARAMS]
    unknown = [n for n in names if n not in ds.params]
    if unknown or not ds.params:
        known = ", ".join(ds.params) or "none"
        msg = (f"{ds.root}: no randomisation range for parameter(s) {', '.join(unknown)}; "
               f"the dataset's parameters: {known}")
        raise UsageError(msg)
    return names


def _screen(replays: Callable[[Sequence[Mapping[str, float]]], np.ndarray], ds: Dataset,
            widen: float) -> dict[str, float]:
    """Each parameter moved alone across its search box: its lowest discrepancy.

    Nothing named the parameters (no ``--param``, and the report's attribution explains
    none), so the replays say which ones matter: moved alone, a parameter that causes the
    events brings the replays closer to them.
    """
    ranges = list(ds.params.values())
    candidates: list[dict[str, float]] = [{}]
    for r in ranges:
        space = SearchSpace((r,), widen)
        (lo,), (hi,) = space.bounds()
        candidates += [space.values([u * (hi if u > 0 else -lo)]) for u in _SCREEN]
    d = replays(candidates).mean(axis=1)
    k = len(_SCREEN)
    return {r.name: round(float(min(d[0], *d[1 + k * i:1 + k * (i + 1)])), 4)
            for i, r in enumerate(ranges)}


def screening_cost(n_params: int) -> int:
    """Candidate evaluations a screening of ``n_params`` parameters takes."""
    return 1 + len(_SCREEN) * n_params


def _screened_names(screened: Mapping[str, float]) -> list[str]:
    return sorted(screened, key=lambda n: screened[n])[:_DEFAULT_PARAMS]


def _fit(objective: Callable[[Sequence[np.ndarray]], np.ndarray], space: SearchSpace,
         how: Plan, cfg: CalibrationConfig, restart: int,
         residuals: Callable[[Sequence[np.ndarray]], np.ndarray] | None = None
         ) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """One fit: a space-filling scan of the search box, CMA-ES from its best point, then
    (given ``residuals``, whose sum of squares is ``objective``) a least-squares polish.

    Returns the final distribution mean, the best candidate seen (the scan's included) and
    the best discrepancy after each generation. The scan (one generation's worth of a
    Latin hypercube) is there because reality's value is often far outside the
    randomisation range, behind a plateau where the discrepancy does not change (a grip
    that holds whatever the friction, until it slips): CMA-ES started at nominal would
    never see past it. The polish is there because near the optimum the discrepancy often
    lies in a narrow valley between parameters that trade against each other (two link
    masses), along which CMA-ES creeps at this budget while a Gauss-Newton step, using the
    replays' residuals rather than their sum, follows it in a few iterations.
    """
    n = len(space.ranges)
    rng = np.random.default_rng([cfg.seed, restart])
    lo, hi = np.array(space.bounds()[0]), np.array(space.bounds()[1])
    cells = (rng.permuted(np.tile(np.arange(how.popsize), (n, 1)), axis=1).T
             + rng.uniform(size=(how.popsize, n))) / how.popsize
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
        {"bounds": [list(lo) + [-1.0] * pad, list(hi) + [1.0] * pad], "popsize": how.popsize,
         "seed": cfg.seed * 1000 + restart + 1, "verbose": -9})
    best, f_best = x0, float(np.min(f_scan))
    history = [f_best]
    for _ in range(how.generations - 1):
        xs = es.ask()
        f = objective([np.asarray(x[:n]) for x in xs])
        es.tell(xs, list(f))
        if float(np.min(f)) < f_best:
            best, f_best = np.asarray(xs[int(np.argmin(f))][:n]), float(np.min(f))
        history.append(f_best)
    if residuals is not None and how.polish:
        best, f_best = _polish(residuals, best, f_best, lo, hi, how.polish, history)
    return np.asarray(es.result.xfavorite[:n]), np.asarray(best), history


def _polish(residuals: Callable[[Sequence[np.ndarray]], np.ndarray], x0: np.ndarray,
            f0: float, lo: np.ndarray, hi: np.ndarray, evaluations: int,
            history: list[float]) -> tuple[np.ndarray, float]:
    """Trust-region least squares (scipy's ``trf``) from ``x0`` within ``evaluations``.

    The Jacobian is a forward difference whose ``n`` shifted candidates are replayed as one
    batch (in parallel), so each iteration costs ``n + 1`` candidates at most. Returns the
    better of ``x0`` and the polished point, and appends the running best to ``history``.
    """
    from scipy.optimize import least_squares  # scipy is slow to import: only when used

    n = x0.size
    seen: dict[bytes, np.ndarray] = {}
    best_x, best_f = x0, f0

    def fun(x: np.ndarray) -> np.ndarray:
        nonlocal best_x, best_f
        key = np.asarray(x, float).tobytes()
        if key not in seen:
            seen[key] = residuals([np.asarray(x, float)])[0]
            f = float(seen[key] @ seen[key])
            if f < best_f:
                best_x, best_f = np.array(x, float), f
            history.append(best_f)
        return seen[key]

    def jac(x: np.ndarray) -> np.ndarray:
        r0 = fun(x)
        h = np.where(x + _FD_STEP <= hi, _FD_STEP, -_FD_STEP)
        rs = residuals(list(x + np.diag(h)))  # row i: x with parameter i shifted
        return ((rs - r0) / h[:, None]).T

    inside = (lo + 1e-9, hi - 1e-9)  # least_squares starts strictly within its bounds
    # At most `k` residual evaluations (the start's included) and `k` Jacobians: the
    # iterations the plan paid for.
    least_squares(fun, np.clip(x0, *inside), jac=jac, bounds=inside, method="trf",
                  max_nfev=evaluations // (n + 1))
    return best_x, best_f


def _still_falling(history: Sequence[float], tol: float) -> bool:
    """Whether the best discrepancy fell by more than ``tol`` over the last third of a fit."""
    back = max(1, len(history) // 3)
    return len(history) > 1 and history[-1 - back] - history[-1] > tol


def _param_fits(space: SearchSpace, fits: Sequence[_Fit], best: _Fit, d_probe: np.ndarray,
                steps: np.ndarray, widen: float, tol: float) -> list[ParamFit]:
    """Per parameter: value, uncertainty (curvature and between fits), flags and advice.

    ``tol``: the smallest change of the discrepancy that counts.
    """
    lo, hi = space.bounds()
    equal = all(f.d - best.d <= tol for f in fits)
    out = []
    for i, r in enumerate(space.ranges):
        x = float(best.x[i])
        xs = np.array([f.x[i] for f in fits])
        diff = d_probe[2 * i:2 * i + 2] - best.per_episode  # (2, n_episodes)
        rises = diff.mean(axis=1)
        n_ep = diff.shape[1]
        noise = float(diff.std(axis=1, ddof=1).mean() / math.sqrt(n_ep)) if n_ep > 1 else tol
        h = steps[2 * i:2 * i + 2]
        curv = (2 * (rises[0] / h[0] + rises[1] / h[1]) / (h[0] + h[1])
                if h.min() > 0 else 0.0)
        s_curv = math.sqrt(2 * max(noise, 1e-12) / curv) if curv > 0 else None
        s_between = float(xs.std(ddof=1)) if xs.size > 1 else None
        parts = [s for s in (s_curv, s_between) if s is not None]
        s_all = math.sqrt(sum(s * s for s in parts)) if parts else None
        disagree = xs.size > 1 and float(np.ptp(xs)) > _DISAGREE
        width = hi[i] - lo[i]
        at_edge = min(x - lo[i], hi[i] - x) < _EDGE * width
        values = ", ".join(f"{space.value(r, float(v)):.4g}" for v in xs)
        notes, identifiable, converged = [], True, None if xs.size < 2 else not disagree
        if float(rises.max()) < tol:
            identifiable = False
            notes.append("not identifiable: the discrepancy is flat along it at the fit; add "
                         "episodes that exercise it, or set it from another measurement")
        elif disagree and equal:
            identifiable, converged = False, True
            notes.append(f"not identifiable: independent fits at {values} explain the data "
                         "equally well; add episodes that tell them apart")
        elif disagree:
            notes.append(f"not converged at this budget: independent fits disagree ({values}) "
                         "and one ends with a clearly higher discrepancy; raise --budget")
        elif float(rises.min()) < tol:
            side = "below" if rises[0] < tol else "above"
            notes.append(f"bounded on one side only: the discrepancy stays flat {side} the "
                         "fit, so the value is a bound, not an estimate; use it as one, or "
                         "add episodes where it matters on that side too")
        if at_edge:
            notes.append(f"on the edge of the search box "
                         f"({space.value(r, lo[i]):.4g}..{space.value(r, hi[i]):.4g}): the "
                         f"truth may lie beyond it; widen the search (--widen {2 * widen:g})")
        value = space.value(r, x)
        out.append(ParamFit(
            param=r.name, sim_low=r.low, sim_high=r.high, sim_nominal=r.nominal,
            search_low=_r(space.value(r, lo[i])), search_high=_r(space.value(r, hi[i])),
            fitted=_r(value), std=_std(space, r, x, s_all),
            std_curvature=_std(space, r, x, s_curv), std_between=_std(space, r, x, s_between),
            fits=[_r(space.value(r, float(v))) for v in xs],
            outside_range=not r.low <= value <= r.high, identifiable=identifiable,
            converged=converged, at_edge=at_edge, note="; ".join(notes) or None))
    return out


def _std(space: SearchSpace, r: ParamRange, x: float, s: float | None) -> float | None:
    return None if s is None else _r(space.value_std(r, x, s))


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

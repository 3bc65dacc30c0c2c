"""Which parameter makes sim fail the way a cluster fails: evidence from how runs end.

Some causes move no telemetry that sim can tell within its range: a gripper pad's friction
changes nothing the sensors read until the object slips, so the forward model
(:mod:`~sim2real.attribute.inference`) cannot name it, and the cluster's fit leaves every
parameter at the successes' value. Sim still shows such a parameter in how its rollouts
end: the lower the pad friction, the more of them drop the object. Where a physical
cluster has no lead in its telemetry, the parameter of its family whose value sim's
rollouts fail with the cluster's symptom (its most common ``failure_label``) most
significantly along (a logistic fit per parameter) is a lead, and its estimate is the value
at which sim fails that way as often as the real episodes do where the cluster's failures
happen. Where no rollout ends that way at all, nothing within sim's ranges reproduces the
failures (:func:`never_in_sim`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from scipy import special, stats

from sim2real._columns import column_values, strings
from sim2real.pipeline import real_episodes, sim_episodes

if TYPE_CHECKING:
    from sim2real.attribute.params import ParamEstimate
    from sim2real.pipeline import Diagnosis

__all__ = ["SYMPTOM_ALPHA", "Endings", "SymptomLead", "all_endings_in_sim", "beyond_sim",
           "common_ending", "ending_backs", "never_in_sim", "symptom_lead"]

# Family-wise error of the search over a family's parameters (Bonferroni): a lead from how
# runs end is asked to be as sure as a finding, since nothing in the telemetry backs it.
SYMPTOM_ALPHA = 0.01
# Newton's method converges in a handful of steps on a logistic fit that has a maximum;
# one that has not converged by then is separated data.
_NEWTON_STEPS = 50


@dataclass(frozen=True)
class SymptomLead:
    """A parameter named by the rate at which sim fails with the cluster's symptom.

    Attributes:
        estimate: the parameter, at the value where sim's rate meets the real one.
        symptom: the ``failure_label`` read.
        z: the logistic slope of that symptom on the parameter, in standard errors.
        real_rate: the symptom's rate among the real episodes of the cluster's robots
            (each robot weighted by the cluster's failures there).
        sim_rate: sim's rate at the real successes' value of the parameter.
        episodes: the real episodes behind ``real_rate``.
        share: ``(share, low, high)`` of the cluster's failures sim's rate at the
            successes' value does not account for, with a 95 % interval.
        overrules: the parameter the telemetry pointed to instead, where the lead
            overrules it (see :func:`~sim2real.attribute.actions.lead_by_symptom`).
    """

    estimate: ParamEstimate
    symptom: str
    z: float
    real_rate: float
    sim_rate: float
    episodes: int
    share: tuple[float, float, float]
    overrules: str | None = None


@dataclass(frozen=True)
class Endings:
    """How every run of a diagnosis ended, read once: each cluster's questions are masks
    over these arrays, not new reads of the episodes table.

    Attributes:
        sim: the sim rollouts (their ``param.*`` columns are read from here).
        sim_task, sim_label: ``(n_sim,)`` each rollout's task and ``failure_label``.
        sim_failed: ``(n_sim,)`` whether it failed.
        real_robot, real_label: ``(n_real,)`` the analysed real episodes' robot and label.
        real_failed: ``(n_real,)`` whether each failed.
    """

    sim: pa.Table
    sim_task: np.ndarray
    sim_label: np.ndarray
    sim_failed: np.ndarray
    real_robot: np.ndarray
    real_label: np.ndarray
    real_failed: np.ndarray

    @classmethod
    def read(cls, diagnosis: Diagnosis) -> Endings:
        sim = sim_episodes(diagnosis.dataset)
        real = real_episodes(diagnosis.dataset, diagnosis.deployments)
        return cls(sim, strings(sim, "task"), strings(sim, "failure_label"),
                   strings(sim, "outcome") == "failure", strings(real, "robot_id"),
                   strings(real, "failure_label"), strings(real, "outcome") == "failure")


def symptom_lead(diagnosis: Diagnosis, rows: np.ndarray, candidates: list[ParamEstimate],
                 success_values: dict[str, float],
                 endings: Endings | None = None) -> SymptomLead | None:
    """The lead of the module docstring among ``candidates`` for the cluster's events
    ``rows``; ``None`` where no parameter's slope passes :data:`SYMPTOM_ALPHA` or the real
    episodes fail with the symptom no more often than sim does at the successes' value.

    Args:
        diagnosis: the analysis.
        rows: the cluster's event rows.
        candidates: the parameters that may lead (the cluster's family's).
        success_values: each parameter's value for the real successes.
        endings: :meth:`Endings.read` of ``diagnosis`` (read here when not given).
    """
    endings = endings or Endings.read(diagnosis)
    ended = _sim_endings(diagnosis, rows, endings)
    if ended is None or not candidates:
        return None
    symptom, tasks, failed = ended
    if failed.sum() < 3 or (~failed).sum() < 3:
        return None
    labels = column_values(diagnosis.events, "failure_label")[rows]
    real_rate, episodes = _real_rate(diagnosis, rows, symptom, endings)
    if not 0.0 < real_rate < 1.0:
        return None
    cut = stats.norm.isf(SYMPTOM_ALPHA / 2 / len(candidates))
    best = None
    for p in candidates:
        fit = _along(p, tasks, failed, endings)
        if fit is None or abs(fit.z) < cut or (best is not None and abs(fit.z) <= abs(best[1].z)):
            continue
        best = (p, fit)
    if best is None:
        return None
    p, fit = best
    spread = (p.sim_high - p.sim_low) or 1.0
    at_successes = (success_values.get(p.param, p.sim_nominal) - p.sim_nominal) / spread
    sim_rate = float(special.expit(fit.intercept + fit.slope * at_successes))
    if real_rate <= sim_rate:
        return None
    target = float(special.logit(real_rate))
    shift = (target - fit.intercept) / fit.slope
    # Delta method: the real rate's binomial error and the fit's, through the inversion.
    var = (1.0 / (episodes * real_rate * (1.0 - real_rate)) + fit.cov[0, 0]
           + shift**2 * fit.cov[1, 1] + 2 * shift * fit.cov[0, 1]) / fit.slope**2
    low, high = diagnosis.dataset.params[p.param].bounds
    estimate = float(np.clip(p.sim_nominal + shift * spread, low, high))
    lead = replace(p, estimate=estimate, shift=(estimate - p.sim_nominal) / spread,
                   outside_range=not p.sim_low <= estimate <= p.sim_high,
                   uncertainty=float(np.sqrt(var)) * spread, symptom=symptom)
    share = _excess_share(int((labels == symptom).sum()), len(rows), real_rate, episodes,
                          sim_rate)
    return SymptomLead(lead, symptom, fit.z, real_rate, sim_rate, episodes, share)


def ending_backs(diagnosis: Diagnosis, rows: np.ndarray, p: ParamEstimate, direction: float,
                 endings: Endings | None = None) -> bool:
    """Whether sim's rollouts of the cluster's tasks end in its most common symptom
    significantly more often (a logistic slope at :data:`SYMPTOM_ALPHA`, two-sided) the
    further ``p`` goes in ``direction`` (its sign): how runs end backs moving ``p`` that
    way. ``endings`` as for :func:`symptom_lead`."""
    endings = endings or Endings.read(diagnosis)
    ended = _sim_endings(diagnosis, rows, endings)
    if ended is None or direction == 0:
        return False
    fit = _along(p, ended[1], ended[2], endings)
    return fit is not None and fit.z * np.sign(direction) >= stats.norm.isf(SYMPTOM_ALPHA / 2)


def _along(p: ParamEstimate, tasks: np.ndarray, failed: np.ndarray,
           endings: Endings) -> _Fit | None:
    """The logistic fit of ``failed`` on ``p``'s value (range widths from nominal) over the
    sim rollouts ``tasks``; ``None`` where sim logs no such column or the fit fails."""
    column = f"param.{p.param}"
    if column not in endings.sim.column_names:
        return None
    spread = (p.sim_high - p.sim_low) or 1.0
    values = endings.sim[column].to_numpy(zero_copy_only=False).astype(float)[tasks]
    x = (values - p.sim_nominal) / spread
    ok = np.isfinite(x)
    return _logistic(x[ok], failed[ok])


def never_in_sim(diagnosis: Diagnosis, rows: np.ndarray,
                 endings: Endings | None = None) -> tuple[str, int, float] | None:
    """The cluster's most common symptom, the number of sim rollouts of its tasks and the
    symptom's real rate where the cluster's failures happen, where none of those rollouts
    ends that way (while some end another labelled way) and, at the real rate, at least one
    would have but for a chance below :data:`SYMPTOM_ALPHA`: sim does not produce that
    failure at any parameter value it samples (the cause is missing from it, or a parameter
    lies beyond its range). ``None`` otherwise; ``endings`` as for :func:`symptom_lead`."""
    endings = endings or Endings.read(diagnosis)
    ended = _sim_endings(diagnosis, rows, endings)
    return None if ended is None else _never(diagnosis, rows, ended[0], endings)


def all_endings_in_sim(diagnosis: Diagnosis, rows: np.ndarray,
                       endings: Endings | None = None) -> bool:
    """Whether sim produces every way the cluster's failures end: no ``failure_label`` of
    theirs is one no sim rollout of their tasks ends in although, at its real rate where
    the cluster's failures happen, some would have (as :func:`never_in_sim`)."""
    endings = endings or Endings.read(diagnosis)
    labels = column_values(diagnosis.events, "failure_label")[rows]
    return all(_never(diagnosis, rows, str(symptom), endings) is None
               for symptom in {v for v in labels if v is not None})


def beyond_sim(diagnosis: Diagnosis, rows: np.ndarray,
               endings: Endings | None = None) -> tuple[str, int, int] | None:
    """The cluster's most common symptom, how many sim rollouts of its tasks end that way
    and how many there are, where sim ends so less often than the cluster's own failures
    make the real robots end so (a binomial test at :data:`SYMPTOM_ALPHA`): the failures are
    a way of ending beyond sim's, not failures sim also has. ``None`` otherwise."""
    endings = endings or Endings.read(diagnosis)
    ended = _sim_endings(diagnosis, rows, endings)
    if ended is None:
        return None
    symptom, tasks, failed = ended
    own = int((column_values(diagnosis.events, "failure_label")[rows] == symptom).sum())
    robots = {str(r) for r in column_values(diagnosis.events, "robot_id")[rows]}
    exposed = int(np.isin(endings.real_robot.astype(str), list(robots)).sum()) or len(
        endings.real_robot)
    k, n = int(failed.sum()), int(tasks.sum())
    if n == 0 or stats.binom.cdf(k, n, min(own / exposed, 1.0)) >= SYMPTOM_ALPHA:
        return None
    return symptom, k, n


def _never(diagnosis: Diagnosis, rows: np.ndarray, symptom: str,
           endings: Endings) -> tuple[str, int, float] | None:
    """:func:`never_in_sim` for ``symptom``."""
    tasks = _sim_of_tasks(diagnosis, rows, endings)
    ends = endings.sim_label[tasks]
    if ((ends == symptom) & endings.sim_failed[tasks]).any():
        return None
    if not any(v is not None for v in ends):
        return None  # sim logs no failure labels: its silence says nothing
    real_rate, _ = _real_rate(diagnosis, rows, symptom, endings)
    n = int(tasks.sum())
    if (1.0 - real_rate) ** n >= SYMPTOM_ALPHA:
        return None
    return symptom, n, real_rate


def common_ending(diagnosis: Diagnosis, rows: np.ndarray) -> str | None:
    """The most common ``failure_label`` of the events ``rows``; ``None`` where none has one."""
    labels = column_values(diagnosis.events, "failure_label")[rows]
    named = [str(v) for v in labels if v is not None]
    if not named:
        return None
    values, counts = np.unique(named, return_counts=True)
    return str(values[np.argmax(counts)])


def _sim_endings(diagnosis: Diagnosis, rows: np.ndarray,
                 endings: Endings) -> tuple[str, np.ndarray, np.ndarray] | None:
    """The cluster's most common ``failure_label``, the mask of the sim rollouts of its
    tasks and which of those failed with it; ``None`` where its failures carry no label."""
    symptom = common_ending(diagnosis, rows)
    if symptom is None:
        return None
    tasks = _sim_of_tasks(diagnosis, rows, endings)
    failed = (endings.sim_label[tasks] == symptom) & endings.sim_failed[tasks]
    return symptom, tasks, failed


def _sim_of_tasks(diagnosis: Diagnosis, rows: np.ndarray, endings: Endings) -> np.ndarray:
    """``(n_sim,)`` mask of the sim rollouts of the tasks of the events ``rows``."""
    tasks = {str(t) for t in column_values(diagnosis.events, "task")[rows]}
    return np.isin(endings.sim_task, list(tasks))


@dataclass(frozen=True)
class _Fit:
    intercept: float
    slope: float
    cov: np.ndarray
    z: float


def _logistic(x: np.ndarray, y: np.ndarray) -> _Fit | None:
    """Maximum-likelihood ``logit P(y) = a + b x`` with the Wald covariance of ``(a, b)``,
    by Newton's method (iteratively reweighted least squares: two parameters, a few
    passes over ``x``); ``None`` where ``x`` does not vary or the fit is degenerate (a
    symptom sim shows only past some value separates the data: the slope grows without
    bound and the information matrix turns singular)."""
    if len(x) < 10 or np.ptp(x) == 0 or y.all() or not y.any():
        return None
    design = np.column_stack([np.ones_like(x), x])
    beta = np.array([float(special.logit(y.mean())), 0.0])
    for _ in range(_NEWTON_STEPS):
        p = special.expit(design @ beta)
        info = design.T @ (design * (p * (1.0 - p))[:, None])
        if np.linalg.cond(info) > 1e12:
            return None
        step = np.linalg.solve(info, design.T @ (y - p))
        beta = beta + step
        if np.abs(step).max() < 1e-9:
            break
    else:
        return None
    cov = np.linalg.inv(info)
    return _Fit(float(beta[0]), float(beta[1]), cov, float(beta[1] / np.sqrt(cov[1, 1])))


def _real_rate(diagnosis: Diagnosis, rows: np.ndarray, symptom: str,
               endings: Endings) -> tuple[float, int]:
    """The symptom's rate among the analysed real episodes of the robots where the
    cluster's failures happen, each robot weighted by its share of them, and the number of
    episodes that rate rests on (the same weights; the whole fleet where no robot is
    logged)."""
    robots = endings.real_robot
    hit = (endings.real_label == symptom) & endings.real_failed
    mine = strings(diagnosis.events, "robot_id")[rows]
    if any(r is None for r in mine):
        return float(hit.mean()), len(hit)
    names, members = np.unique(mine.astype(str), return_counts=True)
    weight = members / members.sum()
    rates = np.array([hit[robots == r].mean() for r in names])
    sizes = np.array([(robots == r).sum() for r in names])
    return float(weight @ rates), round(float(weight @ sizes))


def _excess_share(k: int, n: int, real_rate: float, episodes: int,
                  sim_rate: float) -> tuple[float, float, float]:
    """The share of ``n`` failures, ``k`` of which show the symptom, beyond sim's rate:
    ``k / n * (1 - sim_rate / real_rate)``, the interval from the real rate's
    Clopper-Pearson interval over ``episodes``."""
    hits = round(real_rate * episodes)
    low = float(stats.beta.ppf(0.025, hits, episodes - hits + 1)) if hits > 0 else 0.0
    high = float(stats.beta.isf(0.025, hits + 1, episodes - hits)) if hits < episodes else 1.0
    part = k / n

    def beyond(rate: float) -> float:
        return max(0.0, part * (1.0 - sim_rate / rate)) if rate > 0 else 0.0

    return beyond(real_rate), beyond(low), beyond(high)


"""Which simulation parameters differ for a cluster: estimates, shifts, identifiability.

:func:`param_evidence` fits a :class:`ParameterInference` on a diagnosis' sim rollouts once
and reads every real failure and a sample of real successes through it;
:func:`infer_params` then summarises a cluster's events. The cluster is contrasted with
the real successes, so a parameter on which all of reality differs from sim (and which
therefore cannot explain why *these* episodes fail) is not blamed.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import optimize

from sim2real._columns import column_values
from sim2real.attribute.inference import ParameterInference, ParamSpace, Windows
from sim2real.dataset.schema import infer_param_family
from sim2real.drift.signature import SCORE_FAMILIES, SIGNIFICANT
from sim2real.match.context import context_table

if TYPE_CHECKING:
    from sim2real.drift.compute import Signatures
    from sim2real.engine import Executor
    from sim2real.pipeline import Diagnosis

__all__ = ["WEAK_PULL", "ClusterFit", "ParamEstimate", "ParamEvidence", "cluster_fit",
           "deviating_families", "family_explanation", "infer_params", "lead_family", "lead_param",
           "may_lead", "moved_family", "param_evidence", "param_families", "param_family",
           "rank_params"]

_Z_SHIFT = 2.0  # the cluster differs from real successes
# A pull within this many robust standard deviations of the real successes' own values,
# inside sim's range, is where successes run and sim trains: no reason these episodes fail.
_TYPICAL = 2.0
WEAK_PULL = 1.0  # standard errors: a parameter pulled less is no lead at all
_CONFOUNDED = 0.7  # |posterior correlation| above which two parameters trade off


@dataclass(frozen=True)
class ParamEstimate:
    """The value a cluster's real episodes point to for one simulation parameter.

    Attributes:
        param: name without ``param.``.
        sim_low, sim_high, sim_nominal: the randomisation range.
        estimate: the value under which sim best reproduces the cluster's deviation
            (:func:`cluster_fit`), within the physical bounds.
        shift: ``(estimate - nominal) / (high - low)``.
        outside_range: the estimate lies outside the randomisation range.
        uncertainty: standard error of ``estimate``.
        explained: 0-1, share of the cluster's telemetry deviation (versus real successes)
            this parameter's shift accounts for in the joint fit; 0 where the shift is not
            2 standard errors from the successes' value.
        identifiability: cross-validated R^2 of the parameter on sim rollouts.
        contrast: (cluster - real successes) in standard errors.
        confounded_with: parameters whose effects the data cannot tell from this one's.
        event_share: share of the cluster's episodes that point beyond the range (when
            ``outside_range``) or to the same side of nominal as the estimate.
        pulled: where the data pull the parameter before the sparse selection (the joint
            fit without bounds, then within them): the candidate value of a parameter too
            weakly pulled to be an estimate.
        symptom: set where the estimate comes from how sim's rollouts end, not from the
            telemetry (:mod:`~sim2real.attribute.symptoms`): the ``failure_label`` at whose
            real rate it puts sim.
        typical: the data pull the parameter to a value within sim's range and no further
            from the real successes' value than the successes' own values spread
            (:data:`_TYPICAL` robust standard deviations): sim trains there and successes
            run there, so it is no lead and explains nothing, however many standard errors
            the pull is. (Beyond the range it may be a gap whatever the successes do: a dim
            cell's successes are dim too.)
    """

    param: str
    sim_low: float
    sim_high: float
    sim_nominal: float
    estimate: float
    shift: float
    outside_range: bool
    uncertainty: float
    explained: float
    identifiability: float = 0.0
    contrast: float = 0.0
    confounded_with: tuple[str, ...] = field(default_factory=tuple)
    event_share: float = 0.0
    pulled: float = float("nan")
    symptom: str | None = None
    typical: bool = False

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["confounded_with"] = list(self.confounded_with)
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in out.items()}


@dataclass(frozen=True)
class ParamEvidence:
    """A diagnosis read through a fitted :class:`ParameterInference`, computed once.

    Attributes:
        inference: fitted on the sim rollouts.
        events: ``(n_events, n_params)`` per-failure estimates, signature row order.
        whitened: ``(n_events, n_features)`` per-failure deviations from their neighbours.
        success_mean: ``(n_params,)`` median estimate over sampled real successes.
        success_se: ``(n_params,)`` its standard error.
        success_spread: ``(n_params,)`` robust standard deviation of the successes'
            estimates, in range widths (shrunk by identifiability, as their median).
        success_whitened: ``(n_features,)`` median deviation of the successes.
        feature_families: ``(n_features,)`` the family of each feature's channel.
        param_families: each parameter's family: declared in ``params.csv``, else the
            family of the channels it moves most in sim (:func:`param_families`).
    """

    inference: ParameterInference
    events: np.ndarray
    whitened: np.ndarray
    success_mean: np.ndarray
    success_se: np.ndarray
    success_spread: np.ndarray
    success_whitened: np.ndarray
    feature_families: np.ndarray
    param_families: tuple[str, ...] = ()

    def features(self, families: Collection[str] | None) -> np.ndarray:
        """``(n_features,)`` mask of the features of ``families`` (``None``: all)."""
        if families is None:
            return np.ones(len(self.feature_families), dtype=bool)
        return np.isin(self.feature_families, list(families))


def param_evidence(diagnosis: Diagnosis,
                   executor: Executor | None = None) -> ParamEvidence | None:
    """Fit the inference on the diagnosis' sim rollouts and read its real episodes
    (windows read in parallel by ``executor`` where it runs on this machine; the result
    does not depend on it).

    Returns:
        ``None`` where the dataset has no ``param.*`` columns (nothing to attribute).
    """
    space = _space(diagnosis)
    if space is None:
        return None
    cfg = diagnosis.config
    # The inference reads a few thousand windows whatever the fleet's size: worth forked
    # workers, which inherit the bank, not shipping the bank to remote ones.
    executor = executor if executor is not None and not executor.remote else None
    inference = ParameterInference(20, cfg.n_points, cfg.n_segments, cfg.window_s,
                                   seed=cfg.seed).fit(diagnosis.matcher.bank_, space,
                                                      executor)
    events = diagnosis.events
    windows = Windows(diagnosis.real_grid, np.arange(events.num_rows), diagnosis.ends,
                      column_values(events, "task"), context_table(events))
    whitened, base = inference.deviations(windows, executor)
    estimates = base + inference.correct(whitened) * space.spread
    s_white, s_est = _successes(diagnosis, inference, executor)
    n_s = max(len(s_est), 1)
    s_mean = np.nanmedian(s_est, axis=0) if len(s_est) else space.nominal.copy()
    # Where sim's telemetry barely tells a parameter, the successes' estimate is mostly
    # whatever general sim-to-real difference leaks into it: they are taken to sit at
    # nominal, as far as the data cannot say otherwise.
    ident = inference.identifiability_
    s_mean = np.where(np.isfinite(s_mean), space.nominal + ident * (s_mean - space.nominal),
                      space.nominal)
    s_se = (1.2533 * np.nanstd(s_est, axis=0) / np.sqrt(n_s) if len(s_est) > 1
            else np.full(len(space.names), np.inf))
    mad = (np.nanmedian(np.abs(s_est - np.nanmedian(s_est, axis=0)), axis=0) if len(s_est)
           else np.zeros(len(space.names)))
    s_spread = np.nan_to_num(1.4826 * mad * ident / space.spread)
    # The median, like the estimate: successes at a site where a cause acts (a dim cell)
    # must not make every other cluster look brighter than the successes.
    s_dev = np.median(s_white, axis=0) if len(s_white) else np.zeros(whitened.shape[1])
    declared = [diagnosis.dataset.params[n].family for n in space.names]
    bank = inference.bank_
    families = np.array(bank.families or ("dynamics",) * len(bank.grid.channels), dtype=object)
    features = np.tile(families, inference.n_blocks)  # block-major, as the features
    return ParamEvidence(inference, estimates, whitened, s_mean, s_se, s_spread, s_dev,
                         features, param_families(inference, features, declared))


def param_families(inference: ParameterInference, features: np.ndarray,
                   declared: Sequence[str | None] = ()) -> tuple[str, ...]:
    """Each parameter's family: the declared one, else what its name says it is
    (:func:`~sim2real.dataset.schema.infer_param_family`), else that of the channels its
    learnt effect moves most (the energy of its whitened column per channel family).

    The name comes before the channels because a cause's consequences travel: a wheel
    friction whose slips sim shows mostly as localisation error is still dynamics. Policy
    channels are left out of the vote: commands follow whatever the robot sees and feels,
    so they are consequences, never where a physical parameter lives.
    """
    columns = inference.columns()
    names = inference.space_.names
    return tuple(family or infer_param_family(names[j]) or _most_moved(columns[:, j], features)
                 or "dynamics"
                 for j, family in enumerate(list(declared) or [None] * columns.shape[1]))


def _most_moved(column: np.ndarray, features: np.ndarray) -> str | None:
    """The channel family (policy aside) whose features a parameter's learnt effect
    ``column`` moves most, by energy; ``None`` where ``features`` have none of them."""
    energy = {f: float((column[features == f] ** 2).sum())
              for f in ("perception", "dynamics", "system") if (features == f).any()}
    return max(energy, key=energy.__getitem__) if energy else None


def deviating_families(sig: Signatures, rows: np.ndarray) -> tuple[str, ...]:
    """The channel families whose median score over the events ``rows`` is beyond sim's
    variability (:data:`SIGNIFICANT`): where a cluster's cause shows."""
    scores = np.median(sig.family_scores[rows], axis=0)
    scores[SCORE_FAMILIES.index("system")] = np.median(sig.system_channels[rows])
    return tuple(f for f, v in zip(SCORE_FAMILIES, scores, strict=True)
                 if f != "task_scope" and v >= SIGNIFICANT)


def family_explanation(ev: ParamEvidence, rows: np.ndarray,
                       families: Collection[str] | None = None) -> dict[str, tuple[float,
                                                                          tuple[str, ...]]]:
    """Per parameter family, how much of the cluster's deviation from real successes sim
    reproduces through that family's parameters alone, and those of them it moves.

    Args:
        ev: the fitted evidence.
        rows: the cluster's events.
        families: the channel families whose deviation is to be explained
            (:func:`deviating_families`); ``None``: all.

    Returns:
        family -> (share of the deviation explained, parameters shifted significantly,
        most explaining first); families without parameters are absent.
    """
    inf = ev.inference
    space = inf.space_
    a, deviation, lo, hi, floor = _fit_inputs(ev, rows, families)
    total = float(deviation @ deviation)
    out: dict[str, tuple[float, tuple[str, ...]]] = {}
    for family in sorted(set(ev.param_families)):
        mine = np.array([f == family for f in ev.param_families])
        if total <= 0:
            out[family] = (0.0, ())
            continue
        cols = a[:, mine]
        k = cols.shape[1]
        pull, noise = _bounded_ridge(cols, deviation, np.full(k, -np.inf), np.full(k, np.inf),
                                     inf.ridge, floor)
        sd = np.sqrt(np.diag(np.linalg.inv(cols.T @ cols / noise + inf.ridge * np.eye(k))))
        moved = (np.abs(pull) >= _Z_SHIFT * sd) & ~_typical(ev, pull, mine)
        x = np.zeros(k)
        if moved.any():
            x[moved], _ = _bounded_ridge(cols[:, moved], deviation, lo[mine][moved],
                                         hi[mine][moved], inf.ridge, floor)
        rest = deviation - cols @ np.where(moved, x, 0.0)
        share = max(0.0, 1.0 - float(rest @ rest) / total)
        part = (cols * x).T @ deviation
        names = [space.names[k] for k in np.flatnonzero(mine)]
        order = [names[i] for i in np.argsort(-part) if moved[i]]
        out[family] = (share, tuple(order))
    return out


def infer_params(
    diagnosis: Diagnosis, rows: np.ndarray, evidence: ParamEvidence | None = None
) -> list[ParamEstimate]:
    """Parameter estimates for the cluster of events ``rows``, in :func:`rank_params`
    order.

    The cluster's deviation from the real successes (median over its events, whitened) is
    explained *jointly* by all parameters through the forward model learnt on sim
    (:func:`cluster_fit`): each estimate is the successes' value plus the parameter's part
    of that joint shift, never outside its physical bounds.

    Args:
        diagnosis: the analysis.
        rows: the cluster's event rows.
        evidence: :func:`param_evidence` of ``diagnosis``, computed once per diagnosis;
            computed here when not given.
    """
    ev = evidence if evidence is not None else param_evidence(diagnosis)
    if ev is None or len(rows) == 0:
        return []
    inf = ev.inference
    space = inf.space_
    # Where no family deviates beyond sim's variability, every channel says what it can.
    deviating = deviating_families(diagnosis.signatures, rows)
    fit = cluster_fit(ev, rows, deviating or None)
    per_event = space.clip(ev.events[rows])
    estimate = space.clip(ev.success_mean + fit.delta * space.spread)
    pulled = space.clip(ev.success_mean + fit.pull * space.spread)
    success_se = np.where(np.isfinite(ev.success_se), ev.success_se, 0.0)
    se = np.sqrt((fit.sd * space.spread) ** 2 + success_se**2)
    contrast = fit.pull / np.where(fit.sd > 0, fit.sd, np.inf)
    # A parameter on which the cluster does not differ from real successes explains nothing.
    share = np.where((np.abs(contrast) >= _Z_SHIFT) & ~fit.typical, fit.share, 0.0)
    out = []
    for j, name in enumerate(space.names):
        low, high, nominal = (float(space.low[j]), float(space.high[j]),
                              float(space.nominal[j]))
        outside = bool(estimate[j] < low or estimate[j] > high)
        if outside:
            side = per_event[:, j] > high if estimate[j] > high else per_event[:, j] < low
        else:
            side = np.sign(per_event[:, j] - nominal) == np.sign(estimate[j] - nominal)
        partners = tuple(space.names[k] for k in range(len(space.names))
                         if k != j and abs(inf.correlation_[j, k]) >= _CONFOUNDED)
        out.append(ParamEstimate(
            param=name, sim_low=low, sim_high=high, sim_nominal=nominal,
            estimate=float(estimate[j]),
            shift=float((estimate[j] - nominal) / space.spread[j]),
            outside_range=outside, uncertainty=float(se[j]),
            explained=float(share[j]), identifiability=float(inf.identifiability_[j]),
            contrast=float(contrast[j]), confounded_with=partners,
            pulled=float(pulled[j]),
            event_share=float(np.mean(side)), typical=bool(fit.typical[j]),
        ))
    return rank_params(out, ev, deviating)


def rank_params(params: Sequence[ParamEstimate], evidence: ParamEvidence,
                deviating: Collection[str]) -> list[ParamEstimate]:
    """``params`` most explaining first; of those explaining alike, the ones that may be the
    cause (:func:`may_lead` with the cluster's ``deviating`` families) first, then the
    hardest pulled.

    Explaining alike is most often explaining nothing significant: there a parameter whose
    own channels look like sim's comes after those that may be the cause, as the actions
    have it, however hard the other families' deviation pulls it.
    """
    return sorted(params, key=lambda p: (-p.explained, not may_lead(evidence, p.param, deviating),
                                         -abs(p.contrast), p.param))


def lead_family(params: Sequence[ParamEstimate], evidence: ParamEvidence | None,
                deviating: Collection[str], pull: float = _Z_SHIFT) -> str | None:
    """The family of :func:`lead_param`, ``None`` where there is none."""
    lead = lead_param(params, evidence, deviating, pull)
    return None if lead is None or evidence is None else param_family(evidence, lead.param)


def lead_param(params: Sequence[ParamEstimate], evidence: ParamEvidence | None,
               deviating: Collection[str], pull: float = _Z_SHIFT) -> ParamEstimate | None:
    """The first of ``params`` (:func:`infer_params` order) on which the cluster differs
    from the real successes by at least ``pull`` standard errors (by default:
    significantly), beyond what sim's range and the successes' own values cover (not
    :attr:`~ParamEstimate.typical`), and which may be its cause (:func:`may_lead`); ``None``
    where none does.

    Args:
        params: the cluster's estimates.
        evidence: the fitted inference; ``None``: no parameters, no lead.
        deviating: the channel families that deviate in the cluster's signature
            (:func:`deviating_families`).
        pull: the standard errors a parameter's pull needs (:data:`WEAK_PULL` for a lead
            that only breaks ties).
    """
    if evidence is None:
        return None
    return next((p for p in params if abs(p.contrast) >= pull and not p.typical
                 and may_lead(evidence, p.param, deviating)), None)


def may_lead(evidence: ParamEvidence, param: str, deviating: Collection[str]) -> bool:
    """Whether ``param`` may be a cluster's cause: its own family's channels deviate in the
    cluster's signature (``deviating``, :func:`deviating_families`).

    A parameter whose own channels look like sim's cannot be the cause, however hard the
    other families' deviation pulls it (a lighting parameter picked up by a slipping
    gripper's localisation error). Where no family deviates beyond sim's variability,
    nothing contradicts any parameter (a camera offset whose failures look like sim's own,
    only more frequent): every one may lead, as every channel then counts in the fit
    (:func:`infer_params`).

    The family whose channels the parameter moves most in sim counts as its own too: a
    floor friction whose slips sim shows as localisation error may be the cause of a
    localisation deviation, however much like sim's its dynamics channels look."""
    return (not deviating or param_family(evidence, param) in deviating
            or moved_family(evidence, param) in deviating)


def moved_family(evidence: ParamEvidence, param: str) -> str | None:
    """The channel family that ``param``'s learnt effect moves most (policy aside)."""
    column = evidence.inference.columns()[:, evidence.inference.space_.names.index(param)]
    return _most_moved(column, evidence.feature_families)


def param_family(evidence: ParamEvidence, param: str) -> str:
    """The family of ``param`` (name without ``param.``), as :func:`param_families` has it."""
    return evidence.param_families[evidence.inference.space_.names.index(param)]


@dataclass(frozen=True)
class ClusterFit:
    """The parameter shift that best reproduces a cluster's deviation through the forward
    model, in spread units relative to the real successes.

    Attributes:
        delta: ``(n_params,)`` the shift (within the physical bounds).
        sd: ``(n_params,)`` its posterior standard deviation.
        pull: ``(n_params,)`` the shift all parameters jointly would take without bounds:
            how hard the data pull each (``pull / sd``: its significance).
        share: ``(n_params,)`` share of the deviation each parameter's shift accounts for.
        deviation: ``(n_features,)`` the cluster's whitened deviation from the successes.
        explained: share of the deviation the whole shift accounts for.
        typical: ``(n_params,)`` pulls within sim's range and the successes' own spread
            (:attr:`ParamEstimate.typical`): kept at the successes' value.
    """

    delta: np.ndarray
    sd: np.ndarray
    share: np.ndarray
    deviation: np.ndarray
    explained: float
    pull: np.ndarray
    typical: np.ndarray


def cluster_fit(ev: ParamEvidence, rows: np.ndarray,
                families: Collection[str] | None = None) -> ClusterFit:
    """Bounded ridge regression of the cluster's deviation on the forward model's columns.

    Only the channels of ``families`` (those where the cluster deviates from sim,
    :func:`deviating_families`; ``None``: all) are fitted: a site brighter than the
    fleet's average shifts its brightness whatever fails there, and that difference is no
    part of why these episodes fail.

    The noise is the larger of what the median of ``len(rows)`` unit-variance events
    carries and the misfit the model leaves: where sim's parameters cannot reproduce the
    deviation the misfit is large, and the ridge keeps weakly informed parameters at the
    successes' value instead of letting the deviation leak into them.
    """
    inf = ev.inference
    a, deviation, lo, hi, floor = _fit_inputs(ev, rows, families)
    n_params = a.shape[1]
    pull, noise = _bounded_ridge(a, deviation, np.full(n_params, -np.inf),
                                 np.full(n_params, np.inf), inf.ridge, floor)
    sd = np.sqrt(np.diag(np.linalg.inv(a.T @ a / noise + inf.ridge * np.eye(n_params))))
    # Sparse shifts: a cause moves one parameter or a few. Those the data do not pull
    # significantly stay at the successes' value, and the others are fitted without them
    # (otherwise an unexplained deviation leaks into every weakly informed parameter). The
    # pull is judged before the physical bounds cut it short: a friction pulled far below
    # zero is a strong finding, its estimate then sits at the bound.
    typical = _typical(ev, pull)
    free = (np.abs(pull) >= _Z_SHIFT * sd) & ~typical
    delta = np.zeros(a.shape[1])
    if free.any():
        delta[free], _ = _bounded_ridge(a[:, free], deviation, lo[free], hi[free], inf.ridge,
                                        floor)
    total = float(deviation @ deviation)
    rest = deviation - a @ delta
    share = (np.clip((a * delta).T @ deviation / total, 0.0, 1.0) if total > 0
             else np.zeros(a.shape[1]))
    explained = max(0.0, 1.0 - float(rest @ rest) / total) if total > 0 else 0.0
    return ClusterFit(delta, sd, share, deviation, explained, pull, typical)


def _typical(ev: ParamEvidence, pull: np.ndarray, mine: np.ndarray | None = None
             ) -> np.ndarray:
    """Which of the pulls (range widths; of the parameters ``mine``, default all) stay
    within the real successes' own spread and sim's range (:attr:`ParamEstimate.typical`)."""
    mine = np.ones(len(ev.success_spread), dtype=bool) if mine is None else mine
    space = ev.inference.space_
    value = ev.success_mean[mine] + pull * space.spread[mine]
    return ((np.abs(pull) < _TYPICAL * ev.success_spread[mine])
            & (value >= space.low[mine]) & (value <= space.high[mine]))


def _fit_inputs(ev: ParamEvidence, rows: np.ndarray, families: Collection[str] | None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """The forward model's columns and the cluster's whitened deviation from the successes
    on the features of ``families``, the shift bounds (spread units) and the noise floor
    of a median over its events."""
    space = ev.inference.space_
    keep = ev.features(families)
    deviation = (np.median(ev.whitened[rows], axis=0) - ev.success_whitened)[keep]
    lower, upper = space.bounds
    lo = np.where(np.isfinite(lower), (lower - ev.success_mean) / space.spread, -np.inf)
    hi = np.where(np.isfinite(upper), (upper - ev.success_mean) / space.spread, np.inf)
    lo, hi = np.minimum(lo, 0.0), np.maximum(hi, 0.0)  # successes beyond a bound: no shift
    floor = 1.5708 / len(rows)  # variance of a median of unit-variance normals
    return ev.inference.columns()[keep], deviation, lo, hi, floor


def _bounded_ridge(a: np.ndarray, y: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                   ridge: float, floor: float) -> tuple[np.ndarray, float]:
    """``argmin |y - a x|^2 / noise + ridge |x|^2`` within ``[lo, hi]``, the noise
    re-estimated from the misfit (at least ``floor``); returns ``x`` and the noise."""
    n_features, n_params = a.shape
    noise = floor
    x = np.zeros(n_params)
    for _ in range(4):
        design = np.vstack([a / np.sqrt(noise), np.sqrt(ridge) * np.eye(n_params)])
        target = np.concatenate([y / np.sqrt(noise), np.zeros(n_params)])
        x = optimize.lsq_linear(design, target, bounds=(lo, hi)).x
        rest = y - a @ x
        noise = max(float(rest @ rest) / max(n_features - n_params, 1), floor)
    return x, noise


def _space(diagnosis: Diagnosis) -> ParamSpace | None:
    ds = diagnosis.dataset
    names = [n for n in sorted(ds.params) if f"param.{n}" in ds.episodes.column_names]
    if not names:
        return None
    bank = diagnosis.matcher.bank_
    sim = ds.episodes.filter(pc.equal(ds.episodes["source"], "sim"))
    order = {e: i for i, e in enumerate(sim["episode_id"].to_pylist())}
    take = pa.array([order[e] for e in bank.grid.episode_ids])
    values = np.column_stack([
        sim[f"param.{n}"].take(take).to_numpy(zero_copy_only=False).astype(float)
        for n in names])
    ranges = [ds.params[n] for n in names]
    return ParamSpace(tuple(names), np.array([r.low for r in ranges], float),
                      np.array([r.high for r in ranges], float),
                      np.array([r.nominal for r in ranges], float), values,
                      np.array([r.bounds[0] for r in ranges], float),
                      np.array([r.bounds[1] for r in ranges], float))


def _successes(
    diagnosis: Diagnosis, inference: ParameterInference, executor: Executor | None
) -> tuple[np.ndarray, np.ndarray]:
    """Whitened deviations and estimates of the diagnosis' baseline real successes, each
    read at a random point of its run (there is no failure time)."""
    real = diagnosis.successes
    if real.num_rows == 0:
        n_params = len(inference.space_.names)
        return np.zeros((0, inference.coef_.shape[0])), np.zeros((0, n_params))
    rows = diagnosis.events.num_rows + np.arange(real.num_rows)
    rng = np.random.default_rng(diagnosis.config.seed)
    ends = diagnosis.real_grid.durations[rows] * rng.uniform(0.3, 1.0, size=rows.size)
    windows = Windows(diagnosis.real_grid, rows, ends, column_values(real, "task"),
                      context_table(real))
    whitened, base = inference.deviations(windows, executor)
    return whitened, base + inference.correct(whitened) * inference.space_.spread



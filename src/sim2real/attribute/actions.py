"""Ranked actions per cluster, each with the share of the cluster's failures it should remove.

Order of business, as an engineer triaging a failure mode would do it:

1. the action of the cluster's own family first: ``fix_infrastructure`` for system noise,
   ``add_training_scenarios`` for unseen context, and for a physical cluster the parameter
   sim reproduces it with (``widen_randomization`` where its value lies outside the range,
   ``recalibrate_param`` where the nominal is off), then ``improve_perception``. Only a
   parameter whose own family's channels deviate in the cluster's signature (or, where no
   family deviates, any) gets one;
2. the other actions by their expected reduction; a ``sys.*`` value, robot or site counts
   only where the cluster's failures over-represent it within strata of deployment and site
   (:mod:`sim2real.attribute.confounding`), so a value every failure carries never becomes
   another cluster's first action;
3. ``investigate`` when nothing above is clear, or the cluster's label is unsure; first,
   ahead of a parameter action, where nothing sim shows backs that parameter (pulled to a
   physical bound through telemetry sim hardly tells it by, and not along how sim's
   rollouts end the cluster's way).

``expected_reduction`` is computed: for a parameter change, by the emulator (the forward
model learnt on sim), the share of the cluster's events whose signature (the part of its
deviation sim's parameters reproduce) falls back inside sim's no-gap spread under the
change, minus those already inside (for a parameter named by how sim's rollouts end,
:mod:`sim2real.attribute.symptoms`, the share of the cluster's failures beyond sim's rate
of that ending); for a ``sys.*`` value, its
attributable share ``carriers x (OR - 1) / OR``; otherwise the share of the cluster's events
that carry what the action removes. Each comes with a 95 % interval. Reductions of several
actions on one cluster are not additive: each is computed as if it were the only change.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from scipy import stats

from sim2real._columns import column_values
from sim2real._format import fmt_range, fmt_value
from sim2real.attribute.confounding import Confounder, cluster_confounders
from sim2real.attribute.params import WEAK_PULL, deviating_families, may_lead, param_family
from sim2real.attribute.symptoms import (
    Endings,
    SymptomLead,
    all_endings_in_sim,
    ending_backs,
    never_in_sim,
    symptom_lead,
)
from sim2real.cluster.taxonomy import REFERENCE_WORDS, SIGNIFICANT, novel_context
from sim2real.pipeline import compared_with
from sim2real.report.model import Action

if TYPE_CHECKING:
    from sim2real.attribute.params import ParamEstimate, ParamEvidence
    from sim2real.cluster.taxonomy import ClusterLabel
    from sim2real.dataset import ParamRange
    from sim2real.pipeline import Diagnosis

__all__ = ["lead_by_symptom", "propose_actions", "simulator_config"]

_MIN_EXPLAINED = 0.1  # a parameter explaining less is no basis for changing the sim
_STRONG_EXPLAINED = 0.5  # ... unless it explains this much, any taxonomy gets the action
_UNSURE = 0.3  # label confidence below which "investigate" is added
# Cross-validated R^2 below which sim's telemetry hardly tells a parameter (measured on the
# zoo: the contact modes' payloads and frictions pulled to a bound 0.000-0.012, the wheel
# slips' floor friction 0.086-0.60).
_UNIDENTIFIED = 0.05
_PARAM_TAXONOMIES = ("dynamics_mismatch", "perception_drift")
_TAIL = 0.95  # sim's no-gap spread: this quantile of sim-vs-sim windows
_FAMILY = {"dynamics_mismatch": "dynamics", "perception_drift": "perception"}
_TAXONOMY = {family: taxonomy for taxonomy, family in _FAMILY.items()}


def propose_actions(
    diagnosis: Diagnosis, rows: np.ndarray, label: ClusterLabel, params: list[ParamEstimate],
    evidence: ParamEvidence | None = None, confounders: list[Confounder] | None = None,
    symptom: SymptomLead | None = None, endings: Endings | None = None,
) -> list[Action]:
    """Actions most likely to shrink the cluster of events ``rows``, most promising first.

    Args:
        diagnosis: the analysis.
        rows: the cluster's event rows.
        label: its taxonomy.
        params: its parameter estimates, most explaining first.
        evidence: the fitted parameter inference (its emulator computes the reductions of
            parameter changes); ``None`` where the dataset has no parameters.
        confounders: what the cluster's failures over-represent within strata
            (:func:`~sim2real.attribute.confounding.cluster_confounders`); computed here
            when not given.
        symptom: :func:`lead_by_symptom` of the cluster: its parameter action where the
            telemetry gives none, or a weak lead the symptom overrules.
        endings: how the diagnosis' runs ended (:meth:`Endings.read`, once per diagnosis);
            read here when needed and not given.
    """
    found = cluster_confounders(diagnosis, rows) if confounders is None else confounders
    words = REFERENCE_WORDS[compared_with(diagnosis.dataset)]
    own: list[Action] = []
    others: list[Action] = []
    system = label.taxonomy == "deployment_system_noise"
    infra = _infrastructure(diagnosis, rows, label, found)
    (own if system else others).extend(infra)
    if label.taxonomy == "task_scope_overflow":
        own += _scenarios(diagnosis, rows, words)
    # A parameter whose own family's channels look like sim's, where another family's
    # deviate, is no cause of this cluster (whatever that deviation pulls it to): no action.
    mine = _may_lead(diagnosis, rows, params, evidence)
    proposed: list[ParamEstimate] = []  # the telemetry's parameters behind `own`'s actions
    if symptom is not None and evidence is not None:
        # It names the parameter where the telemetry names none, or overrules its lead.
        own.append(_param_action(diagnosis, rows, symptom.estimate, evidence, symptom=symptom))
    for p in mine if symptom is None else []:
        strong = p.explained >= _STRONG_EXPLAINED
        if (evidence is not None and p.explained >= _MIN_EXPLAINED
                and (label.taxonomy in _PARAM_TAXONOMIES or strong)):
            action = _param_action(diagnosis, rows, p, evidence)
            (own if label.taxonomy in _PARAM_TAXONOMIES else others).append(action)
            proposed.append(p)
    if not own and evidence is not None and label.taxonomy in _PARAM_TAXONOMIES:
        candidate = _candidate(mine, evidence, label.taxonomy)
        if candidate is not None:
            own.append(_param_action(diagnosis, rows, candidate, evidence, weak=True))
            proposed.append(candidate)
    own.sort(key=lambda a: -a.expected_reduction)
    if label.taxonomy == "perception_drift":
        own.append(_perception(diagnosis, rows, label, words))
    others.sort(key=lambda a: -a.expected_reduction)
    actions = own + others
    first = next((p for p in proposed if actions and actions[0].target == f"param.{p.param}"),
                 None)
    unbacked = first is not None and _unbacked(diagnosis, rows, first, endings)
    unsure = label.taxonomy == "unexplained" or label.confidence < _UNSURE
    if unsure or unbacked or not actions:
        # Normal runs never fail: that one never ends a cluster's way says nothing there.
        never = (never_in_sim(diagnosis, rows, endings)
                 if compared_with(diagnosis.dataset) == "simulation" else None)
        inspect = _investigate(rows, label, actions, words, never,
                               first if unbacked else None)
        # A parameter nothing in sim backs is a lead to check, not the thing to do first.
        actions.insert(0 if unbacked else len(actions), inspect)
    return actions


def _unbacked(diagnosis: Diagnosis, rows: np.ndarray, p: ParamEstimate,
              endings: Endings | None) -> bool:
    """Whether nothing sim shows backs changing ``p`` for the cluster of events ``rows``:
    the data pull it to a physical bound, sim's telemetry hardly tells it (identifiability
    below :data:`_UNIDENTIFIED`, so the pull's size is the deviation's, not the
    parameter's), and sim's rollouts do not end the cluster's way more often the further it
    goes that way (:func:`~sim2real.attribute.symptoms.ending_backs`). An obstacle's
    protective stops pull an object's mass below zero through a column that barely moves;
    a worn pad pulled to zero friction is backed by sim's drops along it."""
    return (bool(at_bound(p, diagnosis.dataset.params[p.param].bounds))
            and p.identifiability < _UNIDENTIFIED
            and not ending_backs(diagnosis, rows, p, p.contrast, endings))


def lead_by_symptom(diagnosis: Diagnosis, rows: np.ndarray, label: ClusterLabel,
                    params: list[ParamEstimate], evidence: ParamEvidence | None,
                    endings: Endings | None = None) -> SymptomLead | None:
    """The parameter of a physical cluster's family that sim fails through the way the
    cluster fails (:func:`~sim2real.attribute.symptoms.symptom_lead`); for a cluster whose
    signals look like sim's (``unexplained``), the same over both physical families.
    ``None`` elsewhere, and where the telemetry's word stands.

    The telemetry's word is the first parameter that explains the cluster, else its weak
    lead (:func:`_candidate`). Where it names the same parameter, a physical cluster keeps
    it (its estimate, not the rate's: a symptom's rate saturates before a slip's friction
    reaches its real value); where it names another, the symptom overrules it only where
    sim produces every way the cluster ends
    (:func:`~sim2real.attribute.symptoms.all_endings_in_sim`): a cluster that also ends in
    ways sim never shows (a heavy load's stops and misplacements) has a cause beyond sim's
    mechanisms, and its drops need not be the pads'. ``endings`` as for
    :func:`propose_actions`.
    """
    unexplained = label.taxonomy == "unexplained"
    if evidence is None or not (unexplained or label.taxonomy in _PARAM_TAXONOMIES):
        return None
    mine = _may_lead(diagnosis, rows, params, evidence)
    taxonomies = _PARAM_TAXONOMIES if unexplained else (label.taxonomy,)
    families = {_FAMILY[t] for t in taxonomies}
    names = evidence.inference.space_.names
    lead = symptom_lead(diagnosis, rows,
                        [p for p in mine if param_family(evidence, p.param) in families],
                        dict(zip(names, evidence.success_mean.tolist(), strict=True)), endings)
    if lead is None:
        return None
    family = param_family(evidence, lead.estimate.param)
    found = [p for p in mine if p.explained >= _MIN_EXPLAINED]
    pulled = found[0] if found else _candidate(
        mine, evidence, label.taxonomy if not unexplained else _TAXONOMY[family])
    if pulled is None or (unexplained and pulled.param == lead.estimate.param):
        return lead
    if pulled.param != lead.estimate.param and all_endings_in_sim(diagnosis, rows, endings):
        return replace(lead, overrules=pulled.param)
    return None


def _may_lead(diagnosis: Diagnosis, rows: np.ndarray, params: list[ParamEstimate],
              evidence: ParamEvidence | None) -> list[ParamEstimate]:
    """The parameters of ``params`` that may be the cluster's cause (:func:`may_lead`)."""
    if evidence is None:
        return []
    deviating = deviating_families(diagnosis.signatures, rows)
    return [p for p in params if may_lead(evidence, p.param, deviating)]


def _infrastructure(diagnosis: Diagnosis, rows: np.ndarray, label: ClusterLabel,
                    found: list[Confounder]) -> list[Action]:
    """``fix_infrastructure`` on the values and robots this cluster over-represents; for a
    system cluster, on its infrastructure whatever it carries."""
    n = len(rows)
    system = label.taxonomy == "deployment_system_noise"
    confirmed = [f for f in found if f.kind == "sys" or (system and f.kind == "robot")]
    if not system and not any(f.kind == "sys" and f.carried.mean() >= 0.5 for f in confirmed):
        return []
    carried = np.zeros(n, dtype=bool)
    for f in confirmed:
        carried |= f.carried
    sig = diagnosis.signatures
    deviating = sig.system_channels[rows] >= SIGNIFICANT
    covered = carried | deviating if system else carried
    deployments = sorted(set(column_values(diagnosis.events, "deployment")[rows][covered]),
                         key=list(diagnosis.dataset.deployments).index)
    parts = [f.value if f.kind == "sys" else f"robot {f.value}" for f in confirmed]
    target = ", ".join(parts) if parts else "deployment infrastructure"
    channels = [c for c, fam, _ in label.top_channels if fam == "system"][:2]
    where = f" seen in {', '.join(channels) if channels else 'the system signals'}"
    detail = (f"Fix the infrastructure first{where}: {target}; affected deployments "
              f"{_span(deployments)}. Retraining cannot remove failures the stack causes.")
    if system or not confirmed:
        share, low, high = _share(int(covered.sum()), n)
        how = (f"{int(covered.sum())} of {n} failures in this cluster carry "
               f"{' or '.join(parts) if parts else 'system-signal deviations'}")
    else:
        share, low, high = (min(1.0, sum(f.attributable[i] for f in confirmed))
                            for i in range(3))
        how = "; ".join(
            f"{f.value}: {round(100 * f.carried.mean())}% of this cluster's failures carry "
            f"it, odds ratio {f.test.odds_ratio:.1f} within deployment and site "
            f"(Mantel-Haenszel p {f.test.p_value:.2g})" for f in confirmed)
        how = f"attributable share {how}"
    return [_action("fix_infrastructure", target, detail, (share, low, high), how)]


def _scenarios(diagnosis: Diagnosis, rows: np.ndarray,
               words: dict[str, str]) -> list[Action]:
    """``add_training_scenarios`` for each context value the reference never covered."""
    n = len(rows)
    actions = []
    for value, count in novel_context(diagnosis.signatures, rows)[:3]:
        seen = _real_with(diagnosis, value)
        shown = f"{seen} real episodes" if seen is not None else "real episodes"
        actions.append(_action(
            "add_training_scenarios", value,
            f"Add scenarios with {value} to training: {shown} show it, the {words['runs']} "
            f"have none.", _share(count, n),
            f"{count} of {n} failures in this cluster have {value}"))
    return actions


def _estimate(p: ParamEstimate) -> str:
    """The estimate ± its 95 % half-width, to the precision that interval supports."""
    half = 1.96 * p.uncertainty
    if not half > 0:
        return fmt_value(p.estimate, p.sim_low, p.sim_high)
    return f"{fmt_value(p.estimate, p.estimate - half, p.estimate + half)} ± {half:.2g}"


def new_range(p: ParamEstimate, bounds: tuple[float, float]) -> tuple[float, float, float]:
    """The randomisation range and nominal a parameter action proposes, within ``bounds``.

    Widen: the range grown to cover the estimate with two standard errors to spare.
    Recalibrate: the same width centred on the estimate.
    """
    margin = 2.0 * p.uncertainty
    if p.outside_range:
        low = min(p.sim_low, p.estimate - margin)
        high = max(p.sim_high, p.estimate + margin)
        nominal = p.sim_nominal
    else:
        half = (p.sim_high - p.sim_low) / 2
        low, high, nominal = p.estimate - half, p.estimate + half, p.estimate
    low, high = max(low, bounds[0]), min(high, bounds[1])
    return low, high, float(np.clip(nominal, low, high))


def simulator_config(param: ParamRange, low: float, high: float,
                     nominal: float) -> dict[str, object]:
    """The range ``[low, high]`` (nominal ``nominal``) written for each simulator whose
    target ``params.csv`` names: an Isaac Lab Hydra override, an MJCF attribute patch (MJCF
    holds one value: the nominal) and robosuite's relative perturbation around it."""
    out: dict[str, object] = {}
    lo, hi = _round(low), _round(high)
    if "isaaclab" in param.targets:
        path = param.targets["isaaclab"]
        path = path if path.startswith("env.") else f"env.{path}"
        out["isaaclab"] = f"{path}=[{lo},{hi}]"
    if "mjcf" in param.targets:
        out["mjcf"] = f"{param.targets['mjcf']}={_round(nominal)}"
    if "robosuite" in param.targets and nominal != 0:
        ratio = _round(max(high - nominal, nominal - low) / abs(nominal))
        keys = param.targets["robosuite"].split(".")
        node: object = ratio
        for key in reversed(keys):
            node = {key: node}
        out["robosuite"] = node
    return out


def _candidate(params: list[ParamEstimate], evidence: ParamEvidence,
               taxonomy: str) -> ParamEstimate | None:
    """For a physical cluster no parameter explains significantly: the parameter of its
    own family the data pull hardest (at least one standard error), at the value they pull
    it to. Sim's in-range telemetry may barely show a parameter whose real value lies far
    outside the range; its direction is still the best lead there is."""
    mine = [p for p in params
            if param_family(evidence, p.param) == _FAMILY[taxonomy]
            and abs(p.contrast) >= WEAK_PULL and not p.typical and np.isfinite(p.pulled)]
    if not mine:
        return None
    p = max(mine, key=lambda q: abs(q.contrast))
    outside = not p.sim_low <= p.pulled <= p.sim_high
    return replace(p, estimate=p.pulled, outside_range=outside,
                   shift=(p.pulled - p.sim_nominal) / ((p.sim_high - p.sim_low) or 1.0))


def _param_action(diagnosis: Diagnosis, rows: np.ndarray, p: ParamEstimate,
                  evidence: ParamEvidence, weak: bool = False,
                  symptom: SymptomLead | None = None) -> Action:
    """Widen the range to cover the estimate, or move the range onto it (``weak``: a
    candidate the data pull toward without significance, said so; ``symptom``: an estimate
    from how sim's rollouts end, said so, its reduction the failures beyond sim's rate)."""
    spec = diagnosis.dataset.params[p.param]
    low, high, nominal = new_range(p, spec.bounds)
    if p.outside_range:
        detail = (f"Widen the randomisation of param.{p.param} from "
                  f"{fmt_range(p.sim_low, p.sim_high)} to {fmt_range(low, high, outward=True)}: "
                  f"the real value is about {_estimate(p)}, outside the range; then retrain.")
        kind = "widen_randomization"
    else:
        detail = (f"Recalibrate param.{p.param}: nominal "
                  f"{fmt_value(p.sim_nominal, p.sim_low, p.sim_high)} -> {_estimate(p)}, "
                  f"range {fmt_range(p.sim_low, p.sim_high)} -> "
                  f"{fmt_range(low, high, outward=True)} (shift {p.shift:+.2f} of the range).")
        kind = "recalibrate_param"
    if p.confounded_with:
        detail += f" The data barely tell it from {', '.join(p.confounded_with)}: check both."
    detail += at_bound(p, spec.bounds)
    fit = (f"estimate {_estimate(p)}; explains {round(100 * p.explained)}% of the deviation; "
           f"identifiability {p.identifiability:.2f}")
    if weak:
        detail += (f" A lead, not a finding: the data pull param.{p.param} this way at "
                   f"{abs(p.contrast):.1f} standard errors; check it in simulation first.")
        fit = (f"weak lead, pulled at {abs(p.contrast):.1f} standard errors; identifiability "
               f"{p.identifiability:.2f}")
    if symptom is not None:
        detail += _symptom_words(symptom)
        reduction = symptom.share
        how = (f"symptom rate: {round(100 * symptom.real_rate, 1)}% of the {symptom.episodes} "
               f"real episodes at this cluster's robots end in {symptom.symptom}, sim "
               f"{round(100 * symptom.sim_rate, 1)}% at the successes' value of param.{p.param}; "
               f"the reduction is the share of the cluster's failures beyond sim's rate")
    else:
        families = deviating_families(diagnosis.signatures, rows) or None
        reduction, inside = emulated_reduction(evidence, rows, p.param, low, high, families)
        how = (f"emulator: {inside[1]} of {len(rows)} failures fall back inside sim's no-gap "
               f"spread under this change ({inside[0]} already were; {fit})")
    action = _action(kind, f"param.{p.param}", detail, reduction, how)
    config = simulator_config(spec, low, high, nominal)
    return action.model_copy(update={"config": config}) if config else action


def _symptom_words(lead: SymptomLead) -> str:
    p = lead.estimate
    more = "higher" if lead.z > 0 else "lower"
    words = (f" Sim's telemetry does not single out param.{p.param}, but how its rollouts "
             f"end does: they end in {lead.symptom} more often the {more} it is (logistic "
             f"slope {abs(lead.z):.1f} standard errors), and reach the real rate where this "
             f"cluster's failures happen at about {_estimate(p)}.")
    if lead.overrules is not None:
        words += (f" It comes before param.{lead.overrules}, which the telemetry points to: "
                  f"every way these failures end is one sim produces.")
    return words


def at_bound(p: ParamEstimate, bounds: tuple[float, float]) -> str:
    """What an action says where the estimate sits at a physical bound of ``bounds``: the
    data pull past it (a mass below zero), so that is as far as simulation can go, and
    the parameter alone may not be what these failures need; else nothing."""
    low, high = bounds
    tol = 1e-9 * max(p.sim_high - p.sim_low, 1e-12)
    if p.estimate <= low + tol:
        side, value = "lower", low
    elif p.estimate >= high - tol:
        side, value = "upper", high
    else:
        return ""
    return (f" The data pull param.{p.param} to its {side} physical bound "
            f"({value:g}) or past it: simulation can go no "
            f"further, and this parameter alone may not reproduce these failures.")


def emulated_reduction(ev: ParamEvidence, rows: np.ndarray, param: str, low: float,
                       high: float, families: Collection[str] | None = None
                       ) -> tuple[tuple[float, float, float], tuple[int, int]]:
    """The share of the cluster's events the change ``param`` -> ``[low, high]`` brings
    back inside sim's no-gap spread, by the forward model learnt on sim.

    Each event's own shift of ``param`` (from the real successes, in spread units) is read
    off its deviation along the parameter's learnt effect, limited to what the new range
    covers, and taken out. An event is inside when its deviation along the cluster's
    signature is within what 95 % of sim-vs-sim windows show along it once their known
    parameter differences are taken out.

    The signature is the part of the cluster's median deviation sim's parameters can
    reproduce at all (its ridge projection on the forward model's columns): what no
    parameter moves, no parameter change can bring back either, and counting it would
    leave every event outside whatever the change (a noise cause whose learnt effect
    reproduces a third of the deviation then claimed 1 of 15 events).

    Only the features of ``families`` count (those where the cluster deviates; ``None``:
    all), as in :func:`sim2real.attribute.params.cluster_fit`.

    Returns:
        (reduction, its 95 % interval) and (events inside before, after).
    """
    inf = ev.inference
    space = inf.space_
    j = space.names.index(param)
    keep = ev.features(families)
    columns = inf.columns()[keep]
    column = columns[:, j]
    deviation = (ev.whitened[rows] - ev.success_whitened)[:, keep]
    direction = _reproducible(columns, np.median(deviation, axis=0), inf.ridge)
    norm = float(np.linalg.norm(direction))
    if norm == 0:
        return (0.0, 0.0, 0.0), (0, 0)
    direction /= norm
    tail = float(np.quantile(np.abs(inf.null_[:, keep] @ direction), _TAIL))
    own = deviation @ column / (column @ column + inf.ridge)
    lo, hi = ((np.array([low, high]) - ev.success_mean[j]) / space.spread[j])
    shift = np.clip(own, min(lo, 0.0), max(hi, 0.0))
    before = int((np.abs(deviation @ direction) <= tail).sum())
    after = int((np.abs((deviation - np.outer(shift, column)) @ direction) <= tail).sum())
    n = len(rows)
    gained, low_ci, high_ci = _share(after, n)
    done = before / n
    return ((max(0.0, gained - done), max(0.0, low_ci - done), max(0.0, high_ci - done)),
            (before, after))


def _reproducible(columns: np.ndarray, deviation: np.ndarray, ridge: float) -> np.ndarray:
    """The part of ``deviation`` ``(n_features,)`` the parameters' learnt effects
    ``columns`` ``(n_features, n_params)`` reproduce: its ridge-regularised projection."""
    gram = columns.T @ columns + ridge * np.eye(columns.shape[1])
    return columns @ np.linalg.solve(gram, columns.T @ deviation)


def _perception(diagnosis: Diagnosis, rows: np.ndarray, label: ClusterLabel,
                words: dict[str, str]) -> Action:
    sig = diagnosis.signatures
    deviating = sig.family("perception")[rows] >= SIGNIFICANT
    channels = [c for c, fam, _ in label.top_channels if fam == "perception"][:3]
    target = ", ".join(channels) or "perception"
    return _action(
        "improve_perception", target,
        f"Make perception robust to what {target} show (augment its training data with "
        f"these conditions, or fix the sensing setup at the affected site).",
        _share(int(deviating.sum()), len(rows)),
        f"{int(deviating.sum())} of {len(rows)} failures have perception beyond "
        f"{SIGNIFICANT}x {words['short']}'s variability")


def _investigate(rows: np.ndarray, label: ClusterLabel, actions: list[Action],
                 words: dict[str, str], never: tuple[str, int, float] | None = None,
                 unbacked: ParamEstimate | None = None) -> Action:
    """``never``: the cluster's symptom, the sim rollouts of its tasks (none of which ends
    that way) and its real rate (:func:`~sim2real.attribute.symptoms.never_in_sim`); said,
    since no change within sim's ranges can then reproduce the failures. ``unbacked``: the
    parameter the telemetry points to that nothing in sim backs (:func:`_unbacked`); said,
    since its action follows this one."""
    covered = max((a.expected_reduction for a in actions), default=0.0)
    lead = ", ".join(c for c, _, _ in label.top_channels[:2]) or "the signals"
    left = max(0.0, 1.0 - covered)
    detail = (f"Nothing clear to change: inspect these failures beside their matched "
              f"{words['runs']} ({lead} differ most); label confidence {label.confidence:.2f}.")
    if never is not None:
        detail += (f" None of the {never[1]:,} {words['runs']} of its tasks ends in "
                   f"{never[0]}, against {100 * never[2]:.1f} % of the real episodes where "
                   f"these failures happen: within the ranges it samples sim never fails this "
                   f"way, so either what causes it (a contact, an obstacle, a step of the "
                   f"task) is missing from the simulation or a parameter lies beyond its "
                   f"range.")
    if unbacked is not None:
        detail += (f" The data pull param.{unbacked.param} to a physical bound, but sim's "
                   f"telemetry hardly tells it (identifiability "
                   f"{unbacked.identifiability:.2f}) and sim's rollouts along it do not end "
                   f"this way more often: check that lead in simulation (`sim2real check` "
                   f"with the simulator's adapter) before changing it.")
    return _action("investigate", f"cluster events ({lead})", detail, (left, left, left),
                   f"share of the cluster's {len(rows)} failures no other action addresses")


def _action(kind: str, target: str, detail: str, reduction: tuple[float, float, float],
            evidence: str) -> Action:
    share, low, high = (float(np.clip(x, 0.0, 1.0)) for x in reduction)
    return Action.model_validate({
        "kind": kind, "target": target, "detail": detail,
        "expected_reduction": round(share, 3), "reduction_low": round(min(low, share), 3),
        "reduction_high": round(max(high, share), 3), "evidence": evidence})


def _share(k: int, n: int) -> tuple[float, float, float]:
    """``k / n`` and its Clopper-Pearson 95 % interval."""
    if n == 0:
        return 0.0, 0.0, 0.0
    low = float(stats.beta.ppf(0.025, k, n - k + 1)) if k > 0 else 0.0
    high = float(stats.beta.isf(0.025, k + 1, n - k)) if k < n else 1.0
    return k / n, low, high


def _round(x: float) -> float:
    return float(f"{x:.4g}")


def _real_with(diagnosis: Diagnosis, value: str) -> int | None:
    """Real episodes whose ``ctx`` column equals ``value`` (``column=value``)."""
    column, _, wanted = value.partition("=")
    episodes = diagnosis.dataset.episodes
    if column not in episodes.column_names:
        return None
    source = np.array(episodes["source"].to_pylist(), dtype=object)
    values = np.array(episodes[column].cast(pa.string()).to_pylist(), dtype=object)
    if pa.types.is_integer(episodes[column].type) or pa.types.is_floating(
            episodes[column].type):
        return None  # a number beyond sim's range: the count is the cluster's own
    return int(((source == "real") & (values == wanted)).sum())


def _span(deployments: list[str]) -> str:
    if not deployments:
        return "none"
    return deployments[0] if len(deployments) == 1 else f"{deployments[0]}..{deployments[-1]}"



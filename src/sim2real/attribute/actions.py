"""Ranked actions per cluster, each with the share of the cluster's failures it addresses.

Order of business, as an engineer triaging a failure mode would do it:

1. infrastructure first: where the cluster is system noise, or suspicious ``sys.*`` values
   mark most of its failures, nothing learnt in simulation can be trusted until that is
   fixed (``fix_infrastructure``);
2. then what simulation lacks: unseen context (``add_training_scenarios``), a parameter
   whose real value lies outside the randomisation range (``widen_randomization``) or
   whose nominal is off (``recalibrate_param``), perception that drifted
   (``improve_perception``);
3. ``investigate`` when nothing above is clear, or the cluster's label is unsure.

``expected_reduction`` is always a count ratio over the cluster's own events: the share
that carries the flagged value, shows the unseen context, points beyond the range, etc.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from sim2real._format import fmt_range, fmt_value
from sim2real.cluster.taxonomy import SIGNIFICANT
from sim2real.report.model import Action

if TYPE_CHECKING:
    from sim2real.attribute.params import ParamEstimate
    from sim2real.cluster.taxonomy import ClusterLabel
    from sim2real.pipeline import Diagnosis

__all__ = ["propose_actions"]

_MIN_EXPLAINED = 0.1  # a parameter explaining less is no basis for changing the sim
_STRONG_EXPLAINED = 0.5  # ... unless it explains this much, any taxonomy gets the action
_UNSURE = 0.3  # label confidence below which "investigate" is added
_SHARE = 0.2  # a value or robot matters when it carries this share of the cluster
_PARAM_TAXONOMIES = ("dynamics_mismatch", "perception_drift")


def propose_actions(
    diagnosis: Diagnosis, rows: np.ndarray, label: ClusterLabel, params: list[ParamEstimate]
) -> list[Action]:
    """Actions most likely to shrink the cluster of events ``rows``, most promising first.

    Args:
        diagnosis: the analysis.
        rows: the cluster's event rows.
        label: its taxonomy.
        params: its parameter estimates, most explaining first.
    """
    infra = _infrastructure(diagnosis, rows, label)
    others: list[Action] = []
    if label.taxonomy == "task_scope_overflow":
        others += _scenarios(diagnosis, rows)
    for p in params:
        strong = p.explained >= _STRONG_EXPLAINED
        if p.explained >= _MIN_EXPLAINED and (label.taxonomy in _PARAM_TAXONOMIES or strong):
            others.append(_param_action(p))
    if label.taxonomy == "perception_drift":
        others.append(_perception(diagnosis, rows, label))
    others.sort(key=lambda a: -a.expected_reduction)
    actions = infra + others
    unsure = label.taxonomy == "unexplained" or label.confidence < _UNSURE
    if unsure or not actions:
        actions.append(_investigate(diagnosis, rows, label, actions))
    return actions


def _infrastructure(diagnosis: Diagnosis, rows: np.ndarray, label: ClusterLabel) -> list[Action]:
    """``fix_infrastructure`` on the flagged configs and robots where the cluster sits."""
    sig = diagnosis.signatures
    n = len(rows)
    flagged = Counter(v for i in rows for v in sig.sys_values[i])
    values = [v for v, c in flagged.most_common(3) if c >= _SHARE * n]
    robots = _concentrated(_column(diagnosis.events, "robot_id")[rows])
    system = label.taxonomy == "deployment_system_noise"
    carried = np.array([any(v in values for v in sig.sys_values[i]) for i in rows], bool)
    if not system and carried.mean() < 0.5:
        return []
    if not system and not values:
        return []
    on_robot = np.isin(_column(diagnosis.events, "robot_id")[rows], robots)
    covered = carried | on_robot if system else carried
    deployments = sorted(set(_column(diagnosis.events, "deployment")[rows][covered]),
                         key=list(diagnosis.dataset.deployments).index)
    parts = [*values, *(f"robot {r}" for r in robots)]
    target = ", ".join(parts) if parts else "deployment infrastructure"
    channels = [c for c, fam, _ in label.top_channels if fam == "system"][:2]
    where = f" seen in {', '.join(channels) if channels else 'the system signals'}"
    detail = (f"Fix the infrastructure first{where}: {target}; affected deployments "
              f"{_span(deployments)}. Retraining cannot remove failures the stack causes.")
    share = float(covered.mean()) if covered.any() else (1.0 if system else 0.0)
    evidence = (f"{int(covered.sum())} of {n} failures in this cluster carry "
                f"{' or '.join(parts) if parts else 'system-signal deviations'}")
    return [Action(kind="fix_infrastructure", target=target, detail=detail,
                   expected_reduction=round(share, 3), evidence=evidence)]


def _scenarios(diagnosis: Diagnosis, rows: np.ndarray) -> list[Action]:
    """``add_training_scenarios`` for each context value sim never covered."""
    sig = diagnosis.signatures
    n = len(rows)
    novel = Counter(v for i in rows for v in sig.novelty.values[i])
    actions = []
    for value, count in novel.most_common(3):
        seen = _real_with(diagnosis, value)
        shown = f"{seen} real episodes" if seen is not None else "real episodes"
        actions.append(Action(
            kind="add_training_scenarios", target=value,
            detail=(f"Add simulation scenarios with {value}: {shown} show it, sim has none; "
                    f"include it in training."),
            expected_reduction=round(count / n, 3),
            evidence=f"{count} of {n} failures in this cluster have {value}"))
    return actions


def _estimate(p: ParamEstimate) -> str:
    """The estimate ± its 95 % half-width, to the precision that interval supports."""
    half = 1.96 * p.uncertainty
    if not half > 0:
        return fmt_value(p.estimate, p.sim_low, p.sim_high)
    return f"{fmt_value(p.estimate, p.estimate - half, p.estimate + half)} ± {half:.2g}"


def _param_action(p: ParamEstimate) -> Action:
    """Widen the range to cover the estimate, or move the nominal to it."""
    evidence = (f"{round(100 * p.event_share)}% of this cluster's failures point "
                f"{'beyond the range' if p.outside_range else 'to the same side of nominal'}"
                f" (estimate {_estimate(p)}; explains "
                f"{round(100 * p.explained)}% of the deviation; identifiability "
                f"{p.identifiability:.2f})")
    if p.outside_range:
        margin = 2.0 * p.uncertainty
        low = min(p.sim_low, p.estimate - margin)
        if p.sim_low >= 0:
            low = max(low, 0.0)  # a range sim kept non-negative (a mass, a friction) stays so
        high = max(p.sim_high, p.estimate + margin)
        detail = (f"Widen the randomisation of param.{p.param} from "
                  f"{fmt_range(p.sim_low, p.sim_high)} to {fmt_range(low, high, outward=True)}: "
                  f"the real value is about {_estimate(p)}, outside the range; then retrain.")
        kind = "widen_randomization"
    else:
        detail = (f"Recalibrate param.{p.param}: nominal "
                  f"{fmt_value(p.sim_nominal, p.sim_low, p.sim_high)} -> {_estimate(p)} "
                  f"(shift {p.shift:+.2f} of the range).")
        kind = "recalibrate_param"
    if p.confounded_with:
        detail += f" The data barely tell it from {', '.join(p.confounded_with)}: check both."
    return Action(kind=kind, target=f"param.{p.param}", detail=detail,  # type: ignore[arg-type]
                  expected_reduction=round(p.event_share, 3), evidence=evidence)


def _perception(diagnosis: Diagnosis, rows: np.ndarray, label: ClusterLabel) -> Action:
    sig = diagnosis.signatures
    deviating = sig.family("perception")[rows] >= SIGNIFICANT
    channels = [c for c, fam, _ in label.top_channels if fam == "perception"][:3]
    target = ", ".join(channels) or "perception"
    return Action(
        kind="improve_perception", target=target,
        detail=(f"Make perception robust to what {target} show (augment its training data "
                f"with these conditions, or fix the sensing setup at the affected site)."),
        expected_reduction=round(float(deviating.mean()), 3),
        evidence=(f"{int(deviating.sum())} of {len(rows)} failures have perception beyond "
                  f"{SIGNIFICANT}x sim's variability"))


def _investigate(diagnosis: Diagnosis, rows: np.ndarray, label: ClusterLabel,
                 actions: list[Action]) -> Action:
    covered = max((a.expected_reduction for a in actions), default=0.0)
    lead = ", ".join(c for c, _, _ in label.top_channels[:2]) or "the signals"
    return Action(
        kind="investigate", target=f"cluster events ({lead})",
        detail=(f"Nothing clear to change: inspect these failures beside their matched sim "
                f"rollouts ({lead} differ most); label confidence {label.confidence:.2f}."),
        expected_reduction=round(max(0.0, 1.0 - covered), 3),
        evidence=f"share of the cluster's {len(rows)} failures no other action addresses")


def _real_with(diagnosis: Diagnosis, value: str) -> int | None:
    """Real episodes whose ``ctx`` column equals ``value`` (``column=value``)."""
    column, _, wanted = value.partition("=")
    episodes = diagnosis.dataset.episodes
    if column not in episodes.column_names:
        return None
    source = np.array(episodes["source"].to_pylist(), dtype=object)
    values = np.array(episodes[column].cast(pa.string()).to_pylist(), dtype=object)
    if pa.types.is_floating(episodes[column].type):
        return None  # a number beyond sim's range: the count is the cluster's own
    return int(((source == "real") & (values == wanted)).sum())


def _concentrated(values: np.ndarray) -> list[str]:
    """The few values (at most 3) that together carry most (60 %) of ``values``."""
    counts = Counter(v for v in values if v is not None)
    top = [v for v, c in counts.most_common(3) if c >= _SHARE * len(values)]
    if len(counts) <= 1 or sum(counts[v] for v in top) < 0.6 * len(values):
        return top if len(counts) == 1 else []
    return [str(v) for v in top]


def _span(deployments: list[str]) -> str:
    if not deployments:
        return "none"
    return deployments[0] if len(deployments) == 1 else f"{deployments[0]}..{deployments[-1]}"


def _column(table: pa.Table, name: str) -> np.ndarray:
    if name not in table.column_names:
        return np.full(table.num_rows, None, dtype=object)
    return np.array(table[name].to_pylist(), dtype=object)

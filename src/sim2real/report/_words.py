"""The words of the report pages: labels, the three summary sentences, anchors.

Kept apart from the figures and templates so the phrasing can be read and tested alone.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Mapping

from sim2real._format import fmt_p
from sim2real.report.model import Action, ClusterReport, ReportModel, ValidationModel

__all__ = [
    "ACTION_LABELS",
    "NOT_ADDITIVE",
    "TAXONOMY_HELP",
    "TAXONOMY_LABELS",
    "anchor",
    "best_action",
    "extra",
    "justification",
    "p_is",
    "summary_sentences",
    "validation_sentence",
]

TAXONOMY_LABELS: Mapping[str, str] = {
    "perception_drift": "Perception drift",
    "dynamics_mismatch": "Dynamics mismatch",
    "task_scope_overflow": "Task-scope overflow",
    "deployment_system_noise": "Deployment-system noise",
    "unexplained": "Unexplained",
}
TAXONOMY_HELP: Mapping[str, str] = {
    "perception_drift": "what the robot senses differs from simulation "
    "(camera, detections, pose estimates)",
    "dynamics_mismatch": "the physics differs from simulation (friction, mass, contact, actuators)",
    "task_scope_overflow": "the robot meets situations outside what it was trained on "
    "in simulation",
    "deployment_system_noise": "the robot's compute or network misbehaves "
    "(latency, dropped messages)",
    "unexplained": "no cause family stands out; the signature needs a person's look",
}
ACTION_LABELS: Mapping[str, str] = {
    "recalibrate_param": "Recalibrate",
    "widen_randomization": "Widen randomisation",
    "add_training_scenarios": "Add training scenarios",
    "fix_infrastructure": "Fix infrastructure",
    "improve_perception": "Improve perception",
    "investigate": "Investigate",
}
# Under a cluster's actions (and in report.json): each reduction is computed alone.
NOT_ADDITIVE = ("Each reduction assumes its action alone: several actions on one cluster "
                "remove overlapping failures, so their reductions do not add up.")
# Shown next to an action when the analysis gave no ``evidence`` text of its own.
_JUSTIFY: Mapping[str, str] = {
    "recalibrate_param": "the share of this cluster's failures whose drift the parameter's "
    "estimated shift accounts for; it assumes they stop once simulation uses the estimate.",
    "widen_randomization": "the share of this cluster's failures that point to parameter "
    "values outside the range simulation samples from.",
    "add_training_scenarios": "the share of this cluster's failures that happen in the named "
    "context, which simulation covers too rarely.",
    "fix_infrastructure": "the share of this cluster's failures whose system signals sit "
    "outside what simulation and healthy runs show.",
    "improve_perception": "the share of this cluster's failures whose perception channels "
    "drift beyond the spread of the sim rollouts.",
    "investigate": "no targeted fix is clear; the number is a rough upper bound.",
}


def extra(model: object, name: str, default: object = None) -> object:
    """An extension field of a report model, declared or not, else ``default``.

    The model may declare it (a field) or carry it as an extra key (an older or newer
    analysis), so the pages render it either way and never require it.
    """
    value = getattr(model, name, None)
    if value is None:
        value = (getattr(model, "model_extra", None) or {}).get(name)
    return default if value is None else value


def anchor(kind: str, ident: str) -> str:
    """A URL-fragment-safe anchor; a hash keeps two IDs that slug alike apart."""
    slug = re.sub(r"[^A-Za-z0-9_.-]", "-", ident)
    if slug != ident:
        slug += "-" + hashlib.sha1(ident.encode()).hexdigest()[:6]
    return f"{kind}-{slug}"


def justification(action: Action) -> str:
    """How ``expected_reduction`` is justified: the analysis's evidence, else the rule."""
    evidence = extra(action, "evidence")
    if isinstance(evidence, str) and evidence.strip():
        return evidence.strip()
    return "Expected reduction is " + _JUSTIFY.get(action.kind, "an estimate of the analysis.")


def _pct(rate: float) -> str:
    return f"{100 * rate:.1f}%"


def _name(c: ClusterReport) -> str:
    return f"{c.cluster_id} ({TAXONOMY_LABELS[c.taxonomy].lower()})"


def _episodes_per_deployment(model: ReportModel) -> dict[str, int]:
    """Real episodes per deployment: every cluster's trend shares the same denominators."""
    out: dict[str, int] = {}
    for c in model.clusters:
        for r in c.trend.per_deployment:
            out[r.deployment] = max(out.get(r.deployment, 0), r.episodes)
    return out


def _cluster_rate(c: ClusterReport, deployment: str) -> float | None:
    for r in c.trend.per_deployment:
        if r.deployment == deployment:
            return r.rate
    return None


def _what_changed(model: ReportModel) -> str:
    deployments = model.dataset.deployments
    if not deployments:
        return f"{model.dataset.failures} real failures, with no deployment recorded."
    failures = Counter(e.deployment for e in model.events)
    episodes = _episodes_per_deployment(model)
    last = deployments[-1]

    def overall(d: str) -> tuple[str, float | None]:
        n = episodes.get(d, 0)
        if not n:
            return f"{failures[d]} failures", None
        return f"{failures[d]} of {n} episodes failed ({_pct(failures[d] / n)})", failures[d] / n

    text, rate = overall(last)
    if len(deployments) == 1:
        return f"Only one deployment so far ({last}): {text}; nothing to compare yet."
    prev = deployments[-2]
    _, prev_rate = overall(prev)
    sentence = f"In {last}, {text}"
    if rate is not None and prev_rate is not None:
        if prev_rate > 0 and abs(rate - prev_rate) / prev_rate < 0.1:
            sentence += f", about the same as {prev}"
        else:
            sentence += f", {'up' if rate > prev_rate else 'down'} from {_pct(prev_rate)} in {prev}"
    moved = _biggest_move(model, prev, last)
    if moved:
        sentence += f"; {moved}"
    new = [c.cluster_id for c in model.clusters if extra(c, "lifecycle") == "new"]
    if new:
        sentence += f"; new cluster{'s' if len(new) > 1 else ''}: {', '.join(new)}"
    return sentence + "."


def _biggest_move(model: ReportModel, prev: str, last: str) -> str:
    best: tuple[float, ClusterReport, float, float] | None = None
    for c in model.clusters:
        a, b = _cluster_rate(c, prev), _cluster_rate(c, last)
        if a is None or b is None or a == b:
            continue
        if best is None or abs(b - a) > abs(best[3] - best[2]):
            best = (abs(b - a), c, a, b)
    if best is None:
        return ""
    _, c, a, b = best
    verb = "rose" if b > a else "fell"
    return f"the biggest change is {_name(c)}, which {verb} from {_pct(a)} to {_pct(b)}"


def _fastest(model: ReportModel) -> str:
    by_id = {c.cluster_id: c for c in model.clusters}
    c = by_id.get(model.fastest_growing or "")
    n = len(model.dataset.deployments)
    if c is None:
        if not model.clusters:
            return "No failure clusters were found, so nothing is growing."
        return f"No cluster is growing significantly across the {n} deployment{'s' * (n != 1)}."
    factor = math.exp(c.trend.growth)
    last = c.trend.per_deployment[-1] if c.trend.per_deployment else None
    now = f" and now stands at {_pct(last.rate)} of episodes in {last.deployment}" if last else ""
    return (
        f"{c.cluster_id} ({TAXONOMY_LABELS[c.taxonomy].lower()}, {c.confidence:.0%} confidence) "
        f"is growing fastest: its rate is multiplied by about {factor:.2f} per deployment "
        f"(p {p_is(c.trend.p_value)}){now}."
    )


def p_is(p: float) -> str:
    """``< 0.001`` or ``= 0.03``: a p-value after ``p``."""
    text = fmt_p(p)
    return text if text.startswith("<") else f"= {text}"


def best_action(model: ReportModel) -> tuple[ClusterReport, Action, float] | None:
    """The action expected to remove the most failures per deployment, with that number."""
    best: tuple[ClusterReport, Action, float] | None = None
    for c in model.clusters:
        last = c.trend.per_deployment[-1] if c.trend.per_deployment else None
        base = float(last.failures) if last else float(c.size)
        for a in c.actions:
            gain = a.expected_reduction * base
            if best is None or gain > best[2]:
                best = (c, a, gain)
    return best


def _do_next(model: ReportModel) -> str:
    pick = best_action(model)
    if pick is None:
        if model.clusters:
            return (
                f"No actions were computed; start from the explanation of "
                f"{_name(model.clusters[0])}, the most urgent cluster."
            )
        return "Nothing to do: no failure clusters."
    c, a, gain = pick
    per = f", about {gain:.0f} per deployment" if gain >= 1 else ""
    detail = a.detail.rstrip(".")
    if detail[:2].istitle():  # "Add bright light" reads on after a colon as "add bright light"
        detail = detail[0].lower() + detail[1:]
    return (
        f"Most likely to help: {ACTION_LABELS[a.kind].lower()} ({a.target}): {detail}; "
        f"expected to remove {a.expected_reduction:.0%} of {c.cluster_id}'s failures{per}."
    )


def summary_sentences(model: ReportModel) -> list[tuple[str, str]]:
    """The three sentences at the top: what changed, what grows fastest, what to do."""
    return [
        ("Changed", _what_changed(model)),
        ("Growing", _fastest(model)),
        ("Do next", _do_next(model)),
    ]


_VERDICT_WORDS: Mapping[str, str] = {
    "shrank": "shrank",
    "grew": "grew",
    "gone": "is gone",
    "new": "is new",
    "unchanged": "is unchanged",
}


def validation_sentence(model: ValidationModel) -> str:
    """One sentence: what became of the clusters the fix targeted, and of the others.

    Each cluster is named with the verdict word its table row shows.
    """
    by_id = {c.cluster_id: c for c in model.clusters}
    raw = extra(model, "targets", [])
    targets = [str(t) for t in raw] if isinstance(raw, list) else []

    def said(cid: str) -> str:
        c = by_id.get(cid)
        return f"{cid} {_VERDICT_WORDS[c.verdict]}" if c else f"{cid} was not found"

    moved = [c.cluster_id for c in model.clusters
             if c.cluster_id not in targets and c.verdict != "unchanged"]
    parts = []
    if targets:
        parts.append("targeted " + ", ".join(said(t) for t in targets))
    if moved:
        parts.append(("elsewhere " if targets else "") + ", ".join(said(m) for m in moved))
    else:
        parts.append("nothing else changed significantly" if targets
                     else "no cluster changed significantly")
    versus = f"{', '.join(model.candidate)} against {', '.join(model.baseline)}"
    return f"In {versus}: {'; '.join(parts)}."

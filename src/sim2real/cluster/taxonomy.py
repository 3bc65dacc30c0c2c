"""Name a cluster's cause family, with a confidence and a sentence a person can act on."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim2real.cluster.location import Excess
from sim2real.drift.compute import Signatures
from sim2real.drift.signature import CHANNEL_FAMILIES, SCORE_FAMILIES, SIGNIFICANT

__all__ = ["SIGNIFICANT", "ClusterLabel", "event_families", "label_cluster", "primary_family",
           "top_channels"]
_FAMILY_TAXONOMY = {
    "perception": "perception_drift",
    "dynamics": "dynamics_mismatch",
    "system": "deployment_system_noise",
    "task_scope": "task_scope_overflow",
}


@dataclass(frozen=True)
class ClusterLabel:
    """The taxonomy of one cluster and why."""

    taxonomy: str
    confidence: float
    explanation: str
    top_channels: list[tuple[str, str, float]]
    family_medians: dict[str, float]


def top_channels(sig: Signatures, rows: np.ndarray, n: int = 5) -> list[tuple[str, str, float]]:
    """``(channel, family, median effect)`` of the cluster's most deviating channels."""
    med = np.median(sig.effects[rows], axis=0)
    order = np.argsort(-np.abs(med), kind="stable")[:n]
    return [(sig.channels[i], sig.channel_families[i], float(med[i])) for i in order]


def label_cluster(
    sig: Signatures, rows: np.ndarray, robots: np.ndarray, sites: np.ndarray,
    excess: Sequence[Excess] = (), reference: str = "simulation",
) -> ClusterLabel:
    """Label the events ``rows`` of ``sig`` as one cluster.

    ``excess``: the places where the cluster fails more often than sim predicts
    (:func:`sim2real.cluster.location.excess`); the explanation names the first three.
    ``reference``: what the failures were compared with, ``simulation`` or ``normal
    operation`` (normal real runs declared ``source = reference``), in the explanation's
    words.

    The rule a careful engineer would follow: unseen context first (nothing else can be
    trusted where sim never went); otherwise infrastructure when its deviation is at least
    half the largest (a latency spike drives a larger tracking error), then of perception
    and dynamics the one that deviates first in the window, perception on a tie (a
    perception error precedes the dynamics it causes). No family beyond sim's own
    variability: unexplained (or infrastructure, when the events run under a suspicious
    ``sys.*`` value).
    """
    per_event = event_families(sig, rows)
    medians = np.median(sig.family_scores[rows], axis=0)
    medians[SCORE_FAMILIES.index("system")] = np.median(sig.system_channels[rows])
    taxonomy = primary_family(medians, np.median(sig.onset[rows], axis=0),
                              float(np.median(sig.sys_evidence[rows])))
    agree = float(np.mean([t == taxonomy for t in per_event]))
    medians = {f: float(v) for f, v in zip(SCORE_FAMILIES, np.median(sig.family_scores[rows],
                                                                      axis=0), strict=True)}
    channels = top_channels(sig, rows)
    if taxonomy == "unexplained":
        confidence = agree
    else:
        family = next(f for f, t in _FAMILY_TAXONOMY.items() if t == taxonomy)
        strength = 1.0 - np.exp(-(medians[family] - 1.0) / 2.0)
        confidence = agree * float(np.clip(strength, 0.0, 1.0))
    where = _where(rows, robots, sites)
    words = _WORDS[reference]
    text = _explain(taxonomy, sig, rows, channels, medians, where, words)
    if excess:
        text += (f" More failures than {words['short']} predicts at "
                 f"{'; '.join(map(str, excess[:3]))}.")
    return ClusterLabel(taxonomy, round(float(confidence), 3), text, channels, medians)


def primary_family(family: np.ndarray, onset: np.ndarray, sys_evidence: float = 0.0) -> str:
    """The taxonomy that one set of scores points to (an event's, or a cluster's medians).

    Args:
        family: scores in :data:`SCORE_FAMILIES` order; ``system`` from channels alone.
        onset: first deviating segment per channel family.
        sys_evidence: over-representation of failures under the event's ``sys.*`` values.
            It marks every failure of a robot whatever the cause, so it decides only where
            no channel family deviates (a stale config whose effect telemetry misses).
    """
    score = dict(zip(SCORE_FAMILIES, family, strict=True))
    first = dict(zip(CHANNEL_FAMILIES, onset, strict=True))
    if score["task_scope"] >= SIGNIFICANT:
        return _FAMILY_TAXONOMY["task_scope"]
    deviating = {f: score[f] for f in ("perception", "dynamics", "system")
                 if score[f] >= SIGNIFICANT}
    if not deviating:
        return _FAMILY_TAXONOMY["system"] if sys_evidence >= SIGNIFICANT else "unexplained"
    if "system" in deviating and deviating["system"] >= 0.5 * max(deviating.values()):
        return _FAMILY_TAXONOMY["system"]
    if "perception" in deviating and "dynamics" in deviating:
        winner = "perception" if first["perception"] <= first["dynamics"] else "dynamics"
        return _FAMILY_TAXONOMY[winner]
    physical = {f: v for f, v in deviating.items() if f != "system"}
    return _FAMILY_TAXONOMY[max(physical, key=physical.__getitem__)]


def event_families(sig: Signatures, rows: np.ndarray | None = None) -> np.ndarray:
    """``(n,)`` :func:`primary_family` of each event (all events when ``rows`` is None)."""
    rows = np.arange(len(sig.episode_ids)) if rows is None else rows
    system = SCORE_FAMILIES.index("system")
    out = []
    for i in rows:
        scores = sig.family_scores[i].copy()
        scores[system] = sig.system_channels[i]
        out.append(primary_family(scores, sig.onset[i], float(sig.sys_evidence[i])))
    return np.array(out, dtype=object)


def _where(rows: np.ndarray, robots: np.ndarray, sites: np.ndarray) -> str:
    parts = []
    for label, every in (("site", sites), ("robot", robots)):
        # Where every failure happened at one place, being concentrated there says nothing.
        if len({v for v in every if v is not None}) < 2:
            continue
        counts = Counter(v for v in every[rows] if v is not None)
        top = [v for v, c in counts.most_common(3) if c >= 0.2 * len(rows)]
        share = sum(counts[v] for v in top) / len(rows)
        if top and share >= 0.6 and len(top) < len(counts) + (len(counts) == 1):
            parts.append(f"{label}{'s' if len(top) > 1 else ''} {', '.join(map(str, top))} "
                         f"({round(100 * share)}% of events)")
    return "; ".join(parts)


def _fmt(channel: tuple[str, str, float]) -> str:
    return f"{channel[0]} {channel[2]:+.1f}σ"


def _explain(
    taxonomy: str,
    sig: Signatures,
    rows: np.ndarray,
    channels: list[tuple[str, str, float]],
    medians: dict[str, float],
    where: str,
    words: dict[str, str],
) -> str:
    located = f" Concentrated at {where}." if where else ""
    short = words["short"]
    if taxonomy == "unexplained":
        return (f"These failures look like {words['own']}: median drift score "
                f"{np.median(sig.drift_score[rows]):.1f}, no signal family beyond "
                f"{SIGNIFICANT}x {short}'s variability; inspect the matched "
                f"{words['matched']}.{located}")
    if taxonomy == "task_scope_overflow":
        values = Counter(v for i in rows for v in sig.novelty.values[i])
        shown = ", ".join(f"{v} ({c}/{len(rows)})" for v, c in values.most_common(3))
        return (f"Context never seen in simulation: {shown}; nearest rollouts differ most in "
                f"{', '.join(_fmt(c) for c in channels[:2])}. Add these scenarios to training."
                f"{located}")
    family = next(f for f, t in _FAMILY_TAXONOMY.items() if t == taxonomy)
    own = [c for c in channels if c[1] == family][:2] or channels[:2]
    lead = ", ".join(_fmt(c) for c in own)
    if taxonomy == "deployment_system_noise":
        flagged = Counter(v for i in rows for v in sig.sys_values[i])
        suspects = ", ".join(v for v, _ in flagged.most_common(2))
        config = f"; failures over-represented under {suspects}" if flagged else ""
        return (f"Infrastructure, not the policy: {lead} versus real successes{config}. "
                f"Fix it before retraining.{located}")
    other = "dynamics" if family == "perception" else "perception"
    if other not in sig.channel_families:  # no channel of it: nothing to compare
        relation = ""
    elif medians[other] >= SIGNIFICANT:
        relation = f", deviates before {other} ({medians[other]:.1f}x)"
    else:
        relation = f", while {other} matches {short} ({medians[other]:.1f}x)"
    return (f"{family.capitalize()} differs from the nearest {words['runs']}: {lead}"
            f"{relation}.{located}")


# The explanation's words for what the failures were compared with.
_WORDS = {
    "simulation": {"short": "sim", "own": "simulation's own", "runs": "sim rollouts",
                   "matched": "sim failures"},
    "normal operation": {"short": "normal operation", "own": "normal operation",
                         "runs": "normal runs", "matched": "normal runs"},
}

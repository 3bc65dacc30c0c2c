"""Name a cluster's cause family, with a confidence and a sentence a person can act on."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sim2real.cluster.location import Excess
from sim2real.drift.compute import Signatures
from sim2real.drift.signature import (
    CHANNEL_FAMILIES,
    SCORE_FAMILIES,
    SIGNIFICANT,
    routine,
)

__all__ = ["SIGNIFICANT", "ClusterLabel", "SimExplanation", "event_families", "label_cluster",
           "novel_context", "primary_family", "top_channels"]
_FAMILY_TAXONOMY = {
    "perception": "perception_drift",
    "dynamics": "dynamics_mismatch",
    "system": "deployment_system_noise",
    "task_scope": "task_scope_overflow",
}

# A family whose parameters alone reproduce this share of a cluster's deviation in sim is
# its cause, when no other family's parameters come within _MARGIN of it.
_EXPLAINS = 0.4
_MARGIN = 0.15
# System channels deviating at least this share of the strongest family's score name the
# infrastructure: no sim parameter moves them, and late or lost data disturb the rest.
_SYSTEM_SHARE = 0.5
# Where sim cannot say, a family deviating this many times more than the other is the cause:
# a cause shows most on its own channels, its consequences on others' less.
_DOMINANT = 3.0

# family -> (share of a cluster's deviation from real successes sim reproduces by moving
# that family's parameters alone, the parameters it moves, most explaining first)
SimExplanation = Mapping[str, tuple[float, tuple[str, ...]]]


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
    excess: Sequence[Excess] = (), explanation: SimExplanation | None = None,
    sys_values: Sequence[str] | None = None, reference: str = "simulation",
    lead: str | None = None, tie: str | None = None, lead_shows: str | None = None,
) -> ClusterLabel:
    """Label the events ``rows`` of ``sig`` as one cluster.

    Args:
        sig: the signatures.
        rows: the cluster's events.
        robots, sites: ``(n_events,)`` where each event happened.
        excess: the places where the cluster fails more often than sim predicts
            (:func:`sim2real.cluster.location.excess`); the explanation names the first three.
        explanation: how much of the cluster's deviation sim reproduces through each
            family's parameters (:func:`sim2real.attribute.family_explanation`); ``None``
            where the dataset has no parameters.
        sys_values: the ``sys.*`` values this cluster's failures over-represent within
            strata of deployment and site (:func:`sim2real.attribute.over_represented`);
            ``None``: the fleet-wide findings its events carry decide.
        reference: what the failures were compared with, ``simulation`` or ``normal
            operation`` (normal real runs declared ``source = reference``), in the
            explanation's words.
        lead: the family of the parameter on which the cluster's events differ most
            significantly from the real successes (the attribution's first), if any.
        tie: the same where the events pull a parameter short of significance (at least
            one standard error): a weaker word than ``lead``, it only breaks a tie.
        lead_shows: the channel family that parameter moves most in sim
            (:func:`sim2real.attribute.params.moved_family`): where the lead names the
            family, failures deviating most there agree with it (a floor friction sim
            shows as localisation error, its slips' strongest family perception).

    The rule: unseen context first (nothing else can be trusted where sim never went); then
    the family whose parameters reproduce the cluster's whole deviation in sim, the other
    families' deviations included (a wheel-friction parameter that moves localisation in
    sim explains that perception deviation), unless the system channels, which no sim
    parameter moves, deviate as much; where sim reproduces none,
    infrastructure when its channels deviate (what sim cannot reproduce, the stack may
    cause), then of perception and dynamics the one deviating several times more, and
    between comparable ones the family of the parameter the events pull (``tie``), else the
    one that deviates first (perception on a tie: a perception error precedes the dynamics
    it causes). No family beyond sim's own variability:
    unexplained (or infrastructure, when the events run under a suspicious ``sys.*`` value).
    """
    medians_all = np.median(sig.family_scores[rows], axis=0)
    medians = {f: float(v) for f, v in zip(SCORE_FAMILIES, medians_all, strict=True)}
    scores = medians_all.copy()
    scores[SCORE_FAMILIES.index("system")] = np.median(sig.system_channels[rows])
    cause = _explaining(explanation, scores)
    channels = top_channels(sig, rows)
    if cause is not None:
        taxonomy = _FAMILY_TAXONOMY[cause[0]]
        strength = 1.0 - np.exp(-(max(scores[:3]) - 1.0) / 2.0)
        confidence = min(1.0, cause[1] / 0.8) * float(np.clip(strength, 0.0, 1.0))
    else:
        evidence = (float(np.median(sig.sys_evidence[rows])) if sys_values is None
                    else SIGNIFICANT * bool(sys_values))
        taxonomy = primary_family(scores, np.median(sig.onset[rows], axis=0), evidence, tie)
        system = scores[SCORE_FAMILIES.index("system")]
        if (explanation and system >= SIGNIFICANT
                and taxonomy in ("perception_drift", "dynamics_mismatch")):
            # Sim's parameters reproduce none of it and the infrastructure deviates.
            taxonomy = _FAMILY_TAXONOMY["system"]
        shown = {taxonomy}
        if lead in ("perception", "dynamics") and taxonomy in (
                "perception_drift", "dynamics_mismatch", "unexplained"):
            # Sim cannot size the cause, but it says which parameter the events point to,
            # and what that parameter is outranks which channels show it most.
            taxonomy = _FAMILY_TAXONOMY[lead]
            shown = {taxonomy} | ({_FAMILY_TAXONOMY[lead_shows]}
                                  if lead_shows in ("perception", "dynamics") else set())
        per_event = event_families(sig, rows)
        agree = float(np.mean([t in shown for t in per_event]))
        if taxonomy == "unexplained":
            confidence = agree
        else:
            families = [f for f, t in _FAMILY_TAXONOMY.items() if t in shown]
            score = max(max(scores[SCORE_FAMILIES.index(f)], medians[f]) for f in families)
            strength = 1.0 - np.exp(-(score - 1.0) / 2.0)
            confidence = agree * float(np.clip(strength, 0.0, 1.0))
    where = _where(rows, robots, sites)
    words = REFERENCE_WORDS[reference]
    text = _explain(taxonomy, sig, rows, channels, medians, where, words, sys_values)
    if cause is not None:
        text += _reproduced(cause, channels)
    if excess:
        text += (f" More failures than {words['short']} predicts at "
                 f"{'; '.join(map(str, excess[:3]))}.")
    return ClusterLabel(taxonomy, round(float(confidence), 3), text, channels, medians)


def primary_family(family: np.ndarray, onset: np.ndarray, sys_evidence: float = 0.0,
                   tie: str | None = None) -> str:
    """The taxonomy that one set of scores points to (an event's, or a cluster's medians).

    Args:
        family: scores in :data:`SCORE_FAMILIES` order; ``system`` from channels alone.
        onset: first deviating segment per channel family.
        sys_evidence: over-representation of failures under the event's ``sys.*`` values.
            It marks every failure of a robot whatever the cause, so it decides only where
            no channel family deviates (a stale config whose effect telemetry misses).
        tie: the family to name where perception and dynamics deviate comparably, before
            onset decides: what the parameters say outranks which channel shows it first.
    """
    score = dict(zip(SCORE_FAMILIES, family, strict=True))
    first = dict(zip(CHANNEL_FAMILIES, onset, strict=True))
    if score["task_scope"] >= SIGNIFICANT:
        return _FAMILY_TAXONOMY["task_scope"]
    deviating = {f: score[f] for f in ("perception", "dynamics", "system")
                 if score[f] >= SIGNIFICANT}
    if not deviating:
        return _FAMILY_TAXONOMY["system"] if sys_evidence >= SIGNIFICANT else "unexplained"
    if "system" in deviating and deviating["system"] >= _SYSTEM_SHARE * max(deviating.values()):
        return _FAMILY_TAXONOMY["system"]
    if "perception" in deviating and "dynamics" in deviating:
        p, d = deviating["perception"], deviating["dynamics"]
        if max(p, d) >= _DOMINANT * min(p, d):
            return _FAMILY_TAXONOMY["perception" if p > d else "dynamics"]
        if tie in ("perception", "dynamics"):
            return _FAMILY_TAXONOMY[tie]
        winner = "perception" if first["perception"] <= first["dynamics"] else "dynamics"
        return _FAMILY_TAXONOMY[winner]
    physical = {f: v for f, v in deviating.items() if f != "system"}
    return _FAMILY_TAXONOMY[max(physical, key=physical.__getitem__)]


def _explaining(explanation: SimExplanation | None,
                scores: np.ndarray) -> tuple[str, float, tuple[str, ...]] | None:
    """The family whose parameters reproduce the cluster's deviation, its share and
    parameters; ``None`` when none does clearly or nothing deviates (or context is new).

    Where the system channels deviate as much as the rest (:data:`_SYSTEM_SHARE`), a
    physical family's share is no explanation: its parameters cannot move channels sim
    does not have, while the infrastructure's fault (late frames) can mimic theirs."""
    if not explanation:
        return None
    score = dict(zip(SCORE_FAMILIES, scores, strict=True))
    if score["task_scope"] >= SIGNIFICANT or max(scores[:3]) < SIGNIFICANT:
        return None
    physical = max(score["perception"], score["dynamics"])
    if score["system"] >= max(SIGNIFICANT, _SYSTEM_SHARE * physical):
        return None
    ranked = sorted(((share, family, params) for family, (share, params)
                     in explanation.items() if family in _FAMILY_TAXONOMY), reverse=True)
    if not ranked or not ranked[0][2]:
        return None
    share, family, params = ranked[0]
    runner_up = ranked[1][0] if len(ranked) > 1 else 0.0
    if share < _EXPLAINS or share - runner_up < _MARGIN:
        return None
    return family, share, params


def _reproduced(cause: tuple[str, float, tuple[str, ...]],
                channels: list[tuple[str, str, float]]) -> str:
    """What sim reproduces: the share, by which parameters, and what else that covers."""
    family, share, params = cause
    others = [c for c in channels if c[1] != family and abs(c[2]) >= SIGNIFICANT][:2]
    also = (f", the {' and '.join(sorted({c[1] for c in others}))} deviation "
            f"({', '.join(_fmt(c) for c in others)}) included") if others else ""
    names = ", ".join(f"param.{p}" for p in params[:2])
    return (f" Simulation reproduces {round(100 * share)}% of this signature by moving "
            f"{names}{also}.")


def novel_context(sig: Signatures, rows: np.ndarray) -> list[tuple[str, int]]:
    """The context values sim never covered that the events ``rows`` show, with how many
    events show each, most first. A number beyond sim's support is one finding per column
    (``ctx.depth=0.31..0.33``), not one per value."""
    numbers: dict[str, list[float]] = {}
    counts: Counter[str] = Counter()
    for i in rows:
        seen = set()
        for value in sig.novelty.values[i]:
            name, _, text = value.partition("=")
            try:
                numbers.setdefault(name, []).append(float(text))
                seen.add(name)
            except ValueError:
                seen.add(value)
        counts.update(seen)
    out = []
    for key, count in counts.most_common():
        if key in numbers:
            low, high = min(numbers[key]), max(numbers[key])
            key = f"{key}={low:g}" if low == high else f"{key}={low:g}..{high:g}"
        out.append((key, count))
    return out


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
    sys_values: Sequence[str] | None = None,
) -> str:
    located = f" Concentrated at {where}." if where else ""
    short = words["short"]
    if taxonomy == "unexplained":
        return (f"These failures look like {words['own']}: median drift score "
                f"{np.median(sig.drift_score[rows]):.1f}, no signal family beyond "
                f"{SIGNIFICANT}x {short}'s variability; inspect the matched "
                f"{words['matched']}.{located}")
    if taxonomy == "task_scope_overflow":
        shown = ", ".join(f"{v} ({c}/{len(rows)})" for v, c in novel_context(sig, rows)[:3])
        return (f"Context never seen in simulation: {shown}; nearest rollouts differ most in "
                f"{', '.join(_fmt(c) for c in channels[:2])}. Add these scenarios to training."
                f"{located}")
    family = next(f for f, t in _FAMILY_TAXONOMY.items() if t == taxonomy)
    own = [c for c in channels if c[1] == family][:2] or channels[:2]
    lead = ", ".join(_fmt(c) for c in own)
    if taxonomy == "deployment_system_noise":
        carried = ([v for i in rows for v in sig.sys_values[i]] if sys_values is None
                   else list(sys_values))
        flagged = Counter(carried)
        suspects = ", ".join(v for v, _ in flagged.most_common(2))
        config = f"; failures over-represented under {suspects}" if flagged else ""
        return (f"Infrastructure, not the policy: {lead} versus real successes{config}. "
                f"Fix it before retraining.{located}")
    other = "dynamics" if family == "perception" else "perception"
    if other not in sig.channel_families:  # no channel of it: nothing to compare
        relation = ""
    elif medians[other] >= SIGNIFICANT:
        relation = f", {other} deviates too ({medians[other]:.1f}x)"
    else:
        relation = f", while {other} matches {short} ({medians[other]:.1f}x)"
    return (f"{family.capitalize()} differs from the nearest {words['runs']}: {lead}"
            f"{relation}.{_rough(sig, rows, family, words)}{located}")


def _rough(sig: Signatures, rows: np.ndarray, family: str, words: dict[str, str]) -> str:
    """The family's channel whose roughness (:attr:`Signatures.rough`) deviates most, where
    its median over the cluster passes both :data:`SIGNIFICANT` and what 95 % of the
    no-gap comparisons show on it: an impact or a jitter the segment means average away."""
    own = np.flatnonzero(np.array(sig.channel_families) == family)
    if own.size == 0 or len(sig.null_rough) == 0:
        return ""
    median = np.median(sig.rough[np.ix_(rows, own)], axis=0)
    usual = routine(sig.null_rough[:, own], 0.05)
    passed = np.flatnonzero(np.abs(median) > np.maximum(usual, SIGNIFICANT))
    if passed.size == 0:
        return ""
    j = passed[np.argmax(np.abs(median[passed]))]
    more = "more" if median[j] > 0 else "less"
    return (f" {sig.channels[own[j]]} jitters or spikes {more} than in the "
            f"{words['runs']} (roughness {median[j]:+.1f}σ).")


# The words explanations and actions use for what the failures were compared with.
REFERENCE_WORDS = {
    "simulation": {"short": "sim", "own": "simulation's own", "runs": "sim rollouts",
                   "matched": "sim failures"},
    "normal operation": {"short": "normal operation", "own": "normal operation",
                         "runs": "normal runs", "matched": "normal runs"},
}

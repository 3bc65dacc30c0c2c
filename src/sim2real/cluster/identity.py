"""Cluster IDs that stay the same across runs, and each cluster's lifecycle state.

Matching rule (deterministic): every (new, old) pair of clusters gets a similarity

    s = max(Jaccard overlap of their event IDs, cosine of their top-channel effects)

(top channels as ``channel -> median effect`` vectors over the union of names, missing
channels 0), halved when the taxonomies differ. The pairs are assigned one-to-one by the
Hungarian algorithm maximising the total similarity; an assigned pair with ``s < 0.5``
is no match. Matched clusters keep the old ID; the others get fresh IDs ``C<k>``
numbered on from the largest previous ``k``, in urgency order. Without a previous
report IDs are ``C1, C2, ...`` in urgency order.

Lifecycle, from the cluster's per-deployment failures and exposure:

- ``resolved``: it had failures, then none in a trailing run of deployments whose
  exposure, at its earlier rate, should have shown at least 3 (chance of none < 5 %);
- ``regressed``: the previous report called it resolved, and it has failures again in a
  deployment newer than the one that resolved it;
- ``escalating``: its rate in the newest deployments (those the previous report did not
  have; without any, the last one) is significantly above its earlier rate (one-sided
  exact conditional Poisson test, p < 0.05) and at least 1.5x;
- ``new``: no previous cluster matched (on a first run, without an earlier report: its
  first failure is in the latest deployment); otherwise ``ongoing``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy.optimize import linear_sum_assignment

from sim2real.cluster.trend import rate_ratio_pvalue

if TYPE_CHECKING:
    from sim2real.pipeline import Diagnosis
    from sim2real.report.build import ClusterFinding
    from sim2real.report.model import ClusterReport, Lifecycle, ReportModel

__all__ = ["Identity", "assign_ids", "lifecycle_of", "match_clusters"]

MATCH_THRESHOLD = 0.5
_RESOLVED_EXPECTED = 3.0  # failures the zero-run should have shown: P(0) = e^-3 < 5 %
_ESCALATION_RATIO = 1.5
_ALPHA = 0.05


@dataclass(frozen=True)
class Identity:
    """A cluster's stable ID and lifecycle state."""

    cluster_id: str
    lifecycle: Lifecycle


@dataclass(frozen=True)
class _Profile:
    """What two runs' clusters are compared on."""

    events: frozenset[str]
    channels: dict[str, float]
    taxonomy: str


def assign_ids(
    diagnosis: Diagnosis, findings: Sequence[ClusterFinding], previous: ReportModel | None
) -> list[Identity]:
    """IDs and lifecycle states for ``findings`` (urgency order), keeping ``previous`` IDs.

    Args:
        diagnosis: the analysis the findings come from.
        findings: the clusters, most urgent first.
        previous: the report of an earlier run, or ``None``.
    """
    sig = diagnosis.signatures
    profiles = [_Profile(frozenset(sig.episode_ids[i] for i in f.rows),
                         {c: e for c, _, e in f.label.top_channels}, f.label.taxonomy)
                for f in findings]
    old = list(previous.clusters) if previous else []
    old_profiles = [_Profile(frozenset(c.events), {t.channel: t.effect for t in c.top_channels},
                             c.taxonomy) for c in old]
    pairs = match_clusters(profiles, old_profiles)
    next_k = 1 + max((_number(c.cluster_id) for c in old), default=0)
    prev_deps = set(previous.dataset.deployments) if previous else set()
    out = []
    for i, f in enumerate(findings):
        j = pairs.get(i)
        if j is None:
            cluster_id, before = f"C{next_k}", None
            next_k += 1
        else:
            cluster_id, before = old[j].cluster_id, old[j]
        state = lifecycle_of(list(f.trend.deployments), f.trend.episodes, f.trend.failures,
                             before, prev_deps)
        out.append(Identity(cluster_id, state))
    return out


def match_clusters(new: Sequence[_Profile], old: Sequence[_Profile]) -> dict[int, int]:
    """``new index -> old index`` by the module's rule (Hungarian, threshold 0.5)."""
    if not new or not old:
        return {}
    sim = np.array([[_similarity(a, b) for b in old] for a in new])
    rows, cols = linear_sum_assignment(-sim)
    return {int(r): int(c) for r, c in zip(rows, cols, strict=True)
            if sim[r, c] >= MATCH_THRESHOLD}


def lifecycle_of(
    deployments: Sequence[str],
    episodes: np.ndarray,
    failures: np.ndarray,
    previous: ClusterReport | None,
    previous_deployments: set[str],
) -> Lifecycle:
    """The lifecycle state of one cluster (see the module docstring for the rules)."""
    episodes = np.asarray(episodes, dtype=float)
    failures = np.asarray(failures, dtype=float)
    if previous is not None and previous.lifecycle == "resolved":
        resolved_at = _resolved_at(previous)
        if resolved_at is not None and resolved_at in deployments:
            later = np.arange(len(deployments)) > list(deployments).index(resolved_at)
            if failures[later].sum() > 0 and _resolved_index(episodes, failures) is None:
                return "regressed"
    if _resolved_index(episodes, failures) is not None:
        return "resolved"
    if previous is not None and previous.lifecycle == "regressed" and failures[-1] > 0:
        return "regressed"
    if _escalating(deployments, episodes, failures, previous_deployments):
        return "escalating"
    if previous is not None:
        return "ongoing"
    # Without an earlier report, "new" means new in the latest deployment.
    seen = np.flatnonzero(failures > 0)
    first_run = not previous_deployments
    return "ongoing" if first_run and seen.size and seen[0] < len(failures) - 1 else "new"


def _resolved_index(episodes: np.ndarray, failures: np.ndarray) -> int | None:
    """Index of the first deployment of a significant trailing run without failures."""
    seen = np.flatnonzero(failures > 0)
    if seen.size == 0 or seen[-1] == len(failures) - 1:
        return None
    start = int(seen[-1]) + 1
    rate = failures[:start].sum() / max(episodes[:start].sum(), 1.0)
    expected = rate * episodes[start:].sum()
    return start if expected >= _RESOLVED_EXPECTED else None


def _resolved_at(cluster: ClusterReport) -> str | None:
    """The deployment from which a previously reported cluster had no failures."""
    per = cluster.trend.per_deployment
    idx = _resolved_index(np.array([d.episodes for d in per], float),
                          np.array([d.failures for d in per], float))
    return per[idx].deployment if idx is not None else None


def _escalating(deployments: Sequence[str], episodes: np.ndarray, failures: np.ndarray,
                previous_deployments: set[str]) -> bool:
    fresh = np.array([d not in previous_deployments for d in deployments], dtype=bool)
    if not fresh.any() or fresh.all():
        fresh = np.arange(len(deployments)) == len(deployments) - 1
    e1, c1 = episodes[fresh].sum(), failures[fresh].sum()
    e0, c0 = episodes[~fresh].sum(), failures[~fresh].sum()
    if e1 <= 0 or e0 <= 0 or c1 == 0:
        return False
    ratio = (c1 / e1) / max(c0 / e0, 0.5 / e0)
    p = rate_ratio_pvalue(int(c1), e1, int(c0), e0, "greater")
    return bool(ratio >= _ESCALATION_RATIO and p < _ALPHA)


def _similarity(a: _Profile, b: _Profile) -> float:
    union = a.events | b.events
    jaccard = len(a.events & b.events) / len(union) if union else 0.0
    names = sorted(set(a.channels) | set(b.channels))
    va = np.array([a.channels.get(n, 0.0) for n in names])
    vb = np.array([b.channels.get(n, 0.0) for n in names])
    norm = float(np.linalg.norm(va) * np.linalg.norm(vb))
    cosine = float(va @ vb) / norm if norm > 0 else 0.0
    score = max(jaccard, cosine)
    return score if a.taxonomy == b.taxonomy else score / 2


def _number(cluster_id: str) -> int:
    digits = "".join(ch for ch in cluster_id if ch.isdigit())
    return int(digits) if digits else 0

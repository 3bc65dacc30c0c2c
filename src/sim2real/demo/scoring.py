"""Score a report against a world's answer key: how right was the diagnosis?

Only demos, tests and benchmarks call this; the analysis never sees an answer key.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from sklearn.metrics import adjusted_rand_score

from sim2real.report.model import ReportModel

__all__ = ["ScoreCard", "load_answer_key", "score_report"]


@dataclass(frozen=True)
class ScoreCard:
    """How a report's clusters compare with the true causes.

    Attributes:
        ari: adjusted Rand index of cluster IDs against true causes over all real failures
            (events in no cluster count as one more group).
        cause_clusters: cause -> the cluster holding most of its events (None: mostly noise).
        taxonomy_right: cause -> whether that cluster's taxonomy is the cause's.
        fastest_growing_right: the report's fastest-growing cluster is mostly the true
            fastest-growing cause (True when both are null).
        confident_wrong: clusters labelled with a cause family at confidence >= 0.5 whose
            events are mostly background (sim-like) failures.
    """

    ari: float
    cause_clusters: dict[str, str | None]
    taxonomy_right: dict[str, bool]
    fastest_growing_right: bool
    confident_wrong: list[str]

    def summary(self) -> str:
        right = sum(self.taxonomy_right.values())
        return (f"ARI {self.ari:.2f}; taxonomy right for {right}/{len(self.taxonomy_right)} "
                f"causes; fastest growing {'found' if self.fastest_growing_right else 'missed'}")


def load_answer_key(path: str | Path) -> dict[str, object]:
    """Read ``answer_key.json``."""
    key: dict[str, object] = json.loads(Path(path).read_text())
    return key


def score_report(report: ReportModel, key: dict[str, object]) -> ScoreCard:
    """Compare ``report`` with the answer ``key`` of the world it analysed."""
    truth: dict[str, str] = key["events"]  # type: ignore[assignment]
    assigned = {e.episode_id: e.cluster_id for e in report.events}
    ids = sorted(truth)
    ari = float(adjusted_rand_score([truth[e] for e in ids],
                                    [assigned.get(e) or "-" for e in ids]))
    causes: list[dict[str, object]] = key["causes"]  # type: ignore[assignment]
    taxonomy = {str(c["name"]): str(c["taxonomy"]) for c in causes}
    by_id = {c.cluster_id: c for c in report.clusters}
    majority: dict[str, str | None] = {}
    right: dict[str, bool] = {}
    for cause, expected in taxonomy.items():
        held = Counter(assigned.get(e) for e in ids if truth[e] == cause)
        top = held.most_common(1)[0][0] if held else None
        majority[cause] = top
        right[cause] = top is not None and by_id[top].taxonomy == expected
    fastest = key.get("fastest_growing")
    found = report.fastest_growing
    if fastest is None or found is None:
        fastest_right = fastest is None and found is None
    else:
        members = Counter(truth.get(e, "?") for e in by_id[found].events)
        fastest_right = members.most_common(1)[0][0] == fastest
    wrong = []
    for c in report.clusters:
        members = Counter(truth.get(e, "?") for e in c.events)
        if (c.taxonomy != "unexplained" and c.confidence >= 0.5
                and members.most_common(1)[0][0] == "background"):
            wrong.append(c.cluster_id)
    return ScoreCard(ari, majority, right, fastest_right, wrong)

"""Score a report against a world's answer key: how right was the diagnosis?

Only demos, tests and benchmarks call this; the analysis never sees an answer key.
:func:`score_report` reads any world's key (demo, synthetic, zoo); :func:`score_world` and
:func:`generate_and_score` go further on zoo worlds, cause by cause: family, parameter,
action, expected reduction, validate verdicts, silence where there is no gap.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow.parquet as pq
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score

from sim2real.dataset.ids import EpisodeIndex
from sim2real.errors import UsageError
from sim2real.report.model import Action, ClusterReport, ReportModel, ValidationModel

if TYPE_CHECKING:  # the zoo is imported where a world is generated, not by every demo
    from sim2real.demo.zoo import CauseKey, WorldKey

__all__ = ["MIN_SCORED_FAILURES", "CauseScore", "ScoreCard", "WorldScore", "generate_and_score",
           "load_answer_key", "score_report", "score_world", "yardstick_ari"]

# A cause with fewer real failures is left unscored: a handful of events is no cluster.
MIN_SCORED_FAILURES = 8
# A cluster this confident in a cause family is a claim; on a world without a gap, a wrong one.
_CONFIDENT = 0.5


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


@dataclass(frozen=True)
class CauseScore:
    """How the report treats one true cause (through the cluster holding most of its events).

    Attributes:
        cluster: that cluster's ID, ``None`` when most of its events are in no cluster.
        taxonomy_right: the cluster's taxonomy is the cause's.
        param_right: the cluster's first sim parameter is the cause's key parameter
            (``None``: the cause has none).
        outside_range_right: the report says the key parameter is outside sim's range
            exactly when it is; a parameter it does not list is not said to be outside
            (``None``: the cause has no key parameter).
        action_right: the cluster's first action is of a kind that fits the cause and,
            where it changes a sim parameter, changes the cause's key parameter.
        reduction_error: that action's ``expected_reduction`` minus the truth: the share of
            the cluster's failures that disappear when the world is regenerated without
            this cause (the counterfactual run that labels the events).
    """

    name: str
    trap: str
    mechanism: str
    n_failures: int
    cluster: str | None
    taxonomy_right: bool
    param_right: bool | None
    outside_range_right: bool | None
    action_right: bool
    reduction_error: float | None


@dataclass(frozen=True)
class WorldScore:
    """A zoo world's report (and validation) against its key.

    Attributes:
        ari: as :class:`ScoreCard` (``None`` on a world without a gap: one true group).
        yardstick_ari: the same for a plain KMeans, told the true number of groups, on
            per-failure summaries of every channel (mean, std, min, max, last; z-scored):
            what the world gives away without any sim2real machinery.
        causes: the causes with at least :data:`MIN_SCORED_FAILURES` failures.
        validate: cause -> whether the validation verdict for its cluster is one its
            key expects (a fixed cause shrank or is gone, a late one is new or grew); only
            causes with at least :data:`MIN_SCORED_FAILURES` failures.
        silent: on a world without a gap, no cluster claims a cause family with
            confidence >= 0.5 (``None`` on other worlds).
        seconds: analysis (and validation) wall time.
    """

    seed: int
    traps: tuple[str, ...]
    no_gap: bool
    n_failures: int
    ari: float | None
    yardstick_ari: float | None
    causes: tuple[CauseScore, ...]
    fastest_growing_right: bool
    validate: dict[str, bool]
    silent: bool | None
    confident_wrong: tuple[str, ...]
    seconds: float


def score_world(report: ReportModel, key: WorldKey,
                validation: ValidationModel | None = None, *, seconds: float = 0.0) -> WorldScore:
    """Compare ``report`` (and ``validation``, run with ``previous=report`` on the key's
    baseline and candidate) with a zoo world's ``key``."""
    card = score_report(report, dict(key.document))
    by_id = {c.cluster_id: c for c in report.clusters}
    causes = tuple(_score_cause(c, card.cause_clusters.get(c.name), by_id, key)
                   for c in key.causes if c.n_failures >= MIN_SCORED_FAILURES)
    silent = None
    if key.no_gap:
        silent = not any(c.taxonomy != "unexplained" and c.confidence >= _CONFIDENT
                         for c in report.clusters)
    verdicts = {} if validation is None or key.validate is None else _verdicts(
        key, card.cause_clusters, validation)
    return WorldScore(
        seed=key.seed, traps=key.traps, no_gap=key.no_gap, n_failures=len(key.events),
        ari=None if key.no_gap else card.ari,
        yardstick_ari=None if key.no_gap else yardstick_ari(key), causes=causes,
        fastest_growing_right=card.fastest_growing_right, validate=verdicts, silent=silent,
        confident_wrong=tuple(card.confident_wrong), seconds=seconds)


def yardstick_ari(key: WorldKey) -> float:
    """ARI of KMeans (k = the true number of groups) on z-scored per-failure summaries of
    every channel: mean, std, min, max and last value (0 where a channel has no sample)."""
    ids = sorted(key.events)
    folder = key.dataset / "signals"
    table = pq.read_table(folder if folder.is_dir() else key.dataset / "signals.parquet",
                          filters=[("episode_id", "in", ids)])
    names = sorted(set(table["channel"].to_pylist()))
    ep = EpisodeIndex(ids).rows(table["episode_id"])
    ch = EpisodeIndex(names).rows(table["channel"])
    t, v = table["t"].to_numpy(), table["value"].to_numpy()
    order = np.lexsort((t, ch, ep))
    group = (ep * len(names) + ch)[order]
    v = v[order]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    counts = np.diff(np.r_[starts, len(v)])
    mean = np.add.reduceat(v, starts) / counts
    spread = np.sqrt(np.maximum(np.add.reduceat(v * v, starts) / counts - mean ** 2, 0))
    last = v[np.r_[starts[1:], len(v)] - 1]
    stats = np.column_stack([mean, spread, np.minimum.reduceat(v, starts),
                             np.maximum.reduceat(v, starts), last])
    features = np.zeros((len(ids) * len(names), 5))
    features[group[starts]] = stats
    features = features.reshape(len(ids), -1)
    features = (features - features.mean(0)) / np.where(features.std(0) > 0, features.std(0), 1)
    truth = [key.events[e] for e in ids]
    k = len(set(truth))
    if k < 2:
        return 0.0
    labels = KMeans(k, n_init=10, random_state=0).fit_predict(features)
    return float(adjusted_rand_score(truth, labels))


def _score_cause(cause: CauseKey, cluster_id: str | None, by_id: dict[str, ClusterReport],
                 key: WorldKey) -> CauseScore:
    cluster = by_id.get(cluster_id) if cluster_id is not None else None
    if cluster is None:
        return CauseScore(cause.name, cause.trap, cause.mechanism, cause.n_failures, None,
                          False, False if cause.key_param else None,
                          False if cause.outside_range is not None else None, False, None)
    params = cluster.sim_params
    param_right = None if cause.key_param is None else bool(
        params and params[0].param == cause.key_param)
    outside = None
    if cause.outside_range is not None:  # a parameter the report leaves out is not outside
        entry = next((p for p in params if p.param == cause.key_param), None)
        outside = (entry is not None and entry.outside_range) == cause.outside_range
    first = cluster.actions[0] if cluster.actions else None
    truth = sum(key.events.get(e) == cause.name for e in cluster.events) / max(cluster.size, 1)
    return CauseScore(
        cause.name, cause.trap, cause.mechanism, cause.n_failures, cluster.cluster_id,
        cluster.taxonomy == cause.taxonomy, param_right, outside,
        first is not None and _fits(first, cause),
        None if first is None else first.expected_reduction - truth)


def _fits(action: Action, cause: CauseKey) -> bool:
    """Whether ``action`` is of a kind that fits ``cause`` and, where it changes a sim
    parameter, changes the cause's own: widening the floor friction for worn pads removes
    none of their failures."""
    if action.kind not in cause.actions:
        return False
    return not (action.target.startswith("param.") and cause.key_param is not None
                and action.target != f"param.{cause.key_param}")


def _verdicts(key: WorldKey, clusters: dict[str, str | None],
              validation: ValidationModel) -> dict[str, bool]:
    """Each validate-trap cause's verdict, through the report cluster that holds its events
    (validation keeps that cluster's ID where it finds it again in the baseline)."""
    assert key.validate is not None
    verdict = {c.cluster_id: c.verdict for c in validation.clusters}
    # Like every other measure, a cause with too few failures to form a cluster is unscored.
    scored = {c.name for c in key.causes if c.n_failures >= MIN_SCORED_FAILURES}
    out = {}
    for name, expected in key.validate[2].items():
        if name not in scored:
            continue
        got = verdict.get(clusters.get(name) or "")
        if got is None and "new" in expected:  # a group first seen after the baseline
            got = "new" if any(v == "new" for v in verdict.values()) else None
        out[name] = got in expected
    return out


def generate_and_score(seed: int, out_dir: str | Path | None = None, *,
                       traps: Sequence[str] | None = None, size: float = 1.0,
                       no_gap: bool | None = None) -> WorldScore:
    """Generate zoo world ``seed``, analyse it on one process (and validate the fix its key
    names, if any) and score the outcome.

    Args:
        seed, traps, size, no_gap: as :func:`sim2real.demo.zoo.generate_world`.
        out_dir: where to write the world; default: a temporary folder, removed after.
    """
    if out_dir is None:
        with tempfile.TemporaryDirectory(prefix="sim2real-zoo-") as tmp:
            return generate_and_score(seed, tmp, traps=traps, size=size, no_gap=no_gap)
    import sim2real
    from sim2real.demo.zoo import generate_world
    from sim2real.engine import LocalExecutor

    key = generate_world(seed, out_dir, traps=list(traps) if traps else None, size=size,
                         no_gap=no_gap)
    start = time.perf_counter()
    # Temporary files stay in the world's folder, away from anything sweeping $TMPDIR.
    scratch = Path(out_dir) / "scratch"
    report = sim2real.analyze(key.dataset, engine=LocalExecutor(1), scratch=scratch).model
    validation = None
    if key.validate is not None:
        baseline, candidate, expected = key.validate
        # As a team that deployed a fix names the clusters it was for: those holding the
        # failures of the causes the world fixed.
        found = score_report(report, dict(key.document)).cause_clusters
        targets = sorted({cid for name, verdicts in expected.items() if "gone" in verdicts
                          and (cid := found.get(name)) is not None})
        try:
            validation = sim2real.validate(key.dataset, list(baseline), list(candidate),
                                           previous=report, targets=targets,
                                           scratch=scratch, engine=LocalExecutor(1)).model
        except UsageError:  # refused (say, no baseline failure): no verdict is right
            validation = ValidationModel(baseline=list(baseline), candidate=list(candidate),
                                         clusters=[], dataset=str(key.dataset))
    return score_world(report, key, validation, seconds=time.perf_counter() - start)

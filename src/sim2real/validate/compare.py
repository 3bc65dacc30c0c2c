"""Did the fix work? Baseline clusters' failure rates before and after, exposure-normalised.

1. the clusters are those of the report followed: ``--previous`` (every one of its
   clusters gets a verdict, under its ID), or else the analysis of the baseline
   deployments, IDs as ``analyze`` gives them;
2. ``diagnose`` the baseline deployments and score the candidate deployments' failures
   with the *same* fitted yardstick. Both sides are then assigned by one rule. Following
   ``--previous``: a failure that report saw stays where it put it, one it did not see
   goes to the cluster of the nearest failure it placed, within that cluster's reach.
   Following the baseline's analysis: every failure goes to the cluster of the nearest
   baseline failure that analysis placed, within reach, a baseline failure judged without
   itself, so that the baseline is not counted by a more generous rule than the
   candidate;
3. failures that fit no cluster, on both sides, are clustered together; a group whose
   candidate rate is significantly above its baseline rate is reported as ``new``;
   ``assignments`` lists every failure of both sides and its cluster;
4. per cluster, the rate ratio candidate / baseline (failures per real episode):
   exact conditional test (the candidate's share of the failures is binomial under equal
   rates: :func:`sim2real.cluster.trend.rate_ratio_pvalue`), two-sided p-value = twice
   the smaller one-sided p-value
   (the central convention, dual to the interval), and its 95 % interval: the
   Clopper-Pearson interval of the candidate's share of the cluster's failures mapped to a
   rate ratio. Verdicts use Benjamini-Hochberg-adjusted p-values over the clusters
   (``alpha = 0.05``; where nothing changed this bounds the chance of any false verdict
   by 5 %) so that one of many clusters does not move by chance:
   ``shrank`` / ``grew`` (significant), ``gone`` (significant, no candidate failure left),
   ``unchanged`` (not significant), ``new`` (step 3).
   The clusters a fix targets (``--target``) answer a question asked before the data: did
   they shrink? For them that is a one-sided test of the same kind, adjusted over the
   targets only, and the only way to ``shrank`` or ``gone``; the two-sided test over all
   clusters can still find a target ``grew``.
5. power: the candidate exposure that would detect a halving of the baseline rate with
   80 % power (the Wald test of the log rate ratio, its variance taken under the
   alternative: Zhu and Lakkis 2014); where unreachable with this baseline, said.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import stats
from sklearn.neighbors import NearestNeighbors

from sim2real._columns import strings
from sim2real._progress import Stages
from sim2real._scratch import scratch_folder
from sim2real.cluster.density import (
    MIN_REACH,
    FailureClusterer,
    FeatureSpace,
    signature_features,
)
from sim2real.cluster.identity import Identity, assign_ids
from sim2real.cluster.taxonomy import label_cluster
from sim2real.cluster.trend import rate_ratio_pvalue
from sim2real.dataset import Dataset
from sim2real.engine import Executor, make_executor
from sim2real.errors import UsageError
from sim2real.pipeline import (
    AnalysisConfig,
    Diagnosis,
    check_analysable,
    diagnose,
    loaded,
    real_episodes,
    score_failures,
)
from sim2real.report.build import ClusterFinding, find_clusters
from sim2real.report.model import (
    Assignment,
    RateSummary,
    ReportModel,
    ValidationCluster,
    ValidationModel,
)
from sim2real.report.snapshot import Validation, check_output

__all__ = ["ALPHA", "rate_comparison", "validate"]

ALPHA = 0.05
_POWER = 0.8
_EFFECT = 0.5  # the change the power calculation asks about: a halving of the rate
_MAX_FACTOR = 1000.0  # candidate exposure searched up to this multiple of the baseline's


def validate(
    dataset: str | Path | Dataset,
    baseline: Sequence[str],
    candidate: Sequence[str],
    *,
    config: AnalysisConfig | None = None,
    out: str | Path | None = None,
    stages: Stages | None = None,
    previous: ReportModel | None = None,
    targets: Sequence[str] = (),
    skip_bad_episodes: bool = False,
    scratch: str | Path | None = None,
    engine: str | Executor = "local",
    address: str | None = None,
) -> Validation:
    """Compare each baseline cluster's failure rate in the candidate deployments.

    Args:
        dataset: a dataset folder or a loaded :class:`Dataset`.
        baseline: deployments before the fix (clusters are learnt on them).
        candidate: deployments after it.
        config: analysis settings (``AnalysisConfig()`` when omitted).
        out: when given, ``validation.json`` and ``validation.html`` are written there.
        stages: progress display.
        previous: the report whose clusters are compared: every one of them gets a
            verdict under its ID, its failures placed where it put them (without it, the
            baseline's own analysis is the report).
        targets: the cluster IDs the fix was meant to shrink (those of ``previous``);
            recorded, named first on the page, and tested one-sided for shrinking (see
            the module docstring, step 4).
        skip_bad_episodes: leave out, with a warning, real failures that cannot be compared
            instead of failing (see :func:`~sim2real.dataset.load_dataset`).
        scratch: where temporary files go (see :func:`sim2real.analyze`).
        engine: where the heavy stages run, as for :func:`sim2real.analyze` (``local``,
            ``ray`` or an :class:`~sim2real.engine.Executor`); the verdicts do not depend
            on it.
        address: the Ray cluster to join; ``ray`` only.

    Returns:
        The verdicts; no clusters when neither side has a real failure.

    Raises:
        UsageError: empty or overlapping deployment lists, unknown deployments, targets
            without ``previous`` or not in it, ``out``
            unfit for a run's outputs (all checked before any work), or failures in the
            candidate deployments but none in the baseline to compare them with.
        DatasetError: the dataset breaks the format or has no sim rollouts.
        InputError: ``engine="ray"`` without Ray installed.
    """
    if not baseline or not candidate:
        raise UsageError("validate needs at least one baseline and one candidate deployment")
    overlap = sorted(set(baseline) & set(candidate))
    if overlap:
        msg = f"deployment(s) {', '.join(overlap)} are in both --baseline and --candidate"
        raise UsageError(msg)
    if targets and previous is None:
        msg = (f"--target {', '.join(targets)}: names clusters of an earlier report; give "
               "that report as --previous")
        raise UsageError(msg)
    unknown = sorted(set(targets) - {c.cluster_id for c in previous.clusters}) if previous else []
    if unknown:
        msg = f"--target {', '.join(unknown)}: no such cluster in the --previous report"
        raise UsageError(msg)
    config = config or AnalysisConfig()
    stages = stages or Stages(enabled=False)
    if out is not None:
        check_output(out)
    ds = loaded(dataset, stages, skip_bad_episodes)
    cand_real = real_episodes(ds, candidate)
    base_real = real_episodes(ds, baseline)
    check_analysable(ds, base_real)
    if not any(pc.any(pc.equal(side["outcome"], "failure")).as_py()
               for side in (base_real, cand_real)):
        result = Validation(ValidationModel(baseline=list(baseline), candidate=list(candidate),
                                            clusters=[], targets=list(targets),
                                            dataset=ds.root.canonical()))
        if out is not None:
            result.save(out)
        return result
    executor = make_executor(engine, address=address)
    with scratch_folder(scratch, beside=out) as folder:
        return _validate(ds, baseline, candidate, config, out, stages, previous, targets,
                         base_real, cand_real, folder, executor)


def _validate(ds: Dataset, baseline: Sequence[str], candidate: Sequence[str],
              config: AnalysisConfig, out: str | Path | None, stages: Stages,
              previous: ReportModel | None, targets: Sequence[str], base_real: pa.Table,
              cand_real: pa.Table, scratch: Path, executor: Executor) -> Validation:
    """:func:`validate` once both sides are known to hold failures."""
    failures = cand_real.filter(pc.equal(cand_real["outcome"], "failure"))
    diagnosis = diagnose(ds, config, deployments=baseline, stages=stages, executor=executor,
                         scratch=scratch, also=failures["episode_id"].to_pylist())
    base_n = base_real.num_rows
    cand_n = cand_real.num_rows
    with stages.stage("attribute the baseline", 1):
        findings = find_clusters(diagnosis, executor)
    ids = assign_ids(diagnosis, findings, previous)
    members, clusters = _report_clusters(diagnosis, findings, ids, previous)
    if failures.num_rows:
        sig, _, _ = score_failures(diagnosis.yardstick, failures, config, stages, executor)
        # Signatures come in the failures' row order, as in diagnose.
        cand_features = signature_features(sig, like=diagnosis.features,
                                           symptoms=strings(failures, "failure_label"))
    else:
        cand_features = diagnosis.features.take(np.zeros(0, dtype=int))
    if previous is None:
        # Both sides by one rule: the nearest failure the baseline's analysis placed,
        # within its cluster's reach (a baseline failure never votes for itself).
        assigner = _Assigner(diagnosis.features.values, members)
        base_labels = assigner.assign(diagnosis.features.values, own=True)
        cand_labels = assigner.assign(cand_features.values)
    else:
        # The report saw failures of either side: each stays where it put it, and one it
        # did not see goes to the nearest failure it placed, on either side alike.
        placed = _placed(previous)
        seen = np.array([e in placed for e in diagnosis.signatures.episode_ids]
                        + [e in placed for e in failures["episode_id"].to_pylist()], bool)
        labels = np.array([placed.get(e) for e in diagnosis.signatures.episode_ids]
                          + [placed.get(e) for e in failures["episode_id"].to_pylist()],
                          dtype=object)
        values = np.vstack([diagnosis.features.values, cand_features.values])
        found = _Assigner(values[seen], labels[seen]).assign(values)
        labels = np.where(seen, labels, found)
        n_base = len(diagnosis.signatures.episode_ids)
        base_labels, cand_labels = labels[:n_base], labels[n_base:]
    tests = [(cid, taxonomy, int((base_labels == cid).sum()), int((cand_labels == cid).sum()),
              False) for cid, taxonomy in clusters]
    known = [cid for cid, _ in clusters] + [i.cluster_id for i in ids]
    next_k = 1 + max((int(k[1:]) for k in known if k[1:].isdigit()), default=0)
    base_left, cand_left = _none(base_labels), _none(cand_labels)
    for taxonomy, b_rows, c_rows in _new_groups(diagnosis, base_left, cand_features,
                                                cand_left, config):
        cid = f"C{next_k}"
        tests.append((cid, taxonomy, len(b_rows), len(c_rows), True))
        base_labels[b_rows], cand_labels[c_rows] = cid, cid
        next_k += 1
    verdicts = _verdicts(tests, base_n, cand_n, set(targets))
    reported = {c.cluster_id for c in verdicts}
    assignments = (_assignments(diagnosis.events, base_labels, "baseline", reported)
                   + _assignments(failures, cand_labels, "candidate", reported))
    model = ValidationModel(baseline=list(baseline), candidate=list(candidate),
                            clusters=verdicts, targets=list(targets),
                            dataset=ds.root.canonical(), assignments=assignments)
    result = Validation(model)
    if out is not None:
        with stages.stage("write validation", 1):
            result.save(out)
    return result


def _report_clusters(diagnosis: Diagnosis, findings: list[ClusterFinding],
                     ids: list[Identity], previous: ReportModel | None
                     ) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """The clusters of the report followed (``previous``, every one of them; else the
    baseline's own analysis, IDs as ``analyze`` gives them), in its order, with each
    baseline failure's cluster in the baseline's own analysis.

    Returns:
        ``(n_baseline_failures,)`` cluster ID or ``None``, and ``(cluster_id, taxonomy)``.
    """
    own = np.full(len(diagnosis.signatures.episode_ids), None, dtype=object)
    for f, identity in zip(findings, ids, strict=True):
        own[f.rows] = identity.cluster_id
    if previous is None:
        return own, [(i.cluster_id, f.label.taxonomy) for f, i in zip(findings, ids,
                                                                        strict=True)]
    return own, [(c.cluster_id, c.taxonomy) for c in previous.clusters]


def _placed(previous: ReportModel) -> dict[str, str | None]:
    """Where ``previous`` put each failure it saw (``None``: in no cluster)."""
    listed = {c.cluster_id for c in previous.clusters}
    return {e.episode_id: e.cluster_id if e.cluster_id in listed else None
            for e in previous.events}


class _Assigner:
    """Nearest-member assignment to labelled failures ``(n, n_features)``: an event joins
    the cluster of its nearest labelled member when it lies within that cluster's reach (the
    95th percentile of its members' distances to their nearest fellow member, at least
    :data:`~sim2real.cluster.density.MIN_REACH`, as in the clustering).

    Nearest members come from a KD-tree: the brute-force distances of a large fleet's
    40,000 failures against each other took 280 of the 670 s ``validate`` ran on it."""

    def __init__(self, values: np.ndarray, labels: np.ndarray) -> None:
        keep = np.array([v is not None for v in labels], dtype=bool)
        self.rows = np.flatnonzero(keep)
        self.values = values[keep]
        self.labels = labels[keep]
        self.reach: dict[str, float] = {}
        for label in set(self.labels.tolist()):
            mine = self.values[self.labels == label]
            if len(mine) < 2:
                self.reach[label] = MIN_REACH
                continue
            # Its second neighbour: the first is the member itself (or its duplicate, as near).
            dist, _ = _tree(mine).kneighbors(mine, n_neighbors=2)
            self.reach[label] = max(float(np.quantile(dist[:, 1], 0.95)), MIN_REACH)
        self._reach = np.array([self.reach[lab] for lab in self.labels.tolist()])
        self._index = _tree(self.values) if len(self.values) else None

    def assign(self, values: np.ndarray, own: bool = False) -> np.ndarray:
        """``(n,)`` cluster ID or ``None`` of each event; ``own``: ``values`` are the
        labelled failures themselves (row for row), each judged without itself."""
        out = np.full(len(values), None, dtype=object)
        if self._index is None or len(values) == 0:
            return out
        k = min(2 if own else 1, len(self.values))
        dist, index = self._index.kneighbors(values, n_neighbors=k)
        pick = np.zeros(len(values), dtype=int)
        found = np.ones(len(values), dtype=bool)
        if own:
            itself = self.rows[index[:, 0]] == np.arange(len(values))
            pick = itself.astype(int)  # then the next nearest, where there is one
            found = ~itself | (k > 1)
            pick = np.minimum(pick, k - 1)
        rows = np.arange(len(values))
        nearest, distance = index[rows, pick], dist[rows, pick]
        fits = found & (distance <= self._reach[nearest])
        out[fits] = self.labels[nearest[fits]]
        return out


def _tree(points: np.ndarray) -> NearestNeighbors:
    """An exact nearest-neighbour index over ``points`` (KD-tree: distances computed
    directly, not through the dot products a brute-force search rounds through)."""
    return NearestNeighbors(algorithm="kd_tree").fit(points)


def _none(labels: np.ndarray) -> np.ndarray:
    return np.array([v is None for v in labels], dtype=bool)


def _assignments(failures: pa.Table, labels: np.ndarray, side: str,
                 reported: set[str]) -> list[Assignment]:
    ids = failures["episode_id"].to_pylist()
    deployments = failures["deployment"].to_pylist()
    return [Assignment.model_validate({
        "episode_id": e, "deployment": d, "side": side,
        "cluster_id": label if label in reported else None})
        for e, d, label in zip(ids, deployments, labels, strict=True)]


def _new_groups(diagnosis: Diagnosis, base_free: np.ndarray, cand_features: FeatureSpace,
                cand_free: np.ndarray, config: AnalysisConfig
                ) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Dense groups among the failures no reported cluster takes (``base_free``,
    ``cand_free``: masks), from both sides: their taxonomy and members on each side."""
    base_left = np.flatnonzero(base_free)
    cand_left = np.flatnonzero(cand_free)
    if cand_left.size == 0:
        return []
    pooled = FeatureSpace.concat([diagnosis.features.take(base_left),
                                  cand_features.take(cand_left)])
    size = config.min_cluster_size or max(5, round(0.02 * len(diagnosis.labels)))
    labels = FailureClusterer(size).fit(pooled).labels_
    groups = []
    sig = diagnosis.signatures
    for g in sorted(set(labels.tolist()) - {-1}):
        members = labels == g
        rows = base_left[members[: base_left.size]]
        taxonomy = "unexplained"
        if rows.size:
            robots = np.full(len(sig.episode_ids), None, dtype=object)
            taxonomy = label_cluster(sig, rows, robots, robots).taxonomy
        groups.append((taxonomy, rows, cand_left[members[base_left.size:]]))
    return groups


def rate_comparison(b: int, e_b: float, c: int, e_c: float) -> tuple[
        float | None, float | None, float | None, float]:
    """Rate ratio candidate/baseline, its exact 95 % interval, and the two-sided p-value."""
    if b + c == 0:
        return None, None, None, 1.0
    larger = rate_ratio_pvalue(c, e_c, b, e_b, "greater")
    smaller = rate_ratio_pvalue(c, e_c, b, e_b, "less")
    p = float(min(1.0, 2 * min(larger, smaller)))
    # Clopper-Pearson interval of the candidate's share of the failures
    lo = float(stats.beta.ppf(0.025, c, b + 1)) if c > 0 else 0.0
    hi = float(stats.beta.isf(0.025, c + 1, b)) if b > 0 else 1.0
    odds = e_b / e_c  # share pi of candidate failures -> ratio = pi/(1-pi) * e_b/e_c
    ratio = (c / e_c) / (b / e_b) if b > 0 else None
    ci_low = float(lo / (1 - lo) * odds) if lo < 1 else None
    ci_high = float(hi / (1 - hi) * odds) if hi < 1 else None
    return ratio, ci_low, ci_high, p


def _verdicts(tests: list[tuple[str, str, int, int, bool]], e_b: int,
              e_c: int, targets: set[str]) -> list[ValidationCluster]:
    raw = [rate_comparison(b, e_b, c, e_c) for _, _, b, c, _ in tests]
    pvals = [r[3] for r in raw]
    adjusted = stats.false_discovery_control(pvals, method="bh") if pvals else []
    shrink = _target_tests(tests, e_b, e_c, targets)
    out = []
    for (cid, taxonomy, b, c, fresh), (ratio, lo, hi, p), p_adj in zip(tests, raw, adjusted,
                                                                        strict=True):
        significant = p_adj < ALPHA
        up = c / e_c > b / e_b
        test = "two-sided"
        if fresh and not (significant and up):
            continue  # a group of leftovers that did not grow is no finding
        if cid in shrink and not (significant and up):
            # A target shrank only by the fix's own test; it grew only by every cluster's.
            p, p_adj = shrink[cid]
            significant, up, test = p_adj < ALPHA, False, "one-sided"
        if fresh or (b == 0 and significant and up):
            verdict = "new"  # no failure of it before: the cluster is new, not grown
        elif not significant:
            verdict = "unchanged"
        elif up:
            verdict = "grew"
        else:
            verdict = "gone" if c == 0 else "shrank"
        needed = _exposure_needed(b, e_b)
        # Extension fields (see the module docstring) ride along through the model's
        # ``extra="allow"``: test, p_adjusted, exposure_needed, more_exposure_needed, note.
        out.append(ValidationCluster.model_validate({
            "cluster_id": cid, "taxonomy": taxonomy,
            "baseline": RateSummary(episodes=e_b, failures=b, rate=round(b / e_b, 6)),
            "candidate": RateSummary(episodes=e_c, failures=c, rate=round(c / e_c, 6)),
            "rate_ratio": _r(ratio), "ci_low": _r(lo), "ci_high": _r(hi),
            "p_value": round(p, 6), "verdict": verdict, "test": test,
            "p_adjusted": round(float(p_adj), 6), "exposure_needed": needed,
            "more_exposure_needed": None if needed is None else max(0, needed - e_c),
            "note": _note(verdict, b, needed, e_c, test)}))
    return out


def _target_tests(tests: list[tuple[str, str, int, int, bool]], e_b: int, e_c: int,
                  targets: set[str]) -> dict[str, tuple[float, float]]:
    """Each target cluster's one-sided p-value for a drop of its rate, and that p-value
    adjusted over the targets (Benjamini-Hochberg)."""
    aimed = [(cid, b, c) for cid, _, b, c, fresh in tests if cid in targets and not fresh]
    if not aimed:
        return {}
    pvals = [rate_ratio_pvalue(c, e_c, b, e_b, "less") for _, b, c in aimed]
    adjusted = stats.false_discovery_control(pvals, method="bh")
    return {cid: (float(p), float(a))
            for (cid, _, _), p, a in zip(aimed, pvals, adjusted, strict=True)}


def _exposure_needed(b: int, e_b: int) -> int | None:
    """Candidate episodes that detect a halving of the baseline rate with 80 % power."""
    if b == 0:
        return None
    rate = b / e_b
    crit = stats.norm.isf(ALPHA / 2)

    def power(n_c: float) -> float:
        # two-sided Wald test of log(candidate rate / baseline rate) = 0 when the candidate
        # rate is rate * _EFFECT; the variance of the log ratio is 1/(n_c r_c) + 1/(e_b r_b)
        shift = abs(np.log(_EFFECT)) / np.sqrt(1 / (n_c * rate * _EFFECT) + 1 / (e_b * rate))
        return float(stats.norm.sf(crit - shift) + stats.norm.cdf(-crit - shift))

    high = float(e_b) * _MAX_FACTOR
    if power(high) < _POWER:
        return None
    low = 1.0
    while high - low > 1:
        mid = (low + high) / 2
        low, high = (mid, high) if power(mid) < _POWER else (low, mid)
    return int(np.ceil(high))


def _note(verdict: str, b: int, needed: int | None, e_c: int, test: str) -> str:
    if verdict != "unchanged":
        if test == "one-sided":
            return (f"a target of the fix: shrank significantly by the one-sided test, "
                    f"adjusted over the targets (alpha {ALPHA})")
        return f"significant after adjusting for clusters compared (alpha {ALPHA})"
    if needed is None:
        return (f"only {b} baseline failures: no candidate exposure can show a halving with "
                f"80% power; collect more baseline episodes")
    if verdict == "unchanged" and needed > e_c:
        return (f"not enough exposure to tell: about {needed - e_c} more candidate episodes "
                f"({needed} in all) would detect a halving of the rate with 80% power")
    return f"{needed} candidate episodes detect a halving of the rate with 80% power"


def _r(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), 6)

"""Assemble the :class:`Report` snapshot from a :class:`Diagnosis`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sklearn.decomposition import PCA

from sim2real._columns import column_values
from sim2real._version import __version__
from sim2real.attribute import (
    WEAK_PULL,
    Confounder,
    ParamEstimate,
    ParamEvidence,
    cluster_confounders,
    deviating_families,
    family_explanation,
    infer_params,
    lead_family,
    param_evidence,
    propose_actions,
)
from sim2real.attribute.actions import lead_by_symptom
from sim2real.attribute.params import lead_param, moved_family, param_family
from sim2real.attribute.symptoms import Endings, SymptomLead, beyond_sim, common_ending
from sim2real.cluster.identity import assign_ids
from sim2real.cluster.taxonomy import ClusterLabel, event_families, label_cluster
from sim2real.cluster.trend import Trend, fit_trend
from sim2real.dataset import Dataset
from sim2real.drift.signature import SCORE_FAMILIES
from sim2real.engine import Executor
from sim2real.match.matcher import window_times
from sim2real.pipeline import Diagnosis, compared_with
from sim2real.report._words import NOT_ADDITIVE
from sim2real.report.model import (
    Action,
    ClusterReport,
    ClusterTrend,
    DatasetSummary,
    DeploymentRate,
    EventReport,
    FamilyScores,
    ReportModel,
    SimParam,
    TopChannel,
)
from sim2real.report.snapshot import Report

__all__ = [
    "ClusterFinding",
    "build_report",
    "empty_report",
    "exposure",
    "find_clusters",
    "with_check_evidence",
]

_TRACE_EVENTS = 3
_TRACE_CHANNELS = 6
_TRACE_POINTS = 200
_TRACE_COLUMNS = ("event_id", "episode_id", "role", "channel", "t", "value")


@dataclass(frozen=True)
class ClusterFinding:
    """One cluster before it is written: its events, label, trend and attribution."""

    index: int
    rows: np.ndarray
    label: ClusterLabel
    trend: Trend
    params: list[ParamEstimate]
    actions: list[Action]

    @property
    def urgency(self) -> tuple[bool, float]:
        """Sort key: explained clusters first, then by the rate projected for next time."""
        return (self.label.taxonomy == "unexplained", -self.trend.projected_rate)


@dataclass(frozen=True)
class _Draft:
    """A cluster labelled on its own, before the labels are read side by side."""

    index: int
    rows: np.ndarray
    label: ClusterLabel
    params: list[ParamEstimate]
    confounders: list[Confounder]
    symptom: SymptomLead | None


def exposure(diagnosis: Diagnosis) -> tuple[tuple[str, ...], np.ndarray]:
    """The analysed deployments in time order and the real episodes each ran."""
    episodes = diagnosis.dataset.episodes
    real = episodes.filter(pc.equal(episodes["source"], "real"))
    order = diagnosis.deployments
    counts = dict(zip(*np.unique(np.array(real["deployment"].to_pylist(), dtype=object),
                                 return_counts=True), strict=True))
    return order, np.array([counts.get(d, 0) for d in order], dtype=float)


def find_clusters(diagnosis: Diagnosis,
                  executor: Executor | None = None) -> list[ClusterFinding]:
    """Label, trend and attribute every cluster, most urgent first (the parameter
    inference reads its windows on ``executor`` where it is local: see
    :func:`~sim2real.attribute.param_evidence`)."""
    deployments, episodes = exposure(diagnosis)
    event_deps = np.array(diagnosis.events["deployment"].to_pylist(), dtype=object)
    robots = column_values(diagnosis.events, "robot_id")
    sites = column_values(diagnosis.events, "site")
    evidence = param_evidence(diagnosis, executor)  # the parameter inference, fitted once
    # "More failures than sim predicts at <place>" says something only where places differ
    # (more than one cell) and the reference fails at all (else it predicts none anywhere).
    informative = len(diagnosis.fleet.cells) > 1 and bool(diagnosis.matcher.bank_.failed.any())
    reference = compared_with(diagnosis.dataset)
    cited = diagnosis.clusterer.cited_places(diagnosis.fleet) if informative else {}
    endings = Endings.read(diagnosis)  # how every run ended, read once for all clusters
    drafts = []
    for index in sorted(set(diagnosis.labels.tolist()) - {-1}):
        rows = np.flatnonzero(diagnosis.labels == index)
        deviating = deviating_families(diagnosis.signatures, rows)
        explanation = (family_explanation(evidence, rows, deviating)
                       if evidence is not None else None)
        confounders = cluster_confounders(diagnosis, rows)
        params = infer_params(diagnosis, rows, evidence)
        lead = lead_param(params, evidence, deviating)
        tie = lead_family(params, evidence, deviating, WEAK_PULL)
        label_as = partial(label_cluster, diagnosis.signatures, rows, robots, sites,
                           cited.get(index, []), explanation,
                           [f.value for f in confounders if f.kind == "sys"], reference)
        label = label_as(*_led_by(evidence, lead, tie))
        # Where the telemetry names no parameter, how sim's rollouts end may: that parameter,
        # at the value the symptom's rate points to, heads the cluster's parameters, and
        # names the family of a cluster whose signals look like sim's.
        symptom = lead_by_symptom(diagnosis, rows, label, params, evidence, endings)
        if symptom is not None:
            params = [symptom.estimate,
                      *(p for p in params if p.param != symptom.estimate.param)]
            if label.taxonomy == "unexplained":
                label = label_as(*_led_by(evidence, symptom.estimate, tie))
        drafts.append(_Draft(index, rows, label, params, confounders, symptom))
    labels = _kin_by_ending(diagnosis, [d.rows for d in drafts], [d.label for d in drafts],
                            endings)
    found = []
    for draft, label in zip(drafts, labels, strict=True):
        failures = np.array([(event_deps[draft.rows] == d).sum() for d in deployments],
                            dtype=float)
        trend = fit_trend(deployments, episodes, failures)
        # A family known only from how the failures end names no parameter to change.
        actions = propose_actions(diagnosis, draft.rows, draft.label, draft.params, evidence,
                                  draft.confounders, draft.symptom, endings)
        found.append(ClusterFinding(draft.index, draft.rows, label, trend, draft.params,
                                    actions))
    return sorted(found, key=lambda f: (f.urgency, diagnosis.signatures.episode_ids[f.rows[0]]))


def _kin_by_ending(diagnosis: Diagnosis, clusters: list[np.ndarray], labels: list[ClusterLabel],
                   endings: Endings) -> list[ClusterLabel]:
    """``labels``, where a cluster whose signals look like sim's ends in a way sim rarely
    ends (:func:`~sim2real.attribute.symptoms.beyond_sim`), and every cluster of one family
    that the telemetry explains ends that way too, with that family: sim lacks the cause,
    the telemetry missed it before the failure, and the fleet's own explained failures say
    which family ends so."""
    ends = [common_ending(diagnosis, rows) for rows in clusters]
    out = list(labels)
    for i, (rows, label) in enumerate(zip(clusters, labels, strict=True)):
        if label.taxonomy != "unexplained":
            continue
        beyond = beyond_sim(diagnosis, rows, endings)
        if beyond is None:
            continue
        symptom, ended, rollouts = beyond
        # A task-scope cluster ends so through a context its events carry and these do not
        # (or they would be labelled so): it says nothing of this cluster's family.
        kin = {other.taxonomy for j, other in enumerate(labels) if j != i and ends[j] == symptom
               and other.taxonomy not in ("unexplained", "task_scope_overflow")}
        if len(kin) != 1:
            continue
        family = kin.pop()
        agree = float(np.mean(event_families(diagnosis.signatures, rows) == family))
        out[i] = replace(label, taxonomy=family, confidence=round(agree, 3), explanation=(
            f"{label.explanation} They end in '{symptom}', far more often than the {ended} of "
            f"{rollouts} sim rollouts of their tasks that do, as this report's {family} "
            "clusters end: a cause of that family sim lacks, with no trace in the signals "
            "before the failure."))
    return out


def _led_by(evidence: ParamEvidence | None, lead: ParamEstimate | None,
            tie: str | None) -> tuple[str | None, str | None, str | None]:
    """:func:`label_cluster`'s ``lead``, ``tie`` and ``lead_shows`` where ``lead`` (if any)
    is the parameter the cluster's events point to."""
    if lead is None or evidence is None:
        return None, tie, None
    return param_family(evidence, lead.param), tie, moved_family(evidence, lead.param)


def build_report(diagnosis: Diagnosis, previous: ReportModel | None = None,
                 executor: Executor | None = None) -> Report:
    """The report of a diagnosis; ``previous`` keeps the IDs of clusters found again;
    ``executor`` runs the parameter inference's window reads where it is local."""
    findings = find_clusters(diagnosis, executor)
    sig = diagnosis.signatures
    identities = assign_ids(diagnosis, findings, previous)
    cluster_of = np.full(len(sig.episode_ids), None, dtype=object)
    for finding, identity in zip(findings, identities, strict=True):
        cluster_of[finding.rows] = identity.cluster_id
    clusters = [_cluster(diagnosis, f, identity.cluster_id, identity.lifecycle)
                for f, identity in zip(findings, identities, strict=True)]
    growing = [(f.trend.growth_low, identity.cluster_id)
               for f, identity in zip(findings, identities, strict=True)
               if f.trend.growth_low > 0]
    model = ReportModel(
        tool_version=__version__,
        dataset=_summary(diagnosis.dataset, len(sig.episode_ids),
                         diagnosis.yardstick.channels[diagnosis.yardstick.sim_channels:]),
        events=_events(diagnosis, cluster_of),
        clusters=clusters,
        fastest_growing=max(growing)[1] if growing else None,
        warnings=diagnosis.warnings,
    )
    return Report(model, _signature_table(diagnosis, cluster_of),
                  _traces(diagnosis, findings))


def with_check_evidence(report: Report, evidence: dict[str, str]) -> Report:
    """The report with counterfactual-check results added to the actions they tested.

    Args:
        report: a built report.
        evidence: cluster ID -> what the checks on it found
            (:func:`sim2real.sim.check.check_evidence`).
    """
    if not evidence:
        return report
    clusters = []
    for c in report.model.clusters:
        text = evidence.get(c.cluster_id)
        if not text or not c.actions:
            clusters.append(c)
            continue
        tested = next((i for i, a in enumerate(c.actions) if a.target.startswith("param.")), 0)
        action = c.actions[tested]
        joined = f"{action.evidence} {text}" if action.evidence else text
        actions = list(c.actions)
        actions[tested] = action.model_copy(update={"evidence": joined})
        clusters.append(c.model_copy(update={"actions": actions}))
    model = report.model.model_copy(update={"clusters": clusters})
    return Report(model, report.signatures, report.traces)


def empty_report(dataset: Dataset) -> Report:
    """The report of a dataset whose real episodes all succeeded: nothing to cluster."""
    model = ReportModel(
        tool_version=__version__,
        dataset=_summary(dataset, 0),
        events=[],
        clusters=[],
        fastest_growing=None,
        warnings=[*dataset.warnings, "no real failures: nothing to cluster"],
    )
    signatures = pa.table({"episode_id": pa.array([], pa.string()),
                           "cluster_id": pa.array([], pa.string()),
                           "embed_x": pa.array([], pa.float64()),
                           "embed_y": pa.array([], pa.float64()),
                           "drift_score": pa.array([], pa.float64())})
    return Report(model, signatures, _trace_table({k: [] for k in _TRACE_COLUMNS}))


def _summary(dataset: Dataset, failures: int,
             reference_channels: Sequence[str] = ()) -> DatasetSummary:
    episodes = dataset.episodes
    source = episodes["source"]
    return DatasetSummary(
        episodes_real=pc.sum(pc.equal(source, "real")).as_py() or 0,
        episodes_sim=pc.sum(pc.equal(source, "sim")).as_py() or 0,
        episodes_reference=pc.sum(pc.equal(source, "reference")).as_py() or 0,
        compared_with=compared_with(dataset),
        failures=failures,
        deployments=list(dataset.deployments),
        tasks=sorted(set(episodes["task"].to_pylist())),
        path=dataset.root.canonical(),
        units={n: c.unit for n, c in dataset.channels.items() if c.unit},
        reference_channels=list(reference_channels),
    )


def _events(diagnosis: Diagnosis, cluster_of: np.ndarray) -> list[EventReport]:
    sig = diagnosis.signatures
    table = diagnosis.events
    ctx_columns = [c for c in table.column_names if c.startswith("ctx.")]
    columns = {c: table[c].to_pylist() for c in
               ["deployment", "robot_id", "site", "failure_time", "failure_label", "task",
                *ctx_columns] if c in table.column_names}
    events = []
    for i, episode_id in enumerate(sig.episode_ids):
        order = np.argsort(-np.abs(sig.effects[i]), kind="stable")[:5]
        events.append(EventReport(
            episode_id=episode_id,
            deployment=columns["deployment"][i],
            cluster_id=cluster_of[i],
            drift_score=round(float(sig.drift_score[i]), 4),
            family_scores=FamilyScores(**{f: round(float(v), 4) for f, v in
                                          zip(SCORE_FAMILIES, sig.family_scores[i],
                                              strict=True)}),
            top_channels=[TopChannel(channel=sig.channels[j], family=sig.channel_families[j],
                                     effect=round(float(sig.effects[i, j]), 4)) for j in order],
            nearest_sim=sig.nearest[i],
            robot_id=columns.get("robot_id", [None] * len(sig.episode_ids))[i],
            site=columns.get("site", [None] * len(sig.episode_ids))[i],
            task=columns["task"][i],
            failure_time=round(float(diagnosis.ends[i]), 4),
            failure_label=columns.get("failure_label", [None] * len(sig.episode_ids))[i],
            context={c.removeprefix("ctx."): columns[c][i] for c in ctx_columns},
            novel_context=sig.novelty.values[i],
            suspicious_sys=sig.sys_values[i],
        ))
    return events


def _cluster(diagnosis: Diagnosis, f: ClusterFinding, cluster_id: str,
             lifecycle: str) -> ClusterReport:
    sig = diagnosis.signatures
    trend = f.trend
    return ClusterReport(
        cluster_id=cluster_id,
        taxonomy=f.label.taxonomy,  # type: ignore[arg-type]
        confidence=f.label.confidence,
        explanation=f.label.explanation,
        size=int(f.rows.size),
        events=[sig.episode_ids[i] for i in f.rows],
        trend=ClusterTrend(
            per_deployment=[DeploymentRate(deployment=d, episodes=int(e), failures=int(n),
                                           rate=round(float(n / e) if e else 0.0, 6))
                            for d, e, n in zip(trend.deployments, trend.episodes,
                                               trend.failures, strict=True)],
            growth=round(trend.growth, 6),
            p_value=round(trend.p_value, 6),
            growth_ci=[_finite(trend.growth_low), _finite(trend.growth_high)],
        ),
        top_channels=[TopChannel(channel=c, family=fam, effect=round(e, 4))
                      for c, fam, e in f.label.top_channels],
        sim_params=[SimParam.model_validate(p.as_dict()) for p in f.params],
        actions=f.actions,
        actions_note=NOT_ADDITIVE if len(f.actions) > 1 else None,
        lifecycle=lifecycle,  # type: ignore[arg-type]
        sim_check=None,
        family_scores={k: round(v, 4) for k, v in f.label.family_medians.items()},
    )


def _finite(x: float) -> float | None:
    return round(float(x), 6) if np.isfinite(x) else None


def _signature_table(diagnosis: Diagnosis, cluster_of: np.ndarray) -> pa.Table:
    sig = diagnosis.signatures
    features = diagnosis.features.values
    if features.shape[0] >= 2 and features.shape[1] >= 2 and np.ptp(features, axis=0).any():
        embed = PCA(n_components=2, random_state=0).fit_transform(features)
    else:
        embed = np.zeros((features.shape[0], 2))
    columns: dict[str, object] = {
        "episode_id": list(sig.episode_ids),
        "cluster_id": pa.array(cluster_of.tolist(), pa.string()),
        "embed_x": embed[:, 0],
        "embed_y": embed[:, 1],
        "drift_score": sig.drift_score,
    }
    for j, channel in enumerate(sig.channels):
        columns[f"z.{channel}"] = sig.effects[:, j]
    for j, channel in enumerate(sig.channels):
        columns[f"rough.{channel}"] = sig.rough[:, j]
    for k, family in enumerate(SCORE_FAMILIES):
        columns[f"family.{family}"] = sig.family_scores[:, k]
    return pa.table(columns)


def _traces(diagnosis: Diagnosis, findings: list[ClusterFinding]) -> pa.Table:
    """The real windows of a few events per cluster beside their nearest sim rollouts."""
    sig = diagnosis.signatures
    bank = diagnosis.matcher.bank_
    real = diagnosis.real_grid
    length = diagnosis.config.window_s
    records: dict[str, list[object]] = {k: [] for k in _TRACE_COLUMNS}
    for f in findings:
        values = diagnosis.features.values[f.rows]
        dist = np.linalg.norm(values - np.median(values, axis=0), axis=1)
        shown = f.rows[np.argsort(dist, kind="stable")[:_TRACE_EVENTS]]
        channels = [c for c, _, _ in f.label.top_channels][:_TRACE_CHANNELS]
        for i in shown:
            end = float(diagnosis.ends[i])
            span = min(length, end) if end > 0 else length
            n = int(min(_TRACE_POINTS, max(2, span / real.dt + 1)))
            times = window_times(np.array([end]), span, n)
            rel = times[0] - end
            real_vals = real.at(np.array([i]), times)[0]
            _append(records, sig.episode_ids[i], sig.episode_ids[i], "real", channels,
                    real.channels, rel, real_vals)
            rows = bank.grid.rows(sig.nearest[i])
            if rows.size:
                sim_times = window_times(bank.end_times(rows, end), span, n)
                sim_vals = bank.grid.at(rows, sim_times)
                for r, sim_id in enumerate(sig.nearest[i]):
                    _append(records, sig.episode_ids[i], sim_id, "sim", channels,
                            bank.grid.channels, rel, sim_vals[r])
    return _trace_table(records)


def _trace_table(records: dict[str, list[object]]) -> pa.Table:
    return pa.table({
        "event_id": pa.array(records["event_id"], pa.string()),
        "episode_id": pa.array(records["episode_id"], pa.string()),
        "role": pa.array(records["role"], pa.string()),
        "channel": pa.array(records["channel"], pa.string()),
        "t": pa.array(records["t"], pa.float64()),
        "value": pa.array(records["value"], pa.float64()),
    })


def _append(records: dict[str, list[object]], event_id: str, episode_id: str, role: str,
            channels: list[str], available: tuple[str, ...], rel: np.ndarray,
            values: np.ndarray) -> None:
    for channel in channels:
        if channel not in available:
            continue
        column = values[:, available.index(channel)]
        keep = np.isfinite(column)
        k = int(keep.sum())
        records["event_id"] += [event_id] * k
        records["episode_id"] += [episode_id] * k
        records["role"] += [role] * k
        records["channel"] += [channel] * k
        records["t"] += np.round(rel[keep], 4).tolist()
        records["value"] += column[keep].astype(float).tolist()



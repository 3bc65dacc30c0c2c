"""Turn a :class:`Report` into the plain view objects the Jinja templates show.

All decisions about what a page shows (which figures, in what order, the empty states)
live here; the templates only lay them out.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sim2real.report import figures as F
from sim2real.report._tables import Signatures, Traces, breakdowns, heatmap_matrix
from sim2real.report._words import (
    ACTION_LABELS,
    TAXONOMY_HELP,
    TAXONOMY_LABELS,
    anchor,
    extra,
    justification,
    summary_sentences,
)
from sim2real.report.model import Action, ClusterReport, EventReport, ReportModel

if TYPE_CHECKING:
    from sim2real.report.html import FigureSet
    from sim2real.report.snapshot import Report

__all__ = ["TAXONOMY_COLORS", "TAXONOMY_LABELS", "ReportView", "report_view"]

TAXONOMY_COLORS = F.TAXONOMY_COLORS
_CARD_PARAMS = 3  # sim parameters on a card; the cluster page shows them all
_MAX_TRACES = 4  # trajectories drawn per cluster page
_MAX_ROWS = 500  # event rows per cluster page


@dataclass(frozen=True)
class ActionView:
    action: Action
    label: str
    why: str


@dataclass(frozen=True)
class EventView:
    event: EventReport
    anchor: str
    robot: str | None
    site: str | None
    context: dict[str, object]
    failure_time: object
    trace_anchor: str | None
    notes: list[tuple[str, str]]


@dataclass(frozen=True)
class TraceView:
    event: EventReport
    anchor: str
    event_anchor: str
    fig: str | None


@dataclass(frozen=True)
class ClusterView:
    cluster: ClusterReport
    rank: int
    anchor: str
    color: str
    label: str
    help: str
    lifecycle: str | None
    resolved_since: str | None
    last_rate: float | None
    last_deployment: str | None
    growth_factor: float
    growth_ci: str
    explained: list[tuple[str, float]]
    family_scores: list[tuple[str, float]]
    actions: list[ActionView]
    spark: str | None
    params_card: str | None
    params_full: str | None
    rate_fig: str | None
    heatmap: str | None
    heatmap_note: str
    breakdowns: list[tuple[str, str | None]]
    events: list[EventView]
    hidden_events: int
    traces: list[TraceView]


@dataclass(frozen=True)
class ReportView:
    model: ReportModel
    summary: list[tuple[str, str]]
    clusters: list[ClusterView]
    overview: str | None
    unassigned: list[EventView]
    colors: dict[str, str]
    labels: dict[str, str]
    help: dict[str, str]
    details: str
    reference_channels: list[str]
    compared_with: str


def _event_view(e: EventReport, traces: Traces) -> EventView:
    context = extra(e, "context")
    return EventView(
        event=e,
        anchor=anchor("event", e.episode_id),
        robot=None if extra(e, "robot_id") is None else str(extra(e, "robot_id")),
        site=None if extra(e, "site") is None else str(extra(e, "site")),
        context=dict(context) if isinstance(context, dict) else {},
        failure_time=extra(e, "failure_time"),
        trace_anchor=anchor("trace", e.episode_id) if e.episode_id in traces else None,
        notes=_notes(e),
    )


def _notes(e: EventReport) -> list[tuple[str, str]]:
    """The optional per-event facts an analysis may add, as label/text pairs."""
    out = []
    for key, label in (
        ("task", "task"),
        ("failure_label", "symptom"),
        ("novel_context", "context sim never covered"),
        ("suspicious_sys", "suspicious system values"),
    ):
        value = extra(e, key)
        if isinstance(value, list | tuple):
            value = ", ".join(str(v) for v in value)
        if value:
            out.append((label, str(value)))
    return out


def _growth_ci(c: ClusterReport) -> str:
    """The 95% interval of the per-deployment rate factor, when the analysis gave one."""
    ci = extra(c.trend, "growth_ci")
    if not isinstance(ci, list | tuple) or len(ci) != 2:
        return ""
    if not all(isinstance(v, int | float) for v in ci):
        return ""
    low, high = (math.exp(float(v)) for v in ci)
    return f"95% CI ×{low:.2f}–×{high:.2f}"


def _explained(c: ClusterReport) -> list[tuple[str, float]]:
    """Share of the signature each parameter explains, where the analysis gave one."""
    out = []
    for p in c.sim_params:
        value = extra(p, "explained")
        if isinstance(value, int | float):
            out.append((p.param, float(value)))
    return out


def _scores(value: object) -> list[tuple[str, float]]:
    """Family scores (a model or a dict) as sorted pairs, largest first."""
    raw = value.model_dump() if hasattr(value, "model_dump") else value
    if not isinstance(raw, dict):
        return []
    pairs = [(str(k), float(v)) for k, v in raw.items() if isinstance(v, int | float)]
    return sorted(pairs, key=lambda kv: -kv[1])


def _traces(
    c: ClusterReport,
    events: list[EventReport],
    traces: Traces,
    color: str,
    figs: FigureSet,
    units: dict[str, str],
) -> list[TraceView]:
    shown = [e for e in sorted(events, key=lambda e: -e.drift_score) if e.episode_id in traces]
    out = []
    for e in shown[:_MAX_TRACES]:
        prefer = [t.channel for t in e.top_channels] + [t.channel for t in c.top_channels]
        channels, series = traces.series(e.episode_id, prefer)
        fig = F.trace_overlay(channels, series, color, units) if channels else None
        out.append(
            TraceView(
                e, anchor("trace", e.episode_id), anchor("event", e.episode_id), figs.add(fig)
            )
        )
    return out


def _heatmap(events: list[EventReport], sig: Signatures, figs: FigureSet) -> tuple[str | None, str]:
    z, channels, ids = heatmap_matrix(sig, events)
    if not channels:
        return None, "No drift signature was recorded for these events."
    note = f"{len(channels)} channels with the largest mean effect"
    if len(ids) < len(events):
        note += f"; the {len(ids)} most typical of {len(events)} events"
    fig = F.signature_heatmap(z, channels, ids, [anchor("event", i) for i in ids])
    return figs.add(fig), note + "."


def _cluster_view(
    rank: int,
    c: ClusterReport,
    model: ReportModel,
    sig: Signatures,
    traces: Traces,
    figs: FigureSet,
) -> ClusterView:
    color = F.TAXONOMY_COLORS[c.taxonomy]
    mine = set(c.events)
    events = [e for e in model.events if e.episode_id in mine]
    last = c.trend.per_deployment[-1] if c.trend.per_deployment else None
    has_trend = bool(c.trend.per_deployment)
    heat, note = _heatmap(events, sig, figs)
    rows = sorted(events, key=lambda e: -e.drift_score)
    lifecycle = str(extra(c, "lifecycle")) if extra(c, "lifecycle") else None
    resolved_since = _resolved_since(c) if lifecycle == "resolved" else None
    units = extra(model.dataset, "units")
    return ClusterView(
        cluster=c,
        rank=rank,
        anchor=anchor("cluster", c.cluster_id),
        color=color,
        label=TAXONOMY_LABELS[c.taxonomy],
        help=TAXONOMY_HELP[c.taxonomy],
        lifecycle=lifecycle,
        resolved_since=resolved_since,
        last_rate=last.rate if last else None,
        last_deployment=last.deployment if last else None,
        growth_factor=math.exp(c.trend.growth),
        growth_ci=_growth_ci(c),
        explained=_explained(c),
        family_scores=_scores(extra(c, "family_scores")),
        # a resolved cluster needs nothing done: its actions would only mislead
        actions=[]
        if resolved_since
        else [ActionView(a, ACTION_LABELS[a.kind], justification(a)) for a in c.actions],
        spark=figs.add(F.sparkline(c.trend, color) if has_trend else None),
        params_card=figs.add(
            F.param_intervals(c.sim_params[:_CARD_PARAMS], color) if c.sim_params else None
        ),
        params_full=figs.add(F.param_intervals(c.sim_params, color) if c.sim_params else None),
        rate_fig=figs.add(F.rate_intervals(c.trend, color) if has_trend else None),
        heatmap=heat,
        heatmap_note=note,
        breakdowns=[
            (b.title, figs.add(F.breakdown_bars(b.values, b.in_cluster, b.overall, color)))
            for b in breakdowns(events, model.events)
        ],
        events=[_event_view(e, traces) for e in rows[:_MAX_ROWS]],
        hidden_events=max(0, len(rows) - _MAX_ROWS),
        traces=_traces(c, events, traces, color, figs, units if isinstance(units, dict) else {}),
    )


def _resolved_since(c: ClusterReport) -> str | None:
    """The first deployment of the cluster's trailing run without failures."""
    per = c.trend.per_deployment
    since = None
    for row in reversed(per):
        if row.failures:
            break
        since = row.deployment
    return since


def _overview(model: ReportModel, sig: Signatures, figs: FigureSet) -> str | None:
    """The 2-D map of all failures, one colour per cluster, unassigned in grey."""
    if sig.embedding is None or not len(sig.ids):
        return None
    palette = F.cluster_palette([(c.cluster_id, c.taxonomy) for c in model.clusters])
    labels = {
        c.cluster_id: f"{c.cluster_id} · {TAXONOMY_LABELS[c.taxonomy].lower()}"
        for c in model.clusters
    }
    groups = []
    for cid in [*palette, ""]:
        on = sig.cluster == cid if cid else ~np.isin(sig.cluster, list(palette))
        if not on.any():
            continue
        ids = [str(i) for i in sig.ids[on]]
        groups.append(
            (
                labels.get(cid, "unassigned"),
                palette.get(cid, F.UNASSIGNED),
                sig.embedding[on, 0],
                sig.embedding[on, 1],
                ids,
                [anchor("event", i) for i in ids],
            )
        )
    return figs.add(F.overview_map(groups))


def report_view(report: Report, figs: FigureSet) -> ReportView:
    """Everything the report pages show, with each figure registered in ``figs``."""
    model = report.model
    sig, traces = Signatures(report.signatures), Traces(report.traces)
    clusters = [
        _cluster_view(i, c, model, sig, traces, figs) for i, c in enumerate(model.clusters, start=1)
    ]
    known = {c.cluster_id for c in model.clusters}
    unassigned = [_event_view(e, traces) for e in model.events if e.cluster_id not in known]
    shown = [r for c in clusters for r in c.events] + unassigned
    refs = extra(model.dataset, "reference_channels", [])
    return ReportView(
        model=model,
        summary=summary_sentences(model),
        clusters=clusters,
        overview=_overview(model, sig, figs),
        unassigned=unassigned,
        colors=dict(F.TAXONOMY_COLORS),
        labels=dict(TAXONOMY_LABELS),
        help=dict(TAXONOMY_HELP),
        details=_details_json(shown),
        reference_channels=[str(c) for c in refs] if isinstance(refs, list) else [],
        compared_with=str(extra(model.dataset, "compared_with", "simulation")),
    )


def _details_json(rows: list[EventView]) -> str:
    """Each shown event's details, keyed by its anchor; the page builds a row's details
    from them when it is opened (hundreds of rows of markup would weigh more than the
    figures)."""
    out = {}
    for r in rows:
        e = r.event
        trace = r.trace_anchor
        facts: list[tuple[str, object]] = [("cluster", e.cluster_id or "unassigned")]
        if isinstance(r.failure_time, int | float):
            facts.append(("failure time", f"{r.failure_time:.3g} s into the episode"))
        facts += [(k, v) for k, v in r.notes] + list(r.context.items())
        out[r.anchor] = {
            "facts": [[k, str(v)] for k, v in facts],
            "cluster": e.cluster_id,
            "sim": list(e.nearest_sim),
            "trace": trace,
            "fam": [[k, round(float(v), 2)] for k, v in e.family_scores.model_dump().items()],
            "top": [[t.channel, extra(t, "family") or "", round(t.effect, 1)]
                    for t in e.top_channels[:8]],
        }
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False).replace("<", "\\u003c")

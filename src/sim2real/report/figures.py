"""Plotly figure builders for the report pages.

Each builder takes plain report data and returns a :class:`plotly.graph_objects.Figure`
with a small shared layout (no plotly template, so each figure's JSON stays small: a big
report embeds hundreds of them). The HTML renderer serialises them with ``to_json``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots
from scipy import stats

from sim2real.report.model import ClusterTrend, SimParam, ValidationCluster

__all__ = [
    "TAXONOMY_COLORS",
    "UNASSIGNED",
    "VERDICT_COLORS",
    "breakdown_bars",
    "cluster_palette",
    "overview_map",
    "param_intervals",
    "poisson_rate_interval",
    "rate_intervals",
    "signature_heatmap",
    "sparkline",
    "trace_overlay",
    "validation_rates",
]

TAXONOMY_COLORS: Mapping[str, str] = {
    "perception_drift": "#7c3aed",
    "dynamics_mismatch": "#ea580c",
    "task_scope_overflow": "#2563eb",
    "deployment_system_noise": "#0d9488",
    "unexplained": "#64748b",
}
VERDICT_COLORS: Mapping[str, str] = {
    "shrank": "#16a34a",
    "gone": "#16a34a",
    "grew": "#dc2626",
    "new": "#ea580c",
    "unchanged": "#64748b",
}
_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "star", "hexagon", "x")
UNASSIGNED = ("#cbd5e1", "circle")
_INK = "#1e293b"
_MUTED = "#94a3b8"
_FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"


def _layout(height: int, **extra: object) -> go.Layout:
    """The shared look: transparent background, quiet grid, system font."""
    base: dict[str, object] = {
        "template": None,
        "height": height,
        "margin": {"l": 48, "r": 16, "t": 12, "b": 36},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "font": {"family": _FONT, "size": 12, "color": _INK},
        "hoverlabel": {"font": {"family": _FONT}},
        "showlegend": False,
        "xaxis": {"gridcolor": "#e2e8f0", "zeroline": False, "automargin": True},
        "yaxis": {"gridcolor": "#e2e8f0", "zeroline": False, "automargin": True},
    }
    base.update(extra)
    return go.Layout(**base)


def poisson_rate_interval(failures: int, episodes: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Garwood) interval of a Poisson rate ``failures / episodes``.

    Returns ``(0, 0)`` when there were no episodes: no exposure, nothing to estimate.
    """
    if episodes <= 0:
        return (0.0, 0.0)
    alpha = 1.0 - level
    low = 0.0 if failures <= 0 else stats.chi2.ppf(alpha / 2, 2 * failures) / 2
    high = stats.chi2.ppf(1 - alpha / 2, 2 * failures + 2) / 2
    return (float(low) / episodes, float(high) / episodes)


def sparkline(trend: ClusterTrend, color: str) -> go.Figure:
    """A tiny rate-per-deployment line for a cluster card (percent of episodes)."""
    rows = trend.per_deployment
    x = [r.deployment for r in rows]
    y = [100 * r.rate for r in rows]
    text = [f"{r.deployment}: {100 * r.rate:.1f}% ({r.failures}/{r.episodes})" for r in rows]
    fig = go.Figure(
        go.Scatter(
            x=x,
            y=y,
            mode="lines+markers",
            line={"color": color, "width": 2},
            marker={"size": 4},
            fill="tozeroy",
            fillcolor=_fade(color, 0.12),
            hovertext=text,
            hoverinfo="text",
        ),
        layout=_layout(64, margin={"l": 2, "r": 2, "t": 4, "b": 4}),
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, rangemode="tozero")
    return fig


def param_intervals(params: Sequence[SimParam], color: str) -> go.Figure:
    """Sim range, nominal and estimate (± 1.96 standard errors) for each parameter.

    Parameters have unrelated units, so the x axis is in units of each sim range:
    0 is the range's low end and 1 its high end; hover shows the real values.
    """
    names = [p.param for p in params][::-1]  # plotly draws the first category at the bottom
    ordered = list(params)[::-1]
    fig = go.Figure(
        layout=_layout(40 + 34 * len(params), margin={"l": 8, "r": 16, "t": 8, "b": 30})
    )
    for p in ordered:
        fig.add_trace(
            go.Scatter(
                x=[0, 1],
                y=[p.param, p.param],
                mode="lines",
                line={"color": "#cbd5e1", "width": 10},
                hoverinfo="text",
                hovertext=f"sim range {p.sim_low:.4g} – {p.sim_high:.4g}",
            )
        )
    spread = [_spread(p) for p in ordered]
    fig.add_trace(
        go.Scatter(
            x=[(p.sim_nominal - p.sim_low) / s for p, s in zip(ordered, spread, strict=True)],
            y=names,
            mode="markers",
            name="nominal",
            marker={"symbol": "line-ns", "size": 14, "line": {"width": 2, "color": "#475569"}},
            hovertext=[f"nominal {p.sim_nominal:.4g}" for p in ordered],
            hoverinfo="text",
        )
    )
    errors = [1.96 * _uncertainty(p) / s for p, s in zip(ordered, spread, strict=True)]
    fig.add_trace(
        go.Scatter(
            x=[(p.estimate - p.sim_low) / s for p, s in zip(ordered, spread, strict=True)],
            y=names,
            mode="markers",
            name="estimate",
            error_x={"type": "data", "array": errors, "color": color, "thickness": 2, "width": 4},
            marker={
                "size": 11,
                "color": color,
                "line": {
                    "width": 2,
                    "color": ["#dc2626" if p.outside_range else "white" for p in ordered],
                },
            },
            hovertext=[_param_hover(p) for p in ordered],
            hoverinfo="text",
        )
    )
    xs = [(p.estimate - p.sim_low) / s for p, s in zip(ordered, spread, strict=True)]
    low = min([0.0, *(x - e for x, e in zip(xs, errors, strict=True))])
    high = max([1.0, *(x + e for x, e in zip(xs, errors, strict=True))])
    pad = 0.08 * (high - low)  # keep the range ends and their labels inside the plot
    fig.update_xaxes(
        range=[low - pad, high + pad],
        tickvals=[0, 1],
        ticktext=["sim low", "sim high"],
        zeroline=False,
        showgrid=False,
    )
    fig.update_yaxes(showgrid=False)
    return fig


def rate_intervals(trend: ClusterTrend, color: str) -> go.Figure:
    """Failure rate per deployment (percent of real episodes) with exact 95% intervals."""
    rows = trend.per_deployment
    bounds = [poisson_rate_interval(r.failures, r.episodes) for r in rows]
    y = [100 * r.rate for r in rows]
    fig = go.Figure(
        go.Scatter(
            x=[r.deployment for r in rows],
            y=y,
            mode="lines+markers",
            line={"color": color, "width": 2},
            marker={"size": 8, "color": color},
            error_y=_interval_bars(bounds, y, _fade(color, 0.6)),
            hovertext=[
                f"{r.deployment}: {100 * r.rate:.2f}% ({r.failures} of {r.episodes} episodes)"
                f"<br>95% interval {100 * lo:.2f}–{100 * hi:.2f}%"
                for r, (lo, hi) in zip(rows, bounds, strict=True)
            ],
            hoverinfo="text",
        ),
        layout=_layout(260),
    )
    fig.update_yaxes(title_text="failures per 100 episodes", rangemode="tozero")
    fig.update_xaxes(type="category")
    return fig


def signature_heatmap(
    z: np.ndarray, channels: Sequence[str], events: Sequence[str], anchors: Sequence[str]
) -> go.Figure:
    """The drift signature: ``z`` of layout ``(n_channels, n_events)``, red = real above sim."""
    fig = go.Figure(
        go.Heatmap(
            z=np.round(z, 3),
            x=list(range(len(events))),
            y=list(channels),
            customdata=np.array([list(anchors)] * len(channels)),
            text=np.array([list(events)] * len(channels)),
            colorscale="RdBu",
            reversescale=True,
            zmid=0,
            zmin=-4,
            zmax=4,
            colorbar={"title": {"text": "effect (z)"}, "thickness": 10, "len": 0.9},
            hovertemplate="%{text}<br>%{y}: %{z:.2f}<extra></extra>",
        ),
        layout=_layout(max(220, 60 + 16 * len(channels)), margin={"l": 8, "r": 8, "t": 8, "b": 30}),
    )
    fig.update_xaxes(
        title_text=f"{len(events)} events (click one to open it)", showticklabels=False
    )
    fig.update_yaxes(autorange="reversed", showgrid=False)
    return fig


def cluster_palette(clusters: Sequence[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """Colour and marker per cluster: its taxonomy's colour, as on its card; clusters
    sharing a taxonomy get different marker shapes."""
    seen: dict[str, int] = {}
    out = {}
    for cid, taxonomy in clusters:
        k = seen.get(taxonomy, 0)
        seen[taxonomy] = k + 1
        out[cid] = (TAXONOMY_COLORS[taxonomy], _SYMBOLS[k % len(_SYMBOLS)])
    return out


def overview_map(
    groups: Sequence[
        tuple[str, tuple[str, str], np.ndarray, np.ndarray, Sequence[str], Sequence[str]]
    ],
) -> go.Figure:
    """All failures on the signature embedding; one trace per group.

    Args:
        groups: ``(label, (colour, symbol), x, y, episode_ids, anchors)`` per cluster,
            unassigned last.
    """
    fig = go.Figure(
        layout=_layout(
            420,
            showlegend=True,
            legend={"orientation": "v", "x": 1.01, "y": 1},
            margin={"l": 8, "r": 8, "t": 8, "b": 8},
        )
    )
    # WebGL only where SVG would be slow: some locked-down machines have no WebGL at all
    kind = go.Scattergl if sum(len(g[4]) for g in groups) > 5000 else go.Scatter
    for label, (color, symbol), x, y, ids, anchors in groups:
        fig.add_trace(
            kind(
                x=np.round(x, 4),
                y=np.round(y, 4),
                mode="markers",
                name=label,
                marker={
                    "color": color,
                    "symbol": symbol,
                    "size": 7,
                    "opacity": 0.85,
                    "line": {"width": 0.5, "color": "white"},
                },
                text=list(ids),
                customdata=list(anchors),
                hovertemplate=f"{label}<br>%{{text}}<extra></extra>",
            )
        )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, scaleanchor="x")
    return fig


def breakdown_bars(
    values: Sequence[str], in_cluster: Sequence[float], overall: Sequence[float], color: str
) -> go.Figure:
    """Share of the cluster's failures per value, beside that value's share of all failures."""
    y = list(values)[::-1]
    fig = go.Figure(
        layout=_layout(
            60 + 26 * len(values),
            barmode="group",
            showlegend=True,
            legend={"orientation": "h", "y": -0.25, "x": 0, "traceorder": "reversed"},
            margin={"l": 8, "r": 8, "t": 8, "b": 40},
        )
    )
    # horizontal groups stack their first trace lowest: add the reference first
    fig.add_trace(
        go.Bar(
            y=y,
            x=[100 * v for v in overall][::-1],
            orientation="h",
            name="all failures",
            marker={"color": "#cbd5e1"},
            hovertemplate="%{y}: %{x:.0f}% of all failures<extra></extra>",
        )
    )
    fig.add_trace(
        go.Bar(
            y=y,
            x=[100 * v for v in in_cluster][::-1],
            orientation="h",
            name="this cluster",
            marker={"color": color},
            hovertemplate="%{y}: %{x:.0f}% of this cluster<extra></extra>",
        )
    )
    fig.update_xaxes(ticksuffix="%", rangemode="tozero")
    return fig


def trace_overlay(
    channels: Sequence[str],
    series: Mapping[str, Sequence[tuple[str, str, np.ndarray, np.ndarray]]],
    color: str,
) -> go.Figure:
    """The real trajectory over its nearest sim rollouts, one row per channel.

    Args:
        channels: the channels to draw, top to bottom.
        series: per channel, ``(episode_id, role, t, value)`` for each trajectory; ``t`` is
            seconds relative to the failure, so the failure sits at ``t = 0``.
    """
    fig = make_subplots(
        rows=len(channels),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.04,
        subplot_titles=list(channels),
    )
    fig.update_layout(
        _layout(
            90 + 130 * len(channels),
            showlegend=True,
            legend={"orientation": "h", "y": 1.0, "yanchor": "bottom"},
            margin={"l": 48, "r": 16, "t": 36, "b": 36},
        )
    )
    shown = {"real": False, "sim": False}
    for row, channel in enumerate(channels, start=1):
        # sim first, so the real line is drawn on top
        for episode, role, t, v in sorted(series.get(channel, []), key=lambda s: s[1] == "real"):
            real = role == "real"
            fig.add_trace(
                go.Scatter(
                    x=np.round(t, 4),
                    y=np.round(v, 5),
                    mode="lines",
                    name="real failure" if real else "nearest sim",
                    legendgroup=role,
                    showlegend=not shown[role],
                    line={"color": color if real else _MUTED, "width": 2.4 if real else 1.2},
                    opacity=1.0 if real else 0.7,
                    hovertemplate=f"{episode}<br>t=%{{x:.2f}} s<br>%{{y:.4g}}<extra></extra>",
                ),
                row=row,
                col=1,
            )
            shown[role] = True
    fig.add_vline(x=0, line={"color": "#dc2626", "dash": "dash", "width": 1.5})
    fig.add_annotation(
        x=0,
        y=1.0,
        yref="paper",
        xref="x",
        text="failure",
        showarrow=False,
        font={"color": "#dc2626"},
        xanchor="right",
        yanchor="bottom",
    )
    fig.update_annotations(font={"size": 12})
    fig.update_xaxes(title_text="seconds before failure", row=len(channels), col=1)
    return fig


def validation_rates(clusters: Sequence[ValidationCluster]) -> go.Figure:
    """Baseline and candidate rate per cluster, each with an exact 95% interval.

    The two sit a little apart on each cluster's row so their intervals never overlap.
    """
    rows = list(clusters)
    n = len(rows)
    fig = go.Figure(
        layout=_layout(
            80 + 52 * n,
            showlegend=True,
            legend={"orientation": "h", "y": -0.12, "x": 0},
            margin={"l": 8, "r": 16, "t": 8, "b": 48},
        )
    )
    for label, offset, color in (("baseline", 0.17, "#94a3b8"), ("candidate", -0.17, None)):
        summaries = [c.baseline if label == "baseline" else c.candidate for c in rows]
        bounds = [poisson_rate_interval(s.failures, s.episodes) for s in summaries]
        x = [100 * s.rate for s in summaries]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[n - 1 - i + offset for i in range(n)],
                mode="markers",
                name=label,
                marker={
                    "size": 11,
                    "symbol": "circle" if color else "diamond",
                    "color": [color or VERDICT_COLORS[c.verdict] for c in rows],
                },
                error_x=_interval_bars(bounds, x, color or "#475569"),
                hovertext=[
                    f"{c.cluster_id} {label}: {100 * s.rate:.2f}% ({s.failures}/{s.episodes})"
                    f"<br>95% interval {100 * lo:.2f}–{100 * hi:.2f}%"
                    for c, s, (lo, hi) in zip(rows, summaries, bounds, strict=True)
                ],
                hoverinfo="text",
            )
        )
    fig.update_xaxes(title_text="failures per 100 episodes", rangemode="tozero")
    fig.update_yaxes(
        tickvals=list(range(n)),
        ticktext=[c.cluster_id for c in rows][::-1],
        range=[-0.6, n - 0.4],
        showgrid=False,
    )
    return fig


def _spread(p: SimParam) -> float:
    width = p.sim_high - p.sim_low
    return width if width > 0 else 1.0


def _uncertainty(p: SimParam) -> float:
    """The estimate's standard error (an extension field); 0 when not given."""
    value = getattr(p, "uncertainty", None)
    if value is None:
        value = (p.model_extra or {}).get("uncertainty")
    return float(value) if isinstance(value, int | float) and np.isfinite(value) else 0.0


def _param_hover(p: SimParam) -> str:
    se = _uncertainty(p)
    estimate = f"estimate {p.estimate:.4g}" + (f" ± {1.96 * se:.2g}" if se else "")
    where = "outside the sim range" if p.outside_range else "inside the sim range"
    return f"{p.param}<br>{estimate} ({where})<br>shift {p.shift:+.2f} ranges from nominal"


def _fade(color: str, alpha: float) -> str:
    """``#rrggbb`` as an ``rgba`` with the given opacity."""
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _interval_bars(
    bounds: list[tuple[float, float]], values: list[float], color: str
) -> dict[str, object]:
    """Plotly error bars from rate intervals (fractions) around values in percent."""
    return {
        "type": "data",
        "symmetric": False,
        "color": color,
        "thickness": 1.5,
        "array": [100 * hi - v for (_, hi), v in zip(bounds, values, strict=True)],
        "arrayminus": [v - 100 * lo for (lo, _), v in zip(bounds, values, strict=True)],
    }

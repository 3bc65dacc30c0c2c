"""Figure builders for the report pages: plain plotly.js figure specs.

Each builder takes report data and returns a figure as a dict (``data`` and ``layout`` as
plotly.js reads them) with a small shared layout; the HTML renderer serialises them. Lines
are decimated to what a screen shows (:func:`decimate`) and numbers rounded to what a
pixel resolves, so a report of hundreds of figures stays a light file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from sim2real._format import fmt_range, fmt_value
from sim2real.report.model import ClusterTrend, SimParam, ValidationCluster

__all__ = [
    "TAXONOMY_COLORS",
    "UNASSIGNED",
    "VERDICT_COLORS",
    "Figure",
    "breakdown_bars",
    "cluster_palette",
    "decimate",
    "overview_map",
    "param_intervals",
    "poisson_rate_interval",
    "rate_intervals",
    "signature_heatmap",
    "sparkline",
    "trace_overlay",
    "validation_rates",
]

Figure = dict[str, Any]

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
OUTSIDE_RING = "#dc2626"  # the param strips' mark for an estimate outside the sim range
_INK = "#1e293b"
_MUTED = "#94a3b8"
_FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"


def _layout(height: int, **extra: object) -> dict[str, Any]:
    """The shared look: transparent background, quiet grid, system font."""
    base: dict[str, Any] = {
        "height": height,
        "margin": {"l": 48, "r": 16, "t": 12, "b": 36},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "font": {"family": _FONT, "size": 12, "color": _INK},
        "hoverlabel": {"font": {"family": _FONT}},
        "showlegend": False,
        "xaxis": _axis(),
        "yaxis": _axis(),
    }
    base.update(extra)
    return base


def _axis(**extra: object) -> dict[str, Any]:
    return {"gridcolor": "#e2e8f0", "zeroline": False, "automargin": True, **extra}


def _figure(data: list[dict[str, Any]], layout: dict[str, Any]) -> Figure:
    return {"data": data, "layout": layout}


def decimate(t: np.ndarray, v: np.ndarray, points: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """At most ``points`` samples of a line that draw the same picture at screen width.

    The samples are cut into ``points / 2`` equal runs and each run keeps its minimum and
    maximum, in time order, so spikes survive (a figure is never wider than a few hundred
    pixels, where more samples only overdraw).
    """
    n = len(t)
    if n <= points:
        return t, v
    runs = np.array_split(np.arange(n), points // 2)
    keep = []
    for run in runs:
        values = v[run]
        finite = np.isfinite(values)
        if not finite.any():
            keep.append(run[0])
            continue
        lo = run[np.flatnonzero(finite)[np.argmin(values[finite])]]
        hi = run[np.flatnonzero(finite)[np.argmax(values[finite])]]
        keep.extend(sorted({int(lo), int(hi)}))
    idx = np.array(keep)
    return t[idx], v[idx]


def _times(t: np.ndarray) -> dict[str, Any]:
    """A line's x: ``x0`` and ``dx`` where its samples lie on an even grid to within a
    twentieth of a step (a time grid's, stored rounded: far below a pixel at any width a
    page gives a line), so that a page carries two numbers instead of one per sample;
    else every ``x``."""
    n = len(t)
    if n > 2 and np.all(np.isfinite(t)) and t[-1] > t[0]:
        step = (t[-1] - t[0]) / (n - 1)
        if np.all(np.abs(t - (t[0] + step * np.arange(n))) <= 0.05 * step):
            return {"x0": _round([t[0]], 6)[0], "dx": _round([step], 6)[0]}
    return {"x": _round(t, 4)}


def _round(values: np.ndarray | Sequence[float], digits: int = 4) -> list[float | None]:
    """Floats to ``digits`` significant digits (plenty for a pixel); NaN becomes null."""
    out: list[float | None] = []
    for x in np.asarray(values, dtype=float).ravel().tolist():
        out.append(None if not np.isfinite(x) else float(f"{x:.{digits}g}"))
    return out


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


def sparkline(trend: ClusterTrend, color: str) -> Figure:
    """A tiny rate-per-deployment line for a cluster card (percent of episodes)."""
    rows = trend.per_deployment
    trace = {
        "type": "scatter",
        "x": [r.deployment for r in rows],
        "y": _round([100 * r.rate for r in rows]),
        "mode": "lines+markers",
        "line": {"color": color, "width": 2},
        "marker": {"size": 4},
        "fill": "tozeroy",
        "fillcolor": _fade(color, 0.12),
        "hovertext": [f"{r.deployment}: {100 * r.rate:.1f}% ({r.failures}/{r.episodes})"
                      for r in rows],
        "hoverinfo": "text",
    }
    layout = _layout(64, margin={"l": 2, "r": 2, "t": 4, "b": 4},
                     xaxis={"visible": False}, yaxis={"visible": False, "rangemode": "tozero"})
    return _figure([trace], layout)


def param_intervals(params: Sequence[SimParam], color: str) -> Figure:
    """Sim range, nominal and estimate (± 1.96 standard errors), one strip per parameter.

    Parameters have unrelated units, so each strip has its own axis, in the parameter's
    own values. An estimate outside the sim range is ringed in red: the ring is decided
    from the numbers drawn, so the picture and its legend cannot disagree.
    """
    n = len(params)
    row_px, top, bottom = 52, 6, 4
    height = top + bottom + row_px * n
    data: list[dict[str, Any]] = []
    layout = _layout(height, margin={"l": 8, "r": 16, "t": top, "b": bottom})
    for i, p in enumerate(params):
        k = "" if i == 0 else str(i + 1)
        xa, ya = f"x{k}", f"y{k}"
        err = 1.96 * _uncertainty(p)
        outside = not p.sim_low <= p.estimate <= p.sim_high
        low = min(p.sim_low, p.estimate - err)
        high = max(p.sim_high, p.estimate + err)
        pad = 0.06 * ((high - low) or 1.0)
        top_frac = 1 - (top + i * row_px) / height
        domain = [top_frac - (row_px - 22) / height, top_frac]
        layout[f"xaxis{k}"] = _axis(anchor=ya, range=_round([low - pad, high + pad]), nticks=6,
                                    showgrid=False, tickfont={"size": 10}, ticks="outside",
                                    ticklen=3)
        layout[f"yaxis{k}"] = _axis(anchor=xa, domain=domain, showgrid=False,
                                    type="category", fixedrange=True)
        common = {"xaxis": xa, "yaxis": ya, "hoverinfo": "text"}
        data.append({**common, "type": "scatter", "x": _round([p.sim_low, p.sim_high], 6),
                     "y": [p.param, p.param], "mode": "lines", "name": "sim range",
                     "line": {"color": "#cbd5e1", "width": 10},
                     "hovertext": f"sim range {fmt_range(p.sim_low, p.sim_high)}"})
        data.append({**common, "type": "scatter", "x": _round([p.sim_nominal], 6),
                     "y": [p.param],
                     "mode": "markers", "name": "nominal",
                     "marker": {"symbol": "line-ns", "size": 14,
                                "line": {"width": 2, "color": "#475569"}},
                     "hovertext": f"nominal {fmt_value(p.sim_nominal, p.sim_low, p.sim_high)}"})
        data.append({**common, "type": "scatter", "x": _round([p.estimate], 6),
                     "y": [p.param],
                     "mode": "markers", "name": "estimate",
                     "error_x": {"type": "data", "array": _round([err]), "color": color,
                                 "thickness": 2, "width": 4},
                     "marker": {"size": 11, "color": color,
                                "line": {"width": 2.5 if outside else 1.5,
                                         "color": OUTSIDE_RING if outside else "white"}},
                     "hovertext": _param_hover(p, err, outside)})
    return _figure(data, layout)


def rate_intervals(trend: ClusterTrend, color: str) -> Figure:
    """Failure rate per deployment (percent of real episodes) with exact 95% intervals."""
    rows = trend.per_deployment
    bounds = [poisson_rate_interval(r.failures, r.episodes) for r in rows]
    y = [100 * r.rate for r in rows]
    trace = {
        "type": "scatter",
        "x": [r.deployment for r in rows],
        "y": _round(y),
        "mode": "lines+markers",
        "line": {"color": color, "width": 2},
        "marker": {"size": 8, "color": color},
        "error_y": _interval_bars(bounds, y, _fade(color, 0.6)),
        "hovertext": [
            f"{r.deployment}: {100 * r.rate:.2f}% ({r.failures} of {r.episodes} episodes)"
            f"<br>95% interval {100 * lo:.2f}–{100 * hi:.2f}%"
            for r, (lo, hi) in zip(rows, bounds, strict=True)
        ],
        "hoverinfo": "text",
    }
    layout = _layout(260, xaxis=_axis(type="category"),
                     yaxis=_axis(title={"text": "failures per 100 episodes"},
                                 rangemode="tozero"))
    return _figure([trace], layout)


def signature_heatmap(
    z: np.ndarray, channels: Sequence[str], events: Sequence[str], anchors: Sequence[str]
) -> Figure:
    """The drift signature: ``z`` of layout ``(n_channels, n_events)``, red = real above sim.

    The columns are the events (hover names them); ``layout.meta`` holds each column's
    anchor, which a click opens.
    """
    trace = {
        "type": "heatmap",
        "z": [_round(row, 3) for row in np.asarray(z, dtype=float)],
        "x": list(events),
        "y": list(channels),
        "colorscale": "RdBu",
        "reversescale": True,
        "zmid": 0,
        "zmin": -4,
        "zmax": 4,
        "colorbar": {"title": {"text": "effect (σ)"}, "thickness": 10, "len": 0.9},
        "hovertemplate": "%{x}<br>%{y}: %{z:.2f}σ<extra></extra>",
    }
    layout = _layout(
        max(220, 60 + 16 * len(channels)), margin={"l": 8, "r": 8, "t": 8, "b": 30},
        meta=list(anchors),
        xaxis=_axis(title={"text": f"{len(events)} events (click one to open it)"},
                    showticklabels=False, type="category"),
        yaxis=_axis(autorange="reversed", showgrid=False),
    )
    return _figure([trace], layout)


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
) -> Figure:
    """All failures on the signature embedding; one trace per group.

    Args:
        groups: ``(label, (colour, symbol), x, y, episode_ids, anchors)`` per cluster,
            unassigned last.
    """
    data = [
        {
            "type": "scatter",
            "x": _round(x, 3),
            "y": _round(y, 3),
            "mode": "markers",
            "name": label,
            "marker": {"color": color, "symbol": symbol, "size": 7, "opacity": 0.85,
                       "line": {"width": 0.5, "color": "white"}},
            "text": list(ids),
            "customdata": list(anchors),
            "hovertemplate": f"{label}<br>%{{text}}<extra></extra>",
        }
        for label, (color, symbol), x, y, ids, anchors in groups
    ]
    layout = _layout(420, showlegend=True, legend={"orientation": "v", "x": 1.01, "y": 1},
                     margin={"l": 8, "r": 8, "t": 8, "b": 8}, xaxis={"visible": False},
                     yaxis={"visible": False, "scaleanchor": "x"})
    return _figure(data, layout)


def breakdown_bars(
    values: Sequence[str], in_cluster: Sequence[float], overall: Sequence[float], color: str
) -> Figure:
    """Share of the cluster's failures per value, beside that value's share of all failures."""
    y = list(values)[::-1]
    # horizontal groups stack their first trace lowest: the reference comes first
    data = [
        {"type": "bar", "y": y, "x": _round([100 * v for v in overall][::-1], 3),
         "orientation": "h", "name": "all failures", "marker": {"color": "#cbd5e1"},
         "hovertemplate": "%{y}: %{x:.0f}% of all failures<extra></extra>"},
        {"type": "bar", "y": y, "x": _round([100 * v for v in in_cluster][::-1], 3),
         "orientation": "h", "name": "this cluster", "marker": {"color": color},
         "hovertemplate": "%{y}: %{x:.0f}% of this cluster<extra></extra>"},
    ]
    layout = _layout(
        60 + 26 * len(values), barmode="group", showlegend=True,
        legend={"orientation": "h", "y": -0.25, "x": 0, "traceorder": "reversed"},
        margin={"l": 8, "r": 8, "t": 8, "b": 40},
        xaxis=_axis(ticksuffix="%", rangemode="tozero"),
    )
    return _figure(data, layout)


def trace_overlay(
    channels: Sequence[str],
    series: Mapping[str, Sequence[tuple[str, str, np.ndarray, np.ndarray]]],
    color: str,
    units: Mapping[str, str] | None = None,
) -> Figure:
    """The real trajectory over its nearest sim rollouts, one row per channel.

    Args:
        channels: the channels to draw, top to bottom.
        series: per channel, ``(episode_id, role, t, value)`` for each trajectory; ``t`` is
            seconds relative to the failure, so the failure sits at ``t = 0``.
        units: channel -> unit (``channels.csv``), shown on each row's axis.
    """
    units = units or {}
    n = len(channels)
    height = 90 + 130 * n
    top, bottom, gap = 36, 36, 28
    row = (height - top - bottom - gap * (n - 1)) / n
    layout = _layout(height, showlegend=True,
                     legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1,
                             "yanchor": "bottom"},
                     margin={"l": 56, "r": 16, "t": top, "b": bottom})
    data: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    shown = {"real": False, "sim": False}
    for i, channel in enumerate(channels):
        k = "" if i == 0 else str(i + 1)
        y_top = 1 - (top + i * (row + gap)) / height
        y_low = y_top - row / height
        unit = units.get(channel, "")
        layout[f"xaxis{k}"] = _axis(anchor=f"y{k}", showticklabels=i == n - 1,
                                    **({} if i == 0 else {"matches": "x"}),
                                    **({"title": {"text": "seconds before failure"}}
                                       if i == n - 1 else {}))
        layout[f"yaxis{k}"] = _axis(anchor=f"x{k}", domain=[y_low, y_top],
                                    title={"text": unit or "no unit", "font": {"size": 11}})
        annotations.append({"text": f"{channel} [{unit}]" if unit else channel,
                            "x": 0, "xref": "paper", "xanchor": "left", "y": y_top,
                            "yref": "paper", "yanchor": "bottom", "showarrow": False,
                            "font": {"size": 12}})
        # sim first, so the real line is drawn on top
        for episode, role, t, v in sorted(series.get(channel, []), key=lambda s: s[1] == "real"):
            real = role == "real"
            td, vd = decimate(np.asarray(t, float), np.asarray(v, float))
            suffix = f" {unit}" if unit else ""
            data.append({
                "type": "scatter", **_times(td), "y": _round(vd, 4),
                "xaxis": f"x{k}", "yaxis": f"y{k}", "mode": "lines",
                "name": "real failure" if real else "nearest sim", "legendgroup": role,
                "showlegend": not shown[role],
                "line": {"color": color if real else _MUTED, "width": 2.4 if real else 1.2},
                "opacity": 1.0 if real else 0.7,
                "hovertemplate": f"{episode}<br>t=%{{x:.2f}} s<br>%{{y:.4g}}{suffix}"
                                 "<extra></extra>",
            })
            shown[role] = True
    layout["shapes"] = [{"type": "line", "x0": 0, "x1": 0, "xref": "x", "y0": 0, "y1": 1,
                         "yref": "paper", "line": {"color": "#dc2626", "dash": "dash",
                                                   "width": 1.5}}]
    annotations.append({"text": "failure", "x": 0, "xref": "x", "y": 1, "yref": "paper",
                        "xanchor": "right", "yanchor": "bottom", "showarrow": False,
                        "font": {"color": "#dc2626", "size": 12}})
    layout["annotations"] = annotations
    return _figure(data, layout)


def validation_rates(clusters: Sequence[ValidationCluster]) -> Figure:
    """Baseline and candidate rate per cluster, each with an exact 95% interval.

    Baseline: grey circles; candidate: diamonds coloured by the cluster's verdict (the page
    prints that key beside the figure). The two sit a little apart on each cluster's row
    so their intervals never overlap.
    """
    rows = list(clusters)
    n = len(rows)
    data = []
    for label, offset, color in (("baseline", 0.17, "#94a3b8"), ("candidate", -0.17, None)):
        summaries = [c.baseline if label == "baseline" else c.candidate for c in rows]
        bounds = [poisson_rate_interval(s.failures, s.episodes) for s in summaries]
        x = [100 * s.rate for s in summaries]
        data.append({
            "type": "scatter",
            "x": _round(x),
            "y": [n - 1 - i + offset for i in range(n)],
            "mode": "markers",
            "name": label,
            "cliponaxis": False,  # a rate of 0 sits on the axis: draw its marker whole
            "marker": {"size": 11, "symbol": "circle" if color else "diamond",
                       "color": [color or VERDICT_COLORS[c.verdict] for c in rows]},
            "error_x": _interval_bars(bounds, x, color or "#475569"),
            "hovertext": [
                f"{c.cluster_id} {label}: {100 * s.rate:.2f}% ({s.failures}/{s.episodes})"
                f"<br>95% interval {100 * lo:.2f}–{100 * hi:.2f}%"
                for c, s, (lo, hi) in zip(rows, summaries, bounds, strict=True)
            ],
            "hoverinfo": "text",
        })
    layout = _layout(
        60 + 52 * n, showlegend=False, margin={"l": 8, "r": 16, "t": 8, "b": 44},
        xaxis=_axis(title={"text": "failures per 100 episodes"}, rangemode="tozero"),
        yaxis=_axis(tickvals=list(range(n)), ticktext=[c.cluster_id for c in rows][::-1],
                    range=[-0.6, n - 0.4], showgrid=False),
    )
    return _figure(data, layout)


def _spread(p: SimParam) -> float:
    width = p.sim_high - p.sim_low
    return width if width > 0 else 1.0


def _uncertainty(p: SimParam) -> float:
    """The estimate's standard error (an extension field); 0 when not given."""
    value = getattr(p, "uncertainty", None)
    if value is None:
        value = (p.model_extra or {}).get("uncertainty")
    return float(value) if isinstance(value, int | float) and np.isfinite(value) else 0.0


def _param_hover(p: SimParam, err: float, outside: bool) -> str:
    estimate = f"estimate {fmt_value(p.estimate, p.estimate - err, p.estimate + err)}"
    if err:
        estimate += f" ± {err:.2g}"
    where = "outside the sim range" if outside else "inside the sim range"
    return (f"{p.param}<br>{estimate} ({where} {fmt_range(p.sim_low, p.sim_high)})"
            f"<br>shift {p.shift:+.2f} ranges from nominal")


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
        "array": _round([100 * hi - v for (_, hi), v in zip(bounds, values, strict=True)]),
        "arrayminus": _round([v - 100 * lo for (lo, _), v in zip(bounds, values, strict=True)]),
    }

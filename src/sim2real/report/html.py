"""The one HTML renderer: the static report file, the notebook view and the dashboard pages.

A page is one document holding every view as a ``.page`` section (overview, one per
cluster, unassigned failures); a small inline script shows one at a time from the URL
fragment (``#cluster-C3``, ``#event-...``) and draws each Plotly figure only when it
scrolls into view, so a big report opens fast. Figures travel as JSON script blocks.
plotly.js is the partial "cartesian" bundle plotly publishes (every trace type the pages
draw), inlined once, gzipped and base64-encoded, and unpacked by the browser's own
``DecompressionStream`` (for the dashboard, loaded from its own URL): a report stays one
offline file at a third of the bundle's size.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from typing import TYPE_CHECKING, Any

import jinja2
import numpy as np

from sim2real._format import fmt_p
from sim2real._version import __version__
from sim2real.report import _views
from sim2real.report._words import NOT_ADDITIVE, p_is, validation_sentence
from sim2real.report.figures import VERDICT_COLORS, Figure, validation_rates

if TYPE_CHECKING:
    from sim2real.report.snapshot import Report, Validation

__all__ = [
    "FigureSet",
    "plotly_js",
    "render_report",
    "render_report_fragment",
    "render_runs",
    "render_validation",
    "render_validation_fragment",
]


@dataclass
class FigureSet:
    """The figures of one rendered page, each under a short id the template refers to."""

    items: list[tuple[str, str]] = field(default_factory=list)

    def add(self, fig: Figure | None) -> str | None:
        """Register ``fig`` and return its id (``None`` passes through: nothing to draw)."""
        if fig is None:
            return None
        fid = f"f{len(self.items)}"
        text = json.dumps(fig, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                          default=_plain)
        # "<" escaped so no figure text can close the script block that carries it
        self.items.append((fid, text.replace("<", "\\u003c")))
        return fid


def _plain(value: Any) -> Any:
    """NumPy scalars and arrays as JSON values (figures are built from report arrays)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    msg = f"a figure holds a {type(value).__name__}, which JSON cannot carry"
    raise TypeError(msg)


@cache
def _plotly_gz() -> bytes:
    """The gzipped plotly.js bundle shipped with sim2real (``tools/update_plotly.sh``)."""
    return files("sim2real.report").joinpath("static/plotly-cartesian.min.js.gz").read_bytes()


@cache
def plotly_js() -> str:
    """The plotly.js bundle as JavaScript text (the dashboard serves it at its own URL)."""
    return gzip.decompress(_plotly_gz()).decode()


@cache
def _plotly_inline() -> str:
    return base64.b64encode(_plotly_gz()).decode("ascii")


def _num(value: object, digits: int = 3) -> str:
    """A number to ``digits`` significant digits; anything else as text."""
    if value is None:
        return "–"
    if isinstance(value, int | float):
        return f"{value:.{digits}g}"
    return str(value)


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("sim2real.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["pct"] = lambda v, d=1: "–" if v is None else f"{100 * v:.{d}f}%"
    env.filters["signed"] = lambda v, d=2: f"{v:+.{d}f}".replace("-", "−")
    env.filters["num"] = _num
    env.filters["p"] = fmt_p
    env.filters["p_is"] = p_is
    env.globals["not_additive"] = NOT_ADDITIVE
    return env


def _root_id(payload: str, *, standalone: bool) -> str:
    """The page root's element id.

    A file's is derived from its content, so the same report renders to the same bytes; a
    notebook may show the same report twice, so each fragment gets an id of its own.
    """
    if not standalone:
        return f"s2r-{uuid.uuid4().hex[:12]}"
    return "s2r-" + hashlib.sha1(payload.encode()).hexdigest()[:10]


def _render(
    body: str,
    context: dict[str, object],
    *,
    title: str,
    standalone: bool,
    plotly_src: str | None,
    nav: Sequence[tuple[str, str]],
) -> str:
    figures: FigureSet = context["figures"]  # type: ignore[assignment]
    page = "page.html.j2" if standalone else "fragment.html.j2"
    return (
        _env()
        .get_template(page)
        .render(
            body=body,
            title=title,
            root_id=context["root_id"],
            standalone=standalone,
            figures=figures.items,
            plotly_inline=_plotly_inline() if plotly_src is None else None,
            plotly_src=plotly_src,
            nav=list(nav),
            tool_version=__version__,
            **{k: v for k, v in context.items() if k not in {"figures", "root_id"}},
        )
    )


def _report(
    report: Report, *, standalone: bool, plotly_src: str | None, nav: Sequence[tuple[str, str]]
) -> str:
    figures = FigureSet()
    view = _views.report_view(report, figures)
    context: dict[str, object] = {
        "figures": figures,
        "root_id": _root_id(report.model.model_dump_json(), standalone=standalone),
        "v": view,
    }
    body = (
        _env().get_template("report.html.j2").render(v=view, nav=list(nav), standalone=standalone)
    )
    return _render(
        body,
        context,
        title="sim2real failure report",
        standalone=standalone,
        plotly_src=plotly_src,
        nav=nav,
    )


def render_report(
    report: Report, *, plotly_src: str | None = None, nav: Sequence[tuple[str, str]] = ()
) -> str:
    """The report as one self-contained HTML document.

    Args:
        report: the snapshot to show.
        plotly_src: a URL to load plotly.js from instead of inlining it (the dashboard).
        nav: extra ``(label, href)`` links for the top bar (the dashboard's run list).
    """
    return _report(report, standalone=True, plotly_src=plotly_src, nav=nav)


def render_report_fragment(report: Report) -> str:
    """The same content as :func:`render_report` without the document wrapper (notebooks)."""
    return _report(report, standalone=False, plotly_src=None, nav=())


def _validation(
    validation: Validation,
    *,
    standalone: bool,
    plotly_src: str | None,
    nav: Sequence[tuple[str, str]],
) -> str:
    model = validation.model
    figures = FigureSet()
    view = {
        "model": model,
        "sentence": validation_sentence(model),
        "fig": figures.add(validation_rates(model.clusters) if model.clusters else None),
        "verdict_colors": VERDICT_COLORS,
        "labels": _views.TAXONOMY_LABELS,
        "colors": _views.TAXONOMY_COLORS,
        "targets": list(getattr(model, "targets", [])),
        "taxonomy_of": {c.cluster_id: c.taxonomy for c in model.clusters},
    }
    context: dict[str, object] = {
        "figures": figures,
        "root_id": _root_id(model.model_dump_json(), standalone=standalone),
    }
    body = (
        _env()
        .get_template("validation.html.j2")
        .render(v=view, nav=list(nav), standalone=standalone)
    )
    return _render(
        body,
        context,
        title="sim2real validation",
        standalone=standalone,
        plotly_src=plotly_src,
        nav=nav,
    )


def render_validation(
    validation: Validation, *, plotly_src: str | None = None, nav: Sequence[tuple[str, str]] = ()
) -> str:
    """The validation page as one self-contained HTML document (arguments as for reports)."""
    return _validation(validation, standalone=True, plotly_src=plotly_src, nav=nav)


def render_validation_fragment(validation: Validation) -> str:
    """The validation page without the document wrapper (notebooks)."""
    return _validation(validation, standalone=False, plotly_src=None, nav=())


def render_runs(
    rows: Sequence[Mapping[str, object]], *, root: str, api_href: str, plotly_src: str
) -> str:
    """The dashboard's list of runs, in the same page frame as the reports.

    Args:
        rows: per run ``name`` (its folder), ``title`` (what it is), ``report_href``,
            ``validation_href``, ``failures``, ``clusters``, ``deployments``, ``fastest``,
            ``verdicts`` (``(cluster_id, verdict)`` pairs), ``updated`` and ``error``.
        root: the served folder, as shown to the user.
        api_href: the link to the API description.
        plotly_src: the URL of plotly.js (no figure here; it keeps the frame identical).
    """
    body = _env().get_template("runs.html.j2").render(rows=rows, root=root, api_href=api_href)
    context: dict[str, object] = {"figures": FigureSet(), "root_id": "s2r-runs"}
    return _render(
        body, context, title="sim2real dashboard", standalone=True, plotly_src=plotly_src, nav=()
    )

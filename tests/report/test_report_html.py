"""The HTML renderer: self-contained, complete, deterministic, and sane on thin reports."""

from __future__ import annotations

import re
from collections.abc import Callable
from html.parser import HTMLParser

import numpy as np
import pyarrow as pa
import pytest

from sim2real._format import fmt_p, fmt_range
from sim2real.report import Report, ReportModel, Validation
from sim2real.report._words import summary_sentences, validation_sentence
from sim2real.report.figures import poisson_rate_interval, trace_overlay
from sim2real.report.html import render_report, render_report_fragment


class _Refs(HTMLParser):
    """Every URL a tag would fetch (script/link/img/iframe src or href)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if tag in {"script", "link", "img", "iframe", "source"} and key in {"src", "href"}:
                self.urls.append(value or "")


def _fetched(html: str) -> list[str]:
    refs = _Refs()
    refs.feed(html)
    return [u for u in refs.urls if not u.startswith("data:")]


def test_report_is_self_contained_and_complete(report: Report) -> None:
    html = report.to_html()
    assert html.startswith("<!doctype html>")
    assert _fetched(html) == []  # plotly.js and every figure are inline
    assert html.count("<script type=\"application/octet-stream\" data-plotly-gz>") == 1
    for c in report.model.clusters:
        assert f'data-anchor="cluster-{c.cluster_id}"' in html
        assert c.explanation.replace("'", "&#39;") in html
    for e in report.model.events:
        assert e.episode_id in html
    assert 'data-anchor="unassigned"' in html
    assert "Why this number" in html


def test_same_report_same_bytes(report: Report) -> None:
    assert render_report(report) == render_report(report)


def test_dashboard_variant_loads_plotly_from_its_url(report: Report) -> None:
    html = render_report(report, plotly_src="/static/plotly.js", nav=[("All runs", "/")])
    assert _fetched(html) == ["/static/plotly.js"]
    assert 'href="/"' in html


def test_fragment_for_notebooks(report: Report, validation: Validation) -> None:
    fragment = report._repr_html_()
    assert "<html" not in fragment and "<body" not in fragment
    assert fragment.count("data-plotly-gz>") == 1
    assert "window.__s2rPlotly" in fragment  # several outputs unpack plotly.js once
    assert 'data-anchor="cluster-C3"' in fragment
    assert render_report_fragment(report) != fragment  # each output has its own root id
    assert "shrank" in validation._repr_html_()


def test_validation_page(validation: Validation) -> None:
    html = validation.to_html()
    assert _fetched(html) == []
    for c in validation.model.clusters:
        assert c.cluster_id in html and c.verdict in html
    assert validation_sentence(validation.model) == (
        "In w07 against w05, w06: C1 shrank, C3 grew, C5 is new."
    )
    assert "No target cluster was named" in html
    targeted = Validation(validation.model.model_copy(update={"targets": ["C1"]}))
    assert validation_sentence(targeted.model) == (
        "In w07 against w05, w06: targeted C1 shrank; elsewhere C3 grew, C5 is new."
    )
    page = targeted.to_html()
    assert "The fix shipped between w06 and w07" in page
    assert "It targeted <b>C1</b>" in page


def test_summary_names_what_changed_grows_and_helps(report: Report) -> None:
    (k1, changed), (k2, growing), (k3, do) = summary_sentences(report.model)
    assert (k1, k2, k3) == ("Changed", "Growing", "Do next")
    assert "In w08" in changed and "new cluster: C5" in changed
    assert growing.startswith("C3 (perception drift")
    assert "expected to remove 65% of C3's failures" in do


def _thin(report: Report, **changes: object) -> Report:
    data = report.model.model_dump(mode="json")
    data.update(changes)
    return Report(
        model=ReportModel.model_validate(data), signatures=pa.table({}), traces=pa.table({})
    )


def test_empty_report_renders_its_empty_states(report: Report) -> None:
    thin = _thin(report, clusters=[], events=[], fastest_growing=None, warnings=[])
    html = thin.to_html()
    assert "No failure clusters" in html and "No signature embedding" in html
    assert "Nothing to do" in html


def test_cluster_without_params_actions_or_tables(report: Report) -> None:
    data = report.model.model_dump(mode="json")
    clusters = [{**c, "sim_params": [], "actions": []} for c in data["clusters"]]
    html = _thin(report, clusters=clusters).to_html()
    assert "Simulation parameters: not computed" in html
    assert "Actions: not computed" in html
    assert "No trajectories were saved" in html
    assert 'data-anchor="cluster-C3"' in html  # the heat map falls back to top channels


@pytest.mark.parametrize("deployments", [1, 2])
def test_few_deployments(deployments: int, make_report: Callable[..., Report]) -> None:
    html = make_report(seed=3, deployments=deployments).to_html()
    if deployments == 1:
        assert "Only one deployment so far" in html


def test_garwood_interval() -> None:
    low, high = poisson_rate_interval(0, 1)
    assert low == 0 and high == pytest.approx(3.689, abs=1e-3)
    low, high = poisson_rate_interval(10, 100)
    assert low == pytest.approx(0.04795, abs=1e-4) and high == pytest.approx(0.18390, abs=1e-4)
    assert poisson_rate_interval(3, 0) == (0.0, 0.0)


def test_numbers_read_as_people_read_them() -> None:
    assert fmt_p(0.0) == "< 0.001" and fmt_p(0.0004) == "< 0.001" and fmt_p(0.0312) == "0.031"
    assert fmt_range(0.3111, 1.4) == "[0.3, 1.4]"  # a range 1.09 wide: one decimal
    assert fmt_range(0.0021, 0.0095) == "[0.0021, 0.0095]"
    assert fmt_range(120.4, 980.2) == "[120, 980]"
    assert fmt_range(0.31, 1.41, outward=True) == "[0.3, 1.5]"  # still holds the range


def test_page_never_says_p_equals_zero(report: Report) -> None:
    data = report.model.model_dump(mode="json")
    for c in data["clusters"]:
        c["trend"]["p_value"] = 0.0
    html = _thin(report, clusters=data["clusters"]).to_html()
    assert not re.search(r"p = 0(?![.\d])", html) and "p &lt; 0.001" in html
    assert ") · tasks:" in html or "deployments" not in html  # a space before each part


def test_resolved_cluster_shows_no_action(report: Report) -> None:
    data = report.model.model_dump(mode="json")
    c = data["clusters"][0]
    per = c["trend"]["per_deployment"]
    for row in per[-2:]:
        row["failures"], row["rate"] = 0, 0.0
    c["lifecycle"] = "resolved"
    html = _thin(report, clusters=[c]).to_html()
    card = html.split('data-anchor="card-' + c["cluster_id"] + '"')[1].split("</article>")[0]
    assert f"Resolved: no failures since {per[-2]['deployment']}" in card
    assert "Why this number" not in card


def test_expected_notes_are_no_warnings(report: Report) -> None:
    data = report.model.model_dump(mode="json")
    data["dataset"]["reference_channels"] = ["loop_latency_ms"]
    html = _thin(report, dataset=data["dataset"], warnings=[]).to_html()
    assert "compared with real successes" in html and 'class="warnings"' not in html


def test_a_trajectory_on_a_time_grid_carries_its_start_and_step_not_every_time() -> None:
    t = np.round(np.linspace(-3.58, 0.0, 90), 3)  # a grid, stored rounded to the millisecond
    v = np.sin(t)
    grid = trace_overlay(["force"], {"force": [("e1", "real", t, v)]}, "#000")["data"][0]
    assert "x" not in grid and grid["x0"] == -3.58 and abs(grid["dx"] - 3.58 / 89) < 1e-6
    jittered = t.copy()
    jittered[40] += 0.3 * (t[1] - t[0])  # a sample a third of a step off: drawn where it is
    assert "x" in trace_overlay(["force"], {"force": [("e1", "real", jittered, v)]},
                                "#000")["data"][0]

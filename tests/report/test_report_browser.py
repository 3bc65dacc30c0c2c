"""The report and validation files in headless Chromium: offline, light, fast, and honest.

Uses Debian's ``/usr/bin/chromium`` through Playwright (never a downloaded browser); skips
with the reason when either is missing. Each check here failed on the pages before their
fix (issue: a newcomer's first hour; report weight).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sim2real.report import Report, Validation
from sim2real.report.html import plotly_js

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("SIM2REAL_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
UNITS = {"cam.brightness": "lux", "det.confidence": "1", "gripper.force": "N", "pose_error": "mm"}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed: pip install 'sim2real[browser]'"
    )
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        pytest.skip(f"no Chromium at {CHROMIUM}: run `make browser-deps` "
                    "(apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def files(report: Report, validation: Validation,
          tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fixture report with one estimate far outside its range that the model does not
    flag (the strip must still ring it), units on its channels; and the validation page."""
    data = report.model.model_dump(mode="json")
    data["dataset"]["units"] = UNITS
    param = data["clusters"][0]["sim_params"][0]
    param["estimate"] = param["sim_high"] + 3 * (param["sim_high"] - param["sim_low"])
    param["outside_range"] = False
    model = type(report.model).model_validate(data)
    root = tmp_path_factory.mktemp("pages")
    Report(model, report.signatures, report.traces).save(root / "report")
    targeted = validation.model.model_copy(update={"targets": ["C1"]})
    Validation(targeted).save(root / "validation")
    return {"report": root / "report" / "report.html",
            "validation": root / "validation" / "validation.html"}


def _open(browser: Any, path: Path, anchor: str = "") -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    # offline: anything but the file itself is refused
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort())
    page.goto(path.as_uri() + (f"#{anchor}" if anchor else ""))
    page.wait_for_selector(".page:not([hidden]) .plot[data-ready]", timeout=15000)
    return page, errors


def _load(browser: Any, path: Path, ready: str) -> tuple[float, float]:
    """(main-thread CPU s, wall s from navigation start) for one fresh page to reach
    ``ready``: a JS expression true once its first figure is drawn, whose value is the
    wall time in ms."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    page.goto(path.as_uri())
    wall = page.wait_for_function(ready, timeout=15000).json_value() / 1000
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    page.close()
    return metrics["ThreadTime"], wall


@pytest.fixture(scope="module")
def plotly_alone(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[float, float]:
    """Best of five (CPU s, wall s) for the same plotly.js bundle to draw one point on a
    blank page in the same browser: what loading any plotly page costs on this machine."""
    page = tmp_path_factory.mktemp("baseline") / "plotly.html"
    page.write_text(
        "<!doctype html><div id=p style='width:600px;height:400px'></div>"
        f"<script>{plotly_js()}</script><script>"
        "Plotly.newPlot('p', [{x: [1], y: [1]}], {}, {displayModeBar: false})"
        ".then(() => { window.drawn = performance.now(); });</script>")
    loads = [_load(browser, page, "window.drawn") for _ in range(5)]
    return min(c for c, _ in loads), min(w for _, w in loads)


def test_report_is_one_light_offline_file_that_loads_fast(
        browser: Any, files: dict[str, Path], plotly_alone: tuple[float, float]) -> None:
    assert files["report"].stat().st_size <= 2_000_000
    assert files["validation"].stat().st_size <= 1_000_000
    # Load = navigation start to the first screen of figures drawn (plotly.js unpacked,
    # compiled, run): under 1 s of the renderer's main-thread CPU, best of five fresh pages.
    # The report costs 1.2x to 1.6x what plotly.js alone drawing one point costs in the same
    # browser (measured 2026-12-06 on a slow shared VM: CPU 0.97 s against 0.77 s, wall
    # 1.06 s against 0.67 s). Where that baseline is over half a second, the bar is twice
    # it instead: the test still catches a report that got heavier, not a slower machine.
    # Wall time the same, unless other processes oversubscribe the cores, where it
    # measures them, not the page.
    loads = [_load(browser, files["report"], "(performance.getEntriesByName("
                   "'s2r-first-figure')[0] || {}).startTime") for _ in range(5)]
    cpus, walls = [c for c, _ in loads], [w for _, w in loads]
    base_cpu, base_wall = plotly_alone
    assert min(cpus) < max(1.0, 2.0 * base_cpu), (cpus, walls, plotly_alone)
    if os.getloadavg()[0] < (os.cpu_count() or 1):
        assert min(walls) < max(1.0, 2.0 * base_wall), (walls, cpus, plotly_alone)
    page, errors = _open(browser, files["report"])
    assert errors == []
    assert page.locator(".modebar").count() == 0  # no toolbar over legends and markers
    page.close()


def test_param_strips_agree_with_their_legend(browser: Any, files: dict[str, Path]) -> None:
    page, errors = _open(browser, files["report"], "cluster-C3")
    page.wait_for_timeout(200)
    rows = page.evaluate("""() => {
      const out = [];
      document.querySelectorAll('.page:not([hidden]) .plot[data-ready]').forEach(gd => {
        const data = gd.data || [];
        data.forEach((t, i) => {
          if (t.name !== 'estimate') return;
          const range = data[i - 2].x;  // the row's sim range, drawn first
          out.push({x: t.x[0], low: range[0], high: range[1], ring: t.marker.line.color,
                    ticks: [...gd.querySelectorAll('.xtick text')].map(e => e.textContent)});
        });
      });
      return out;
    }""")
    assert rows, "no parameter strip drawn"
    assert any(not r["low"] <= r["x"] <= r["high"] for r in rows)
    for r in rows:
        outside = not r["low"] <= r["x"] <= r["high"]
        assert (r["ring"] == "#dc2626") == outside, r  # ringed exactly when outside
        assert any(t.strip().replace("−", "-").replace(".", "").lstrip("-").isdigit()
                   for t in r["ticks"]), r  # each strip has its own numbered axis
    assert errors == []
    page.close()


def test_trajectories_name_their_units(browser: Any, files: dict[str, Path]) -> None:
    page, _ = _open(browser, files["report"], "cluster-C3")
    page.locator(".trace .plot").first.scroll_into_view_if_needed()
    page.wait_for_selector(".trace .plot[data-ready]", timeout=15000)
    titles = page.evaluate("""() => [...document.querySelector('.trace .plot[data-ready]')
        .querySelectorAll('.g-ytitle text, .ytitle')].map(e => e.textContent)""")
    drawn = page.evaluate("""() => document.querySelector('.trace .plot[data-ready]')
        .data.map(t => t.yaxis)""")
    assert drawn and titles
    assert set(titles) <= {*UNITS.values(), "no unit"} and set(titles) & set(UNITS.values())
    page.close()


def test_event_details_open_whole_with_working_links(browser: Any,
                                                     files: dict[str, Path]) -> None:
    page, errors = _open(browser, files["report"], "cluster-C3")
    row = page.locator(".page:not([hidden]) details.event").first
    # A click event, not a positioned press: under load a press lands while figures drawn
    # as they scroll in still move the page (as in tests/serve/test_serve_browser.py).
    row.locator("summary").dispatch_event("click")
    body = row.locator(".ev-body")
    # The details fill on the toggle event, which the browser fires after the click returns.
    body.locator("dt").first.wait_for(timeout=5000)
    assert body.locator("dt").count() >= 3 and "family scores" in body.inner_text().lower()
    tops = row.locator(".tops")
    assert tops.locator("code").count() == 3
    assert tops.evaluate("e => e.scrollWidth <= e.clientWidth + 1")  # nothing cut off
    sims = body.locator("dd").filter(has=page.locator("code")).last
    link = sims.locator("a")
    if link.count():  # the sims are drawn in the event's trajectory: the link opens it
        link.click()
        assert page.locator(".is-target").first.get_attribute("data-anchor", timeout=5000)
    else:
        assert "not drawn" in sims.inner_text()
    assert errors == []
    page.close()


def test_validation_page_names_the_fix_and_explains_its_marks(browser: Any,
                                                              files: dict[str, Path]) -> None:
    page, errors = _open(browser, files["validation"])
    text = page.inner_text("body")
    assert "The fix shipped between w06 and w07" in text and "It targeted C1" in text
    assert "baseline rate" in text and "candidate rate, coloured by verdict" in text
    clipped = page.evaluate("() => document.querySelector('.plot[data-ready]')"
                            ".data.some(t => t.cliponaxis !== false)")
    assert not clipped  # a rate of 0 sits on the axis and is drawn whole
    verdict_words = page.locator(".verdict").all_inner_texts()
    sentence = page.inner_text(".summary")
    for c in ("C1",):
        row_word = verdict_words[[r.split()[0] for r in
                                  page.locator(".vtable tbody tr").all_inner_texts()].index(c)]
        assert row_word in sentence  # the headline speaks the table's word
    assert errors == []
    page.close()

"""Short terminal summaries of a report and a validation (rich tables).

Every number carries its unit, and cells hold words (the pages' labels, not snake_case
identifiers), so a narrow or piped terminal wraps them between words, never inside one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from sim2real.report._words import ACTION_LABELS, TAXONOMY_LABELS, p_is
from sim2real.report.model import RateSummary
from sim2real.report.snapshot import Report, Validation

__all__ = ["print_report", "print_validation"]


_CELL = 10  # a column wider than its longest word wraps its cells at about this width


def _table(title: str, columns: Sequence[tuple[str, str]], rows: list[list[str]]) -> Table:
    """A table whose columns are never narrower than their longest word, so cells wrap
    between words (``columns``: header and justification)."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  padding=(0, 1, 0, 0))
    for i, (header, justify) in enumerate(columns):
        cells = [row[i] for row in rows] + [header]
        word = max(len(w) for cell in cells for w in cell.split())
        table.add_column(header, justify=justify,  # type: ignore[arg-type]
                         width=max(word, min(max(map(len, cells)), _CELL)) + 1)  # + padding
    for row in rows:
        table.add_row(*row)
    return table


def _print(console: Console, table: Table) -> None:
    """Print ``table`` whole: on a terminal narrower than its longest words it runs past
    the edge rather than cut a word."""
    needed = Measurement.get(console, console.options, table).minimum
    console.print(table, width=max(console.width, needed), crop=False)


def print_report(report: Report, out: Path, console: Console | None = None) -> None:
    """One row per cluster, most urgent first, then where the HTML report is."""
    console = console or Console()
    model = report.model
    rows = []
    for c in model.clusters:
        marker = " *" if c.cluster_id == model.fastest_growing else ""
        action = ACTION_LABELS[c.actions[0].kind] if c.actions else "-"
        growth = f"×{math.exp(c.trend.growth):.2f} per deployment (p {p_is(c.trend.p_value)})"
        rows.append([c.cluster_id + marker, TAXONOMY_LABELS[c.taxonomy],
                     f"{c.confidence:.0%}", str(c.size), growth, action])
    columns = [("cluster", "left"), ("cause", "left"), ("conf.", "right"),
               ("failures", "right"), ("rate change", "left"), ("first action", "left")]
    legend = " (* fastest growing)" if model.fastest_growing is not None else ""
    title = (f"{_count(model.dataset.failures, 'real failure')}, "
             f"{_count(len(model.clusters), 'cluster')}{legend}")
    _print(console, _table(title, columns, rows))
    unassigned = sum(1 for e in model.events if e.cluster_id is None)
    if unassigned:
        fit = "fits" if unassigned == 1 else "fit"
        console.print(f"{_count(unassigned, 'failure')} {fit} no cluster (cluster_id null).")
    console.print(f"report: {(out / 'report.html').resolve()}")


def print_validation(validation: Validation, out: Path, console: Console | None = None) -> None:
    """One row per cluster: failures before and after, the rate ratio and the verdict."""
    console = console or Console()
    model = validation.model
    rows = []
    for c in model.clusters:
        ratio = "-" if c.rate_ratio is None else f"×{c.rate_ratio:.2f}"
        if c.ci_low is not None and c.ci_high is not None:
            ratio += f" ({c.ci_low:.2f} to {c.ci_high:.2f})"
        target = " *" if c.cluster_id in model.targets else ""
        rows.append([c.cluster_id + target, TAXONOMY_LABELS[c.taxonomy], _rate(c.baseline),
                     _rate(c.candidate), ratio, c.verdict])
    columns = [("cluster", "left"), ("cause", "left"), ("before", "left"), ("after", "left"),
               ("rate ratio (95% interval)", "left"), ("verdict", "left")]
    title = (f"validate {','.join(model.baseline)} -> {','.join(model.candidate)} "
             "(failures / real episodes)")
    _print(console, _table(title, columns, rows))
    if any(c.cluster_id in model.targets for c in model.clusters):
        console.print("* a target of the fix: asked whether it shrank (a one-sided test)")
    console.print(f"validation: {(out / 'validation.html').resolve()}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _rate(side: RateSummary) -> str:
    return f"{side.failures} / {side.episodes} ({side.rate:.1%})"

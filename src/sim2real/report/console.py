"""Short terminal summaries of a report and a validation (rich tables)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from sim2real.report.snapshot import Report, Validation

__all__ = ["print_report", "print_validation"]


def print_report(report: Report, out: Path, console: Console | None = None) -> None:
    """One row per cluster, most urgent first, then where the HTML report is."""
    console = console or Console()
    model = report.model
    table = Table(title=f"{model.dataset.failures} real failures, {len(model.clusters)} "
                        "clusters (* fastest growing)", title_justify="left")
    for column in ("cluster", "taxonomy", "conf.", "size", "growth", "first action"):
        table.add_column(column, overflow="fold")
    for c in model.clusters:
        marker = " *" if c.cluster_id == model.fastest_growing else ""
        action = c.actions[0].kind if c.actions else "-"
        table.add_row(c.cluster_id + marker, c.taxonomy, f"{c.confidence:.2f}", str(c.size),
                      f"{c.trend.growth:+.2f}", action)
    console.print(table)
    unassigned = sum(1 for e in model.events if e.cluster_id is None)
    if unassigned:
        console.print(f"{unassigned} failures fit no cluster (cluster_id null).")
    console.print(f"report: {(out / 'report.html').resolve()}")


def print_validation(validation: Validation, out: Path, console: Console | None = None) -> None:
    """One row per cluster: failures before and after, the rate ratio and the verdict."""
    console = console or Console()
    model = validation.model
    table = Table(title=f"validate {','.join(model.baseline)} -> {','.join(model.candidate)}",
                  title_justify="left")
    for column in ("cluster", "taxonomy", "before", "after", "rate ratio, 95% CI",
                   "verdict"):
        table.add_column(column, overflow="fold")
    for c in model.clusters:
        ratio = "-" if c.rate_ratio is None else f"{c.rate_ratio:.2f}"
        if c.ci_low is not None and c.ci_high is not None:
            ratio += f" ({c.ci_low:.2f}-{c.ci_high:.2f})"
        table.add_row(c.cluster_id, c.taxonomy, f"{c.baseline.failures}/{c.baseline.episodes}",
                      f"{c.candidate.failures}/{c.candidate.episodes}", ratio, c.verdict)
    console.print(table)
    console.print(f"validation: {(out / 'validation.html').resolve()}")

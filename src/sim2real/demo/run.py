"""What ``sim2real demo`` does after generating: analyze the fleet, validate the fix."""

from __future__ import annotations

from rich.console import Console

from sim2real._progress import Stages
from sim2real.api import analyze
from sim2real.demo.generate import DemoPaths
from sim2real.demo.scoring import load_answer_key, score_report
from sim2real.report.console import print_report, print_validation
from sim2real.validate import validate

__all__ = ["run_demo_analysis"]


def run_demo_analysis(paths: DemoPaths, quiet: bool) -> None:
    """Run ``analyze`` and ``validate`` on the generated demo and print what they found.

    The analysis reads only the dataset. The demo then plays the team that shipped a fix:
    the answer key says from which deployment the fixed cause is gone, which is exactly
    what a team knows about its own release; ``validate`` compares the deployments before
    it with those from it on. Finally the findings are scored against the answer key.

    Args:
        paths: the generated demo (dataset and answer key).
        quiet: no progress bars; print only the result paths.
    """
    console = Console()
    report_dir = paths.root / "report"
    report = analyze(paths.dataset, report_dir, progress=not quiet)
    key = load_answer_key(paths.answer_key)
    deployments = report.model.dataset.deployments
    fixed_in = next((str(c["fixed_in"]) for c in key["causes"]  # type: ignore[attr-defined]
                     if c.get("fixed_in")), deployments[-1])
    split = deployments.index(fixed_in) if fixed_in in deployments else len(deployments) - 1
    baseline, candidate = deployments[:split], deployments[split:]
    # The team followed the report: the fix targets the clusters it said to fix first in
    # the infrastructure.
    targets = [c.cluster_id for c in report.model.clusters
               if c.actions and c.actions[0].kind == "fix_infrastructure"]
    validation_dir = paths.root / "validation"
    validation = validate(paths.dataset, baseline, candidate, out=validation_dir,
                          stages=Stages(enabled=not quiet), previous=report.model,
                          targets=targets)
    if quiet:
        console.print(f"report: {(report_dir / 'report.html').resolve()}")
        console.print(f"validation: {(validation_dir / 'validation.html').resolve()}")
        return
    print_report(report, report_dir, console)
    print_validation(validation, validation_dir, console)
    card = score_report(report.model, key)
    console.print(f"against the answer key: {card.summary()}")

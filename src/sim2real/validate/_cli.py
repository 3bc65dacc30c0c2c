"""``sim2real validate``: did the fix shipped between two sets of deployments work?"""

from __future__ import annotations

from pathlib import Path

import click

from sim2real._progress import Stages
from sim2real.dataset._cli import DatasetArgument
from sim2real.engine._cli import engine_options
from sim2real.validate.compare import validate as run_validate

__all__ = ["validate"]


def _deployments(_ctx: click.Context, _param: click.Parameter, value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise click.BadParameter("give one or more deployment names, comma-separated")
    return names


@click.command("validate")
@click.argument("dataset", type=DatasetArgument())
@click.option("--baseline", required=True, callback=_deployments,
              help="Deployments before the fix, comma-separated (e.g. w05,w06).")
@click.option("--candidate", required=True, callback=_deployments,
              help="Deployments after the fix, comma-separated (e.g. w07).")
@click.option("-o", "--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for validation.json and validation.html.")
@click.option("--previous", type=click.Path(exists=True, path_type=Path),
              help="A report.json (or its folder) whose clusters are compared: each gets "
                   "a verdict under its ID (default: the baseline's own analysis).")
@click.option("--target", "targets", default="",
              callback=lambda _c, _p, v: [n.strip() for n in v.split(",") if n.strip()],
              help="Cluster IDs the fix was meant to shrink, comma-separated (e.g. C4; "
                   "those of --previous): named first in the verdict, and asked the fix's "
                   "own question, whether they shrank (a one-sided test).")
@click.option("--skip-bad-episodes", is_flag=True,
              help="Leave out real failures that cannot be compared (no samples, a "
                   "failure_time outside them), listed in the warnings, instead of stopping.")
@click.option("--scratch", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for temporary files (signals regrouped by episode where the "
                   "files are not sorted by it, large grids), removed after the run "
                   "[default: beside --out].")
@engine_options
@click.option("--quiet", is_flag=True, help="No progress display and no summary.")
def validate(dataset: str | Path, baseline: list[str], candidate: list[str], out: Path,
             previous: Path | None, targets: list[str], skip_bad_episodes: bool,
             scratch: Path | None, engine: str, address: str | None, quiet: bool) -> None:
    """Compare failure-cluster rates between BASELINE and CANDIDATE deployments.

    Clusters are learnt on the baseline deployments of DATASET; the candidate
    deployments' failures are assigned to them with the same yardstick, and failures
    that fit none and recur form new clusters. For each cluster the rate (failures per
    real episode, so exposure is accounted for) is compared: rate ratio candidate /
    baseline with an exact 95% interval, an exact conditional Poisson test, and a verdict
    (shrank, grew, unchanged, new, gone) after adjusting for the number of clusters. A
    cluster too small to tell gets "unchanged" and a note with the candidate exposure a
    power calculation says would be needed.

    \b
    Example:
      sim2real validate data/ --baseline w05,w06 --candidate w07 -o runs/fix-check \\
          --previous runs/w06/report.json
    """
    from sim2real.report.snapshot import read_previous

    stages = Stages(enabled=not quiet)
    known = read_previous(previous) if previous is not None else None
    result = run_validate(dataset, baseline, candidate, out=out, stages=stages,
                          previous=known, targets=targets,
                          skip_bad_episodes=skip_bad_episodes, scratch=scratch,
                          engine=engine, address=address)
    if not quiet:
        from sim2real.report.console import print_validation

        print_validation(result, out)

"""``sim2real calibrate`` and ``sim2real check``: close the loop in simulation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from sim2real._atomic import atomic_files
from sim2real.dataset._cli import DatasetArgument
from sim2real.sim._replay import OBJECTIVES
from sim2real.sim.adapter import parse_options
from sim2real.sim.calibrate import CalibrationConfig
from sim2real.sim.calibrate import calibrate as run_calibration
from sim2real.sim.check import CHECK_JSON
from sim2real.sim.check import check as run_check

__all__ = ["calibrate", "check"]

CALIBRATION_JSON = "calibration.json"

_ADAPTER_HELP = ("simulator adapter: an installed name (entry-point group sim2real.adapters; "
                 "'demo' ships) or module:Class")
_RUN_HELP = ("an analyze output folder to take the cluster's events from; without it the "
             "dataset is analysed first")


def _common(f: Any) -> Any:
    for option in reversed([
        click.argument("dataset", type=DatasetArgument()),
        click.option("--cluster", "cluster", help="cluster ID of the report, e.g. C3"),
        click.option("--episodes", help="comma-separated real episode IDs (instead of, or "
                     "within, the cluster)"),
        click.option("--run", type=click.Path(exists=True, file_okay=False, path_type=Path),
                     help=_RUN_HELP),
        click.option("--adapter", default="demo", show_default=True, help=_ADAPTER_HELP),
        click.option("--adapter-option", "adapter_options", multiple=True, metavar="KEY=VALUE",
                     help="a keyword argument for the adapter's constructor (repeat); the "
                     "value is read as JSON where it parses, else as a string"),
        click.option("--workers", type=int, help="rollout processes  [default: all cores]"),
        click.option("--seed", type=int, default=0, show_default=True),
        click.option("--quiet", is_flag=True, help="no progress bar; print only the result path"),
    ]):
        f = option(f)
    return f


def _ids(episodes: str | None) -> list[str] | None:
    return [e.strip() for e in episodes.split(",") if e.strip()] if episodes else None


def _write(out: Path, name: str, data: dict[str, Any]) -> Path:
    with atomic_files(out) as stage:
        (stage / name).write_text(json.dumps(data, indent=2) + "\n")
    return out / name


@click.command("calibrate")
@_common
@click.option("--param", "params", multiple=True,
              help="a parameter to fit (repeat); default: the cluster's most shifted sim_params")
@click.option("--budget", type=click.IntRange(min=1), default=120, show_default=True,
              help="candidate evaluations in all (each replays every episode on every "
              "seed); restarts, generations, population and the least-squares polish are "
              "derived and printed")
@click.option("--restarts", type=click.IntRange(min=1),
              help="independent fits; their spread is part of the uncertainty  "
              "[default: 2 where the budget allows, else 1]")
@click.option("--objective", type=click.Choice(OBJECTIVES), default="auto", show_default=True,
              help="how a replay is compared with its real episode: summary statistics per "
              "channel (timing ignored), the time-aligned trajectory per channel, or auto "
              "(trajectory for an adapter that replays commands open-loop)")
@click.option("--max-episodes", type=int, default=6, show_default=True,
              help="real episodes replayed")
@click.option("--seeds", type=int, default=2, show_default=True,
              help="replays per episode and candidate (1 for a deterministic adapter)")
@click.option("--widen", type=float, default=4.0, show_default=True,
              help="search this factor beyond the randomisation range")
@click.option("-o", "--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="folder to write calibration.json into")
def calibrate_command(dataset: str | Path, cluster: str | None, episodes: str | None,
                      run: Path | None, adapter: str, adapter_options: tuple[str, ...],
                      workers: int | None, seed: int, quiet: bool, params: tuple[str, ...],
                      budget: int, restarts: int | None, objective: str, max_episodes: int,
                      seeds: int, widen: float, out: Path) -> None:
    """Fit simulation parameters so that sim reproduces a cluster's real episodes.

    Replays each real episode's initial state (and its recorded commands, where the
    adapter replays open-loop) in sim, and minimises the gap between real and simulated
    telemetry with CMA-ES, searching beyond the randomisation range, within --budget
    candidate evaluations. Writes OUT/calibration.json: the fitted values with their
    uncertainty, the discrepancy before and after, the plan the budget paid for, and
    which parameters did not converge, cannot be pinned down by the data, or sit on the
    edge of the search box (with what to do about each).

    \b
    Example:
      sim2real calibrate sim2real-demo/dataset --run sim2real-demo/report --cluster C3 \\
          --budget 120 -o sim2real-demo/calibration
    """
    cfg = CalibrationConfig(budget=budget, restarts=restarts, max_episodes=max_episodes,
                            seeds=seeds, widen=widen, objective=objective, seed=seed)
    # Library errors reach the main group, which prints one line and sets the exit code.
    result = run_calibration(dataset, cluster=cluster, episodes=_ids(episodes), run=run,
                             params=list(params) or None, adapter=adapter,
                             adapter_options=parse_options(adapter_options), config=cfg,
                             workers=workers, progress=not quiet)
    path = _write(out, CALIBRATION_JSON, result.to_dict())
    if not quiet:
        how = result.plan
        polish = f" + {how['polish']} polishing" if how["polish"] else ""
        click.echo(f"plan: {how['restarts']} restart(s) x ({how['generations']} generations x "
                   f"{how['popsize']} candidates{polish}), {how['candidates']} candidate "
                   f"evaluations of --budget {how['budget']}, each "
                   f"{len(result.episodes)} episode(s) x {result.seeds} seed(s): "
                   f"{result.rollouts} rollouts "
                   f"({result.objective} objective)")
        click.echo(f"discrepancy {result.discrepancy_before:.3g} -> "
                   f"{result.discrepancy_after:.3g}")
        for p in result.params:
            flags = [f for f, on in (("not identifiable", not p.identifiable),
                                     ("not converged", p.converged is False),
                                     ("on the search box edge", p.at_edge)) if on]
            std = "(uncertainty not estimated)" if p.std is None else f"+/- {p.std:.2g}"
            click.echo(f"  param.{p.param} = {p.fitted:.4g} {std} "
                       f"(sim range {p.sim_low:g}..{p.sim_high:g})"
                       + (f"  [{', '.join(flags)}]" if flags else ""))
        for w in result.warnings:
            click.echo(f"warning: {w}", err=True)
    click.echo(str(path))


@click.command("check")
@_common
@click.option("--set", "updates", multiple=True, required=True, metavar="param.NAME=VALUE",
              help="the proposed sim update (repeat for several parameters)")
@click.option("--baseline", "baselines", multiple=True, metavar="param.NAME=VALUE",
              help="current values to compare against  [default: the nominal values]")
@click.option("--seeds", type=int, default=3, show_default=True,
              help="replays per episode and setting")
@click.option("--max-episodes", type=int, default=12, show_default=True,
              help="real episodes replayed")
@click.option("-o", "--out", type=click.Path(file_okay=False, path_type=Path),
              help="folder to write check.json into  [default: --run, if given]")
def check_command(dataset: str | Path, cluster: str | None, episodes: str | None, run: Path | None,
                  adapter: str, adapter_options: tuple[str, ...], workers: int | None,
                  seed: int, quiet: bool,
                  updates: tuple[str, ...], baselines: tuple[str, ...], seeds: int,
                  max_episodes: int, out: Path | None) -> None:
    """Check that a proposed sim update explains a cluster before anyone retrains.

    Replays the cluster's real episodes at the current values and with the update, on
    the same seeds. The update explains the cluster when the replays' outcomes match
    reality's (Fisher's exact test on the failure counts) and their drift falls
    significantly (Wilcoxon signed-rank over the replays paired by
    episode and seed; five at least); how much more often sim fails than
    before is reported, not required. The verdict says which test failed. Writes
    OUT/check.json; the report's actions pick it up as evidence when it lies in the run
    folder or one of its subfolders.

    \b
    Example:
      sim2real check sim2real-demo/dataset --run sim2real-demo/report --cluster C3 \\
          --set param.friction=0.45
    """
    result = run_check(dataset, _assignments(updates), cluster=cluster, episodes=_ids(episodes),
                   run=run, baseline=_assignments(baselines), adapter=adapter,
                   adapter_options=parse_options(adapter_options), seeds=seeds,
                   max_episodes=max_episodes, seed=seed, workers=workers, progress=not quiet)
    target = out or run
    path = _write(target, CHECK_JSON, result.to_dict()) if target is not None else None
    if not quiet or path is None:
        click.echo(result.verdict)
    if path is not None:
        click.echo(str(path))


def _assignments(items: tuple[str, ...]) -> dict[str, float]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            msg = f"expected param.NAME=VALUE with a number, got {item!r}"
            raise click.BadParameter(msg) from None
    return out


# The names ``cli.py`` registers.
calibrate = calibrate_command
check = check_command

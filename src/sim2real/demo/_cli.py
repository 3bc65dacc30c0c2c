"""``sim2real demo``: generate the MuJoCo demo fleet, then analyze and validate it."""

from __future__ import annotations

from pathlib import Path

import click

from sim2real.demo.generate import generate
from sim2real.demo.plan import SIZES

__all__ = ["demo"]


@click.command("demo")
@click.option("-o", "--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("./sim2real-demo"), show_default=True,
              help="Folder to write: OUT/dataset/, OUT/answer_key.json, then the reports.")
@click.option("--size", type=click.Choice([s for s in SIZES if s != "tiny"]), default="default",
              show_default=True,
              help="small: ~1,150 episodes, under a minute of CPU (tests); default: ~4,200 "
                   "episodes, about 3 minutes of CPU; large: a big fleet, no time target.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the whole demo; the same seed gives byte-identical files.")
@click.option("--generate-only", is_flag=True,
              help="Only write the dataset and the answer key, print their paths, and stop.")
@click.option("--quiet", is_flag=True, help="No progress bars; print only the result paths.")
def demo(out: Path, size: str, seed: int, generate_only: bool, quiet: bool) -> None:
    """Try sim2real on a simulated pick-and-place fleet whose root causes are known.

    The demo world is a MuJoCo cell: a 3-axis gantry with a parallel gripper picks boxes,
    cylinders and spheres off a table and places them in a bin, driven by a scripted
    policy that sees the object through a simulated camera (its error grows in dim light
    and clutter) and commands its drives through a latency.

    \b
    It writes:
      OUT/dataset/          the telemetry dataset (domain-randomised simulation rollouts,
                            and 8 weeks of a fleet of 8 robots on 3 sites)
      OUT/answer_key.json   what was injected into "reality", kept BESIDE the dataset

    \b
    Four root causes, one per family, are injected into the fleet:
      perception drift      one site's lighting dims week after week
      dynamics mismatch     worn gripper pads on one robot (low friction)
      task-scope overflow   a tall bottle, never simulated, appears at one site
      system noise          one robot runs a stale config (latency spikes, dropped
                            messages), fixed in the last two weeks
    plus background failures that simulation has too.

    Then it runs `analyze` on the dataset and `validate` on the fixed deployments, and says
    how the findings compare with the answer key. A second run with the same --seed and
    --size reuses the generated dataset.

    \b
    Examples:
      sim2real demo                                  the whole loop, default size
      sim2real demo --size small -o /tmp/demo        quick
      sim2real demo --generate-only --seed 3         just the data
    """
    paths = generate(out, size=size, seed=seed, progress=not quiet)
    click.echo(f"dataset:    {paths.dataset}")
    click.echo(f"answer key: {paths.answer_key}")
    if generate_only:
        return
    from sim2real.demo.run import run_demo_analysis  # the analysis stack loads only if needed

    run_demo_analysis(paths, quiet)

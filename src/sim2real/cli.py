"""The ``sim2real`` command line: parse, call the Python API, print, set the exit code.

Exit codes: 0 done; 2 bad input or usage (the message says what and where); 130 interrupted;
1 anything else.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sim2real._version import __version__
from sim2real.dataset._cli import DatasetArgument
from sim2real.engine._cli import engine_options
from sim2real.errors import InputError, Sim2RealError


class _Group(click.Group):
    """Turns the library's errors into one line and the exit codes of the spec."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except InputError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(2)
        except Sim2RealError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            # Outputs land whole or not at all, so a Ctrl-C needs no more than this line.
            click.echo("interrupted", err=True)
            sys.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="sim2real")
def main() -> None:
    """Find out why robots fail on the floor when their policies work in simulation.

    sim2real compares each real failure with its nearest simulation rollouts, computes a
    drift signature (which signals differ, by how much), clusters failures with similar
    signatures, names each cluster's cause family (perception drift, dynamics mismatch,
    task-scope overflow, deployment-system noise), and says which cluster grows fastest,
    which simulation parameters differ for it and what to change.

    \b
    Typical loop:
      sim2real demo                         try it on the built-in MuJoCo fleet
      sim2real analyze DATASET -o OUT       report.json + report.html
      sim2real validate DATASET --baseline w05,w06 --candidate w07 -o OUT
      sim2real serve OUT                    the same pages, live, for a team

    Every command has its own --help. Its examples use the folder `sim2real demo` writes
    (sim2real-demo/: dataset/, report/, validation/), so they run as printed after it.
    """


@main.command()
@click.argument("dataset", type=DatasetArgument())
@click.option("-o", "--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("sim2real-report"), show_default=True,
              help="Folder for report.json, report.html and the plotted tables.")
@click.option("--previous", type=click.Path(exists=True, path_type=Path),
              help="An earlier report.json (or its folder): clusters found again keep their IDs.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of every random choice; same data and seed, same report.")
@click.option("--neighbors", "n_neighbors", type=click.IntRange(1), default=5,
              show_default=True, help="Sim rollouts matched to each real failure.")
@click.option("--window", "window_s", type=click.FloatRange(0, min_open=True), default=10.0,
              show_default=True, help="Seconds before each failure that are compared.")
@click.option("--min-cluster-size", type=click.IntRange(2), default=None,
              help="Smallest group called a cluster [default: 2% of failures, at least 5].")
@click.option("--rate", "rate_hz", type=click.FloatRange(0, min_open=True), default=None,
              help="Samples per second of the time grid every channel is resampled onto "
                   "[default: the rate of the fastest channel, measured between its own "
                   "samples].")
@engine_options
@click.option("--skip-bad-episodes", is_flag=True,
              help="Leave out real failures that cannot be compared (no samples, a "
                   "failure_time outside them), listed in the warnings, instead of stopping.")
@click.option("--scratch", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for temporary files (signals regrouped by episode where the "
                   "files are not sorted by it, large grids), removed after the run "
                   "[default: beside --out].")
@click.option("--adapter", default=None,
              help="A simulator adapter (an installed name such as demo, or module:Class): "
                   "calibrate the most urgent clusters' identified parameter by replaying their "
                   "events, check the fit, and put both in the report.")
@click.option("--adapter-option", "adapter_options", multiple=True, metavar="KEY=VALUE",
              help="A keyword argument for the adapter's constructor (repeat).")
@click.option("--budget", type=click.IntRange(min=1), default=120, show_default=True,
              help="With --adapter: candidate evaluations per calibrated cluster.")
@click.option("--sim-clusters", type=click.IntRange(min=1), default=2, show_default=True,
              help="With --adapter: how many clusters to calibrate, most urgent first.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars and no summary.")
def analyze(dataset: str | Path, out: Path, previous: Path | None, seed: int, n_neighbors: int,
            window_s: float, min_cluster_size: int | None, rate_hz: float | None, engine: str,
            address: str | None, skip_bad_episodes: bool, adapter: str | None,
            adapter_options: tuple[str, ...], budget: int, sim_clusters: int,
            scratch: Path | None,
            quiet: bool) -> None:
    """Cluster the real failures of DATASET and write a failure-cluster report.

    Each real failure is matched to its nearest simulation rollouts of the same task (near
    in context, initial state and the trajectory before the failure); its drift signature
    says which channels differ and by how much, in units of sim's own variability (a drift
    score of about 1 means "as far from sim as sim rollouts are from each other"). Failures
    with similar signatures are clustered, each cluster is labelled perception_drift,
    dynamics_mismatch, task_scope_overflow, deployment_system_noise or unexplained, and its
    rate per deployment is tracked.

    DATASET is a folder in the sim2real dataset format (episodes + signals, Parquet or CSV;
    signals wide, one column per channel, or long, episode_id/t/channel/value rows):
    a local path or any URI pyarrow's filesystems open (s3://bucket/fleet-2026-11,
    gs://..., file:///...), with the store's usual credentials (AWS_* variables, ~/.aws...).
    Writes OUT/report.json (the scriptable contract), OUT/report.html (open it in a
    browser, works offline), OUT/signatures.parquet and OUT/traces.parquet.

    \b
    Examples:
      sim2real analyze fleet/ -o out/
      sim2real analyze fleet/ -o out-w09/ --previous out/report.json
      sim2real analyze fleet/ -o out/ --engine ray --address auto
      sim2real analyze s3://telemetry/fleet-2026-11 -o out/ --engine ray
      sim2real analyze fleet/ -o out/ --adapter my_sim --budget 200
    """
    from sim2real.api import analyze as run_analyze
    from sim2real.pipeline import AnalysisConfig
    from sim2real.sim import CalibrationConfig
    from sim2real.sim.adapter import parse_options

    config = AnalysisConfig(n_neighbors=n_neighbors, window_s=window_s,
                            min_cluster_size=min_cluster_size, seed=seed, rate_hz=rate_hz)
    report = run_analyze(dataset, out, previous=previous, config=config, progress=not quiet,
                         engine=engine, address=address, skip_bad_episodes=skip_bad_episodes,
                         adapter=adapter, adapter_options=parse_options(adapter_options),
                         calibration=CalibrationConfig(budget=budget, seed=seed),
                         sim_clusters=sim_clusters, scratch=scratch)
    if not quiet:
        from sim2real.report.console import print_report

        print_report(report, out)


# Commands live with the stage that owns them; this module only gathers them.
from sim2real.ingest._cli import export, ingest, init_mapping  # noqa: E402

main.add_command(ingest)
main.add_command(init_mapping)
main.add_command(export)

from sim2real.serve._cli import serve  # noqa: E402

main.add_command(serve)

from sim2real.demo._cli import demo  # noqa: E402

main.add_command(demo)

from sim2real.validate._cli import validate  # noqa: E402

main.add_command(validate)

from sim2real.sim._cli import calibrate, check  # noqa: E402

main.add_command(calibrate)
main.add_command(check)

# Every command's help ends alike: examples that run on `sim2real demo`'s output (default
# folder sim2real-demo/: dataset/, report/, validation/; in the demo C3 is the worn-pad
# dynamics cluster and C4 the stale-config one), then the exit codes.
_DEMO_EXAMPLES: dict[str, list[str]] = {
    "analyze": ["sim2real analyze sim2real-demo/dataset -o out/"],
    "validate": ["sim2real validate sim2real-demo/dataset --previous sim2real-demo/report \\",
                 "    --baseline w01,w02,w03,w04,w05,w06 --candidate w07,w08 --target C4 \\",
                 "    -o out-fix/"],
    "demo": ["sim2real demo --size small -o /tmp/demo"],
    "serve": ["sim2real serve sim2real-demo/            # report and validation, at :8000",
              "sim2real serve sim2real-demo/report --port 8080",
              "sim2real serve sim2real-demo/ --host 0.0.0.0 --token   # prints the token",
              "sim2real serve sim2real-demo/ --token \"$TEAM_TOKEN\" \\",
              "    --allowed-host dash.example.org   # behind a reverse proxy"],
    "export": ["sim2real export real-w08-r05-0013 --run sim2real-demo/report -o failure.mcap",
               "sim2real export real-w08-r05-0013 --run sim2real-demo/report \\",
               "    --format rerun -o failure.rrd"],
    "init-mapping": ["sim2real init-mapping failure.mcap -o mapping.yaml   "
                     "# failure.mcap: from `sim2real export`"],
    "ingest mcap": ["sim2real ingest mcap recordings/ -m mapping.yaml -o fleet/",
                    "sim2real ingest mcap failure.mcap -m mapping.yaml -o fleet/ --append"],
    "ingest rosbag": ["sim2real ingest rosbag bags/ -m mapping.yaml -o fleet/"],
    "ingest lerobot": ["sim2real ingest lerobot ~/lerobot/pick_place --deployment w09 \\",
                       "    --started-at 2026-11-30T08:00:00Z -o fleet/ --append"],
    "ingest robomimic": ["sim2real ingest robomimic low_dim.hdf5 --source sim -o fleet/"],
    "calibrate": ["sim2real calibrate sim2real-demo/dataset --run sim2real-demo/report "
                  "--cluster C3 -o sim2real-demo/calibration"],
    "check": ["sim2real check sim2real-demo/dataset --run sim2real-demo/report --cluster C3 "
              "--set param.friction=0.45"],
}
_EXIT_CODES = ("Exit codes: 0 done; 2 bad input or usage (the message names the file, "
               "column and row, or the option); 130 interrupted (Ctrl-C); 1 anything else.")


def _epilogs(group: click.Group, prefix: str = "") -> None:
    """Give every command under ``group`` its demo examples and the exit codes."""
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            _epilogs(command, f"{path} ")
        lines = _DEMO_EXAMPLES.get(path, [])
        examples = ("\b\nExamples:\n"
                    + "\n".join(f"  {line}" for line in lines) + "\n\n") if lines else ""
        command.epilog = examples + _EXIT_CODES


_epilogs(main)
main.epilog = _EXIT_CODES

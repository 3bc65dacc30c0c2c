"""Command line: `sim2real ingest {mcap,rosbag,lerobot,robomimic}`, `init-mapping`, `export`."""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from sim2real.errors import IngestError

__all__ = ["export", "ingest", "init_mapping"]

_MAPPING_HELP = """
\b
The mapping (YAML; `sim2real init-mapping FILE...` writes a starter):
  task: pick_place                       a constant, or one of:
      {filename: 'REGEX'}                  first group of a regex on the file name
      {path: '/(success|failure)/'}        ... on the whole path (labels in folders)
      {csv: COLUMN}                        a column of the sidecar CSV
      {metadata: RECORD, key: KEY}         an MCAP metadata record's entry
                                           (rosbag2: {metadata: custom_data, key: K})
      {topic: /T, field: a.b[0]}           a field of the topic's first message
                                           (pick: last for its last one;
                                           where: {type: failure} keeps only the
                                           messages whose fields hold those values)
    add optional: true to make a missing field no error, type: number|string to
    force a type (ctx.* and param.* numbers in strings become numbers by default)
  source: real | sim                     (or any form above)
  deployment:, robot_id:, site:, started_at:   same forms (started_at
                                           defaults to the episode's first message)
  outcome: {topic: /outcome, field: data}    success/failure (true/false, 1/0 too);
                                           map: {present: failure, absent: success}
                                           for a topic without field
  failure_time: {topic: /failure}        a topic without field: its message time
  failure_label: {topic: /failure, field: data}
  time: log | header                     message log time or header.stamp
  episodes: {split: file, grace: 1.0}    one episode per file; outcome and failure
                                           messages up to grace seconds after the
                                           last sample still count; or
  episodes: {split: markers, start: {topic: /ep, field: data, equals: start},
             end: {topic: /ep, field: data, equals: end}, id: '{stem}-{index:03d}'}
  channels:                              one numeric field each (numeric strings too)
    - /joint_states.position[2] -> j3_pos
    - {from: /wrench.force.z, name: grip_force, family: dynamics, unit: N}
    - {from: /diagnostics.status[0].values[key=battery].value, name: battery_v,
       optional: true}                   a KeyValue by its key; optional: a missing
                                           topic or field is a warning, not an error
    - {from: /kv.value, name: temp_c, where: {key: temp}}
  images:                                Image / CompressedImage / foxglove.RawImage /
    - {topic: /camera/compressed, prefix: cam}   foxglove.CompressedImage -> cam_brightness,
                                           cam_contrast, cam_sharpness, cam_saturation,
                                           cam_hist_dist (perception)
  ctx: {object: {csv: object}}           -> ctx.object; sys: and param: alike
  params: {friction: {low: 0.5, high: 1.5, nominal: 1.0}}   -> params.csv
  sidecar: {path: episodes.csv, key: episode_id}   (path relative to the mapping;
                                           key holds the episode ID or the file stem)
  real: {channels: [...], ctx: {...}}    what differs for real episodes (lists
  sim: {param: {...}}                      extend, maps merge, the rest replaces)

Families: perception, dynamics, policy, system; a channel without one gets it from its name.
Signals are written in the long layout: every channel keeps its own message times.
"""


@contextlib.contextmanager
def _progress(label: str) -> Iterator[Callable[[int], None]]:
    """A rich progress line on stderr counting messages (hidden when not a terminal)."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"),
                  TextColumn("{task.completed:,.0f} messages"), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task(label, total=None)
        yield lambda n: bar.advance(task, n)


def _done(ids: list[str], out: Path) -> None:
    click.echo(f"wrote {len(ids)} episode(s) to {out}")


_SHOWN = 12  # warning lines printed before "... and N more"


def _warn(lines: list[str]) -> None:
    for line in lines[:_SHOWN]:
        click.echo(f"warning: {line}", err=True)
    if len(lines) > _SHOWN:
        click.echo(f"warning: ... and {len(lines) - _SHOWN} more", err=True)


@contextlib.contextmanager
def _warnings_shown() -> Iterator[None]:
    """Print what the readers warned about (videos skipped, NaN left out, families kept)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    _warn([str(w.message) for w in caught])


def _recordings_command(kind: str, what: str) -> click.Command:
    @click.command(kind, help=what + "\n" + _MAPPING_HELP)
    @click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path),
                    metavar="FILES_OR_DIRS...")
    @click.option("--mapping", "-m", "mapping_path", required=True,
                  type=click.Path(path_type=Path), help="The mapping YAML (see above).")
    @click.option("--out", "-o", required=True, type=click.Path(path_type=Path),
                  help="The dataset folder to write.")
    @click.option("--append", is_flag=True,
                  help="Add the episodes to an existing dataset (IDs must be new; its "
                       "channels.csv entries are kept, a differing new one is a warning).")
    @click.option("--keep-going", is_flag=True,
                  help="Leave out a recording that cannot be read and write the others; "
                       "the ones left out are listed and the exit code is 2. Without it, "
                       "the first bad recording stops the ingest and nothing is written.")
    def command(paths: tuple[Path, ...], mapping_path: Path, out: Path, append: bool,
                keep_going: bool) -> None:
        from sim2real.ingest.mapping import load_mapping
        from sim2real.ingest.recordings import ingest_recordings

        mapping = load_mapping(mapping_path)
        with _progress(f"reading {len(paths)} path(s)") as tick:
            summary = ingest_recordings(paths, mapping, out, kind=kind,  # type: ignore[arg-type]
                                        append=append, keep_going=keep_going, progress=tick)
        _warn(summary.warnings)
        _done(summary.episodes, out)
        if summary.skipped:
            click.echo(f"left out {len(summary.skipped)} recording(s) that could not be read:",
                       err=True)
            for path, why in summary.skipped:
                click.echo(f"  {path}: {why}", err=True)
            sys.exit(2)

    return command


@click.group("ingest")
def ingest() -> None:
    """Convert recordings into a sim2real dataset (see the dataset spec).

    \b
    sim2real ingest mcap FILES_OR_DIRS -m mapping.yaml -o DATASET [--append] [--keep-going]
    sim2real ingest rosbag BAGS_OR_DIRS -m mapping.yaml -o DATASET [--append] [--keep-going]
    sim2real ingest lerobot DIR -o DATASET [-m facts.yaml] [--families channels.csv]
    sim2real ingest robomimic FILE.hdf5 -o DATASET [-m facts.yaml] [--families channels.csv]

    Nothing is written until every input has been read and checked; with --append an
    error leaves the existing dataset exactly as it was.
    """


ingest.add_command(_recordings_command(
    "mcap", "Ingest MCAP files (ROS 2 CDR or JSON / Foxglove SDK channels).\n\n"
    "Folders are searched for *.mcap files; each file is read once with the mcap package."))
ingest.add_command(_recordings_command(
    "rosbag", "Ingest ROS 1 bags and rosbag2 folders (sqlite3 or mcap storage).\n\n"
    "Folders are searched for *.bag files and rosbag2 folders (holding metadata.yaml); "
    "messages are decoded by rosbags, without a ROS install."))


def _episode_options(source: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed([
            click.option("--out", "-o", required=True, type=click.Path(path_type=Path),
                         help="The dataset folder to write."),
            click.option("--append", is_flag=True, help="Add to an existing dataset."),
            click.option("--source", type=click.Choice(["real", "sim"]),
                         help=f"Episode source (default: {source})."),
            click.option("--task", help="Task of every episode (default: from the data)."),
            click.option("--deployment", help="Deployment / wave of every episode."),
            click.option("--outcome", type=click.Choice(["success", "failure"]),
                         help="Outcome of every episode (default: from the data)."),
            click.option("--started-at", help="ISO start time of every episode."),
            click.option("--sidecar", type=click.Path(path_type=Path, exists=True),
                         help="CSV with an episode_id column (the episode ID, or the "
                              "recording's own name for it: LeRobot episode index, robomimic "
                              "demo_N); its other columns (outcome, failure_time, "
                              "failure_label, ctx.*, sys.*, param.*) override."),
            click.option("--mapping", "-m", "mapping_path", type=click.Path(path_type=Path),
                         help="A mapping YAML of episode facts only (task:, outcome:, "
                              "ctx:...; see `ingest mcap --help`), read from {attr: NAME} "
                              "(HDF5 demo, then file attributes), {feature: next.success} "
                              "(LeRobot frame columns; pick: first|last|any), {path: REGEX} "
                              "(labels in folder names), {filename:}, {csv:}."),
            click.option("--families", type=click.Path(path_type=Path, exists=True),
                         help="channel,family,unit CSV declaring channel families (what is "
                              "not declared is inferred from the name when analysed)."),
        ]):
            func = option(func)
        return func
    return decorate


def _facts_mapping(kw: dict[str, Any]) -> Any:
    from sim2real.ingest.mapping import load_mapping

    return load_mapping(kw["mapping_path"]) if kw["mapping_path"] else None


def _defaults(kw: dict[str, Any]) -> Any:
    from sim2real.ingest._tables import EpisodeDefaults, to_timestamp

    started = to_timestamp(kw["started_at"], "--started-at") if kw["started_at"] else None
    return EpisodeDefaults(kw["source"], kw["task"], kw["deployment"], kw["outcome"], started,
                           kw["sidecar"])


@ingest.command("lerobot")
@click.argument("root", type=click.Path(path_type=Path, exists=True, file_okay=False),
                metavar="DIR")
@_episode_options("real")
def lerobot(root: Path, **kw: Any) -> None:
    """Ingest a LeRobot dataset (format v2.1 or v3.0) from its Parquet and meta/ files.

    Vector features (observation.state, action, ...) become one channel per element, named
    from the feature's names (state_shoulder_pan, action_gripper); PNG image features become
    perception statistics; MP4 video features are skipped. next.success, next.done and
    next.reward are episode facts, never channels: an episode whose next.success is set on
    some frame is a success, one where it never is a failure. Episodes are real, of
    deployment DIR's name, unless a mapping, the options or a sidecar say otherwise.
    """
    from sim2real.ingest.lerobot import ingest_lerobot

    with _warnings_shown():
        ids = ingest_lerobot(root, kw["out"], defaults=_defaults(kw), append=kw["append"],
                             mapping=_facts_mapping(kw), families=kw["families"])
    _done(ids, kw["out"])


@ingest.command("robomimic")
@click.argument("path", type=click.Path(path_type=Path), metavar="FILE.hdf5")
@_episode_options("sim")
@click.option("--rate", type=float, help="Steps per second (default: env_args control_freq, "
                                         "else 20).")
def robomimic(path: Path, rate: float | None, **kw: Any) -> None:
    """Ingest a robomimic HDF5 file: data/demo_N/{actions, states, rewards, obs/<key>}.

    One episode per demo (<stem>-demo_N, sorted numerically); image observations become
    perception statistics; the outcome is success when the last `dones` flag is set or a
    reward is positive; mask/<split> lists become ctx.split.
    """
    from sim2real.ingest.robomimic import ingest_robomimic

    with _warnings_shown():
        ids = ingest_robomimic(path, kw["out"], defaults=_defaults(kw), rate=rate,
                               append=kw["append"], mapping=_facts_mapping(kw),
                               families=kw["families"])
    _done(ids, kw["out"])


@click.command("init-mapping")
@click.argument("recordings", nargs=-1, required=True,
                type=click.Path(path_type=Path, exists=True), metavar="FILE...")
@click.option("--out", "-o", type=click.Path(path_type=Path), default=Path("mapping.yaml"),
              show_default=True, help="Where to write it; '-' prints it.")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def init_mapping(recordings: tuple[Path, ...], out: Path, force: bool) -> None:
    """Write a commented starter mapping.yaml from the topics and fields in FILE...

    Each FILE is an MCAP file, a ROS 1 bag or a rosbag2 folder; give several (a success
    and a failure, a real and a sim one) to see every topic: one missing from some files
    is marked optional. Every numeric field of every topic's first message becomes a
    channel line (joint arrays named from JointState.name) whose family is a guess marked
    "# check"; image topics go under images:; topics that cannot be decoded are listed as
    comments; the episode keys come with TODOs to fill in.
    """
    from sim2real.ingest.starter import starter_mapping

    text = starter_mapping(list(recordings))
    if str(out) == "-":
        click.echo(text, nl=False)
        return
    if out.exists() and not force:
        raise IngestError(f"{out}: already exists; pass --force to overwrite it")
    out.write_text(text)
    click.echo(f"wrote {out}: check the lines marked '# check' and fill in the TODOs")


@click.command("export")
@click.argument("event_id")
@click.option("--run", type=click.Path(path_type=Path), default=Path("."), show_default=True,
              help="The analyze output folder holding report.json.")
@click.option("--dataset", type=click.Path(path_type=Path),
              help="The dataset (default: the path recorded in the report).")
@click.option("--format", "fmt", type=click.Choice(["mcap", "rerun"]), default="mcap",
              show_default=True, help="mcap opens in Foxglove, rerun (.rrd) in the Rerun viewer.")
@click.option("--out", "-o", required=True, type=click.Path(path_type=Path),
              help="The recording to write.")
def export(event_id: str, run: Path, dataset: Path | None, fmt: str, out: Path) -> None:
    """Export a real failure and its nearest sim rollouts as one recording.

    EVENT_ID is the failure's episode_id in report.json. Channels appear as time series
    under /real/<channel> and /sim/<episode_id>/<channel>, all starting together so they
    can be scrubbed side by side; the failure time is an annotation (/events and a
    foxglove.Log on /real/failure in MCAP; a TextLog on /events in Rerun).
    """
    from sim2real.ingest.export import export_event

    path = export_event(event_id, out, run=run, dataset=dataset, fmt=fmt)  # type: ignore[arg-type]
    click.echo(f"wrote {path}")

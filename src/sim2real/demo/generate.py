"""Generate the demo dataset (simulation + fleet) and its answer key, with a cache."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from sim2real._atomic import atomic_files
from sim2real.dataset.write import write_dataset
from sim2real.demo.answer import BACKGROUND, answer_key
from sim2real.demo.episode import EpisodeResult
from sim2real.demo.execute import EpisodeRunner
from sim2real.demo.plan import SIZES, TASK, EpisodeSpec, RealEpisode, plan_real, plan_sim
from sim2real.demo.telemetry import CHANNELS
from sim2real.demo.world import PARAM_RANGES
from sim2real.errors import UsageError

__all__ = ["GENERATOR_VERSION", "DemoPaths", "generate"]

GENERATOR_VERSION = 5
_MANIFEST = "manifest.json"
_PART_EPISODES = 1000  # episodes per signals part
_SIGNAL_SCHEMA = pa.schema([("episode_id", pa.string()), ("t", pa.float64())]
                           + [(c.name, pa.float64()) for c in CHANNELS])


@dataclass(frozen=True)
class DemoPaths:
    """Where a generated demo lies: ``root`` holds ``dataset/`` and ``answer_key.json``."""

    root: Path
    dataset: Path
    answer_key: Path


def generate(out: Path, *, size: str = "default", seed: int = 0, workers: int | None = None,
             progress: bool = True) -> DemoPaths:
    """Generate the demo fleet's dataset and answer key under ``out``.

    Simulation rollouts and real episodes run in parallel over ``workers`` processes (all
    cores by default); each episode is seeded on its own, so the output is byte-identical
    for a seed whatever the worker count. When ``out`` already holds a demo generated with
    the same seed, size and generator version, it is reused as it is.

    Args:
        out: the folder to write (``out/dataset/``, ``out/answer_key.json``).
        size: ``small`` (tests), ``default`` or ``large``.
        seed: the demo's seed.
        workers: worker processes; ``1`` runs in this process.
        progress: show a progress bar.

    Returns:
        The paths of the dataset and the answer key.

    Raises:
        UsageError: an unknown size.
    """
    if size not in SIZES:
        msg = f"unknown demo size {size!r}: expected one of {', '.join(SIZES)}"
        raise UsageError(msg)
    out = Path(out)
    paths = DemoPaths(out, out / "dataset", out / "answer_key.json")
    manifest = {"generator": "sim2real.demo", "version": GENERATOR_VERSION, "seed": seed,
                "size": size}
    if _cached(paths, manifest):
        return paths
    sim_specs = plan_sim(SIZES[size], seed)
    real = plan_real(SIZES[size], seed)
    with EpisodeRunner(workers, progress) as runner:
        sim_results = runner.run(sim_specs, "simulation rollouts")
        real_results = runner.run([e.spec for e in real], "real fleet episodes")
        events = _blame(runner, real, real_results)
    episodes = pa.concat_tables([_sim_rows(sim_specs, sim_results), _real_rows(real, real_results)])
    write_dataset(paths.dataset, episodes, _signal_parts(sim_results + real_results),
                  channels=CHANNELS, params=list(PARAM_RANGES.values()))
    exposure: dict[str, int] = {}
    for e in real:
        exposure[e.deployment] = exposure.get(e.deployment, 0) + 1
    key = answer_key(seed=seed, size=size, version=GENERATOR_VERSION, events=events,
                     deployment_of={e.spec.episode_id: e.deployment for e in real},
                     exposure=exposure)
    with atomic_files(out) as stage:
        (stage / paths.answer_key.name).write_text(json.dumps(key, indent=2) + "\n")
        (stage / _MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return paths


def _cached(paths: DemoPaths, manifest: dict[str, object]) -> bool:
    try:
        found = json.loads((paths.root / _MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    complete = (paths.dataset / "episodes.parquet").exists() and paths.answer_key.exists()
    return bool(found == manifest and complete)


# A twin failure this close in time, with the same symptom, is the same failure.
_SAME_FAILURE_S = 0.1


def _blame(runner: EpisodeRunner, real: Sequence[RealEpisode],
           results: Sequence[EpisodeResult]) -> dict[str, str]:
    """Name the cause of each real failure by its counterfactual twin (the cause removed).

    The cause is blamed when the twin succeeds, and also when the twin fails another way
    (another symptom, or the same one at another time): then the failure as recorded is
    the cause's doing, and its telemetry carries the cause's effect. Only when the twin
    fails in the same way at the same moment did the cause change nothing: background.
    """
    events = {}
    twins: list[tuple[str, str, EpisodeSpec, EpisodeResult]] = []
    for ep, res in zip(real, results, strict=True):
        if res.outcome != "failure":
            continue
        if ep.cause is None or ep.counterfactual is None:
            events[ep.spec.episode_id] = BACKGROUND
        else:
            twins.append((ep.spec.episode_id, ep.cause, ep.counterfactual, res))
    twin_results = runner.run([t[2] for t in twins], "counterfactual checks")
    for (episode_id, cause, _, res), twin in zip(twins, twin_results, strict=True):
        same = (twin.outcome == "failure" and twin.failure_label == res.failure_label
                and abs((twin.failure_time or 0.0) - (res.failure_time or 0.0))
                <= _SAME_FAILURE_S)
        events[episode_id] = BACKGROUND if same else cause
    return events


def _outcome_columns(results: Sequence[EpisodeResult]) -> dict[str, pa.Array]:
    return {
        "outcome": pa.array([r.outcome for r in results], pa.string()),
        "failure_time": pa.array([r.failure_time for r in results], pa.float64()),
        "failure_label": pa.array([r.failure_label for r in results], pa.string()),
    }


def _context_columns(specs: Sequence[EpisodeSpec]) -> dict[str, pa.Array]:
    return {
        "ctx.object_type": pa.array([str(s.context["object_type"]) for s in specs], pa.string()),
        "ctx.light_setting": pa.array([str(s.context["light_setting"]) for s in specs],
                                      pa.string()),
        "ctx.clutter": pa.array([int(s.context["clutter"]) for s in specs],  # type: ignore[call-overload]
                                pa.int64()),
    }


def _sim_rows(specs: Sequence[EpisodeSpec], results: Sequence[EpisodeResult]) -> pa.Table:
    n = len(specs)
    cols: dict[str, pa.Array] = {
        "episode_id": pa.array([s.episode_id for s in specs], pa.string()),
        "source": pa.array(["sim"] * n, pa.string()),
        "task": pa.array([TASK] * n, pa.string()),
        **_outcome_columns(results),
        "deployment": pa.nulls(n, pa.string()),
        "started_at": pa.nulls(n, pa.timestamp("us", tz="UTC")),
        "robot_id": pa.nulls(n, pa.string()),
        "site": pa.nulls(n, pa.string()),
        **_context_columns(specs),
    }
    for name in PARAM_RANGES:
        cols[f"param.{name}"] = pa.array([s.params[name] for s in specs], pa.float64())
    for name in ("config_hash", "firmware", "policy_version"):
        cols[f"sys.{name}"] = pa.nulls(n, pa.string())
    return pa.table(cols)


def _real_rows(real: Sequence[RealEpisode], results: Sequence[EpisodeResult]) -> pa.Table:
    n = len(real)
    cols: dict[str, pa.Array] = {
        "episode_id": pa.array([e.spec.episode_id for e in real], pa.string()),
        "source": pa.array(["real"] * n, pa.string()),
        "task": pa.array([TASK] * n, pa.string()),
        **_outcome_columns(results),
        "deployment": pa.array([e.deployment for e in real], pa.string()),
        "started_at": pa.array([e.started_at for e in real], pa.timestamp("us", tz="UTC")),
        "robot_id": pa.array([e.robot.robot_id for e in real], pa.string()),
        "site": pa.array([e.robot.site for e in real], pa.string()),
        **_context_columns([e.spec for e in real]),
    }
    for name in PARAM_RANGES:
        cols[f"param.{name}"] = pa.nulls(n, pa.float64())
    cols["sys.config_hash"] = pa.array([e.config_hash for e in real], pa.string())
    cols["sys.firmware"] = pa.array(["fw-4.2.1"] * n, pa.string())
    cols["sys.policy_version"] = pa.array(["pick-v12"] * n, pa.string())
    return pa.table(cols)


def _signal_parts(results: Sequence[EpisodeResult]) -> list[pa.Table]:
    """Signals in parts of a fixed schema (system channels are null on simulation rows)."""
    parts = []
    for i in range(0, len(results), _PART_EPISODES):
        tables = [_conform(r.telemetry) for r in results[i:i + _PART_EPISODES]]
        parts.append(pa.concat_tables(tables))
    return parts


def _conform(table: pa.Table) -> pa.Table:
    present = set(table.column_names)  # built anew by every call: once, not per column
    cols = [table[name] if name in present else pa.nulls(table.num_rows, field.type)
            for name, field in zip(_SIGNAL_SCHEMA.names, _SIGNAL_SCHEMA, strict=True)]
    return pa.Table.from_arrays(cols, schema=_SIGNAL_SCHEMA)

"""Write a synthetic world: the dataset (signals streamed in parts) and its answer key beside it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from sim2real._atomic import atomic_files
from sim2real.dataset.schema import Channel, ParamRange
from sim2real.dataset.write import write_dataset
from sim2real.demo.synthetic.answer import answer_key
from sim2real.demo.synthetic.fleet import (
    FAILURE_LABELS,
    Episodes,
    ctx_values,
    sample_real,
    sample_sim,
)
from sim2real.demo.synthetic.spec import FAILURE_MODES, WorldSpec
from sim2real.demo.synthetic.telemetry import block_signals
from sim2real.errors import UsageError

__all__ = ["WorldPaths", "generate_world", "scaled_counts"]

# Episodes per generation block. Fixed (not derived from part_rows) so that the noise each
# episode gets, hence every value, does not depend on how the signals are split into parts.
_BLOCK = 256


@dataclass(frozen=True)
class WorldPaths:
    """Where a generated world lies: ``root/dataset/`` and ``root/answer_key.json``."""

    root: Path
    dataset: Path
    answer_key: Path


def generate_world(
    spec: WorldSpec, out: Path, *, seed: int = 0, scale: float = 1.0, part_rows: int = 2_000_000
) -> WorldPaths:
    """Generate a fleet of real episodes and sim rollouts and write it under ``out``.

    Args:
        spec: the world (see :mod:`sim2real.demo.synthetic.presets`).
        out: folder to write; ``out/dataset`` is replaced, ``out/answer_key.json`` written beside.
        seed: same spec + seed -> byte-identical files.
        scale: multiplies episodes per deployment and the number of sim rollouts.
        part_rows: a new signals part is started once a part holds this many rows; the
            signals are generated block by block, so memory stays bounded for any scale.

    Returns:
        The paths written.

    Raises:
        UsageError: ``scale`` or ``part_rows`` is not positive.
    """
    if scale <= 0 or part_rows <= 0:
        msg = f"scale and part_rows must be positive, got scale={scale}, part_rows={part_rows}"
        raise UsageError(msg)
    out = Path(out)
    counts = scaled_counts(spec, scale)
    real = sample_real(spec, counts, np.random.default_rng([seed, 0]))
    sim = sample_sim(spec, max(1, round(spec.n_sim * scale)), np.random.default_rng([seed, 1]))
    # "real-..." sorts before "sim-...", and both are zero-padded, so the parts come out
    # already in the (episode_id, t) order write_dataset sorts them into.
    real_ids, sim_ids = _ids("real", len(real)), _ids("sim", len(sim))
    episodes = pa.concat_tables(
        [_episode_table(spec, real, real_ids), _episode_table(spec, sim, sim_ids)])
    dataset = write_dataset(
        out / "dataset", episodes,
        _signal_parts(spec, seed, [(real, real_ids), (sim, sim_ids)], part_rows),
        channels=[Channel(c.name, c.family, c.unit) for c in spec.channels],
        params=[ParamRange(p.name, p.low, p.high, p.nominal) for p in spec.params],
    )
    size = spec.name if scale == 1.0 else f"{spec.name}@{scale:g}"
    key = answer_key(spec, real, real_ids, counts, seed=seed, size=size)
    with atomic_files(out) as stage:
        (stage / "answer_key.json").write_text(json.dumps(key, indent=1) + "\n")
    return WorldPaths(out, dataset, out / "answer_key.json")


def scaled_counts(spec: WorldSpec, scale: float) -> np.ndarray:
    """Real episodes per deployment at ``scale`` (at least one each)."""
    counts = np.round(np.array(spec.episodes_per_deployment, float) * scale).astype(np.int64)
    return np.maximum(counts, 1)


def _ids(prefix: str, n: int) -> np.ndarray:
    width = max(6, len(str(max(n - 1, 0))))
    return np.array([f"{prefix}-{i:0{width}d}" for i in range(n)])


def _signal_parts(
    spec: WorldSpec, seed: int, sources: list[tuple[Episodes, np.ndarray]], part_rows: int
) -> Iterator[pa.Table]:
    """Generate blocks of episodes and hand them out grouped into parts of ~``part_rows``."""
    pending: list[pa.Table] = []
    rows = 0
    for code, (ep, ids) in enumerate(sources):
        for block, start in enumerate(range(0, len(ep), _BLOCK)):
            rows_slice = slice(start, start + _BLOCK)
            rng = np.random.default_rng([seed, 10 + code, block])
            table = block_signals(spec, ep.take(rows_slice), ids[rows_slice], rng)
            pending.append(table)
            rows += table.num_rows
            if rows >= part_rows:
                yield pa.concat_tables(pending)
                pending, rows = [], 0
    if pending:
        yield pa.concat_tables(pending)


def _episode_table(spec: WorldSpec, ep: Episodes, ids: np.ndarray) -> pa.Table:
    """The ``episodes`` rows of one source, columns in the order of the dataset spec."""
    n = len(ep)
    real = ep.is_real
    failed = ep.failed
    labels = np.array([FAILURE_LABELS[m] for m in FAILURE_MODES])
    fail_time = ep.failure_time()
    cols: dict[str, pa.Array] = {
        "episode_id": pa.array(ids),
        "source": pa.array(np.full(n, "real" if real else "sim")),
        "task": pa.array(np.array([t.name for t in spec.tasks])[ep.task]),
        "outcome": pa.array(np.where(failed, "failure", "success")),
        "failure_time": pa.array(np.round(fail_time, 4), mask=~failed),
        "failure_label": pa.array(labels[np.maximum(ep.mode, 0)], mask=~failed),
    }
    deployments = np.array(spec.deployments)[np.maximum(ep.deployment, 0)]
    robots = np.array(spec.robots)[np.maximum(ep.robot, 0)]
    sites = np.array(spec.robot_sites)[np.maximum(ep.robot, 0)]
    cols["deployment"] = _masked(deployments, real)
    cols["started_at"] = pa.array(ep.started_us, pa.timestamp("us", tz="UTC"),
                                  mask=np.full(n, not real))
    cols["robot_id"] = _masked(robots, real)
    cols["site"] = _masked(sites, real)
    for j, cat in enumerate(spec.ctx_categorical):
        cols[f"ctx.{cat.name}"] = pa.array(np.array(ctx_values(spec, j))[ep.ctx_cat[:, j]])
    for j, num in enumerate(spec.ctx_numeric):
        cols[f"ctx.{num.name}"] = pa.array(np.round(ep.ctx_num[:, j], 4))
    for j, p in enumerate(spec.params):
        # Hidden on real rows: the analysis has to infer them from telemetry.
        cols[f"param.{p.name}"] = pa.array(ep.params[:, j], pa.float64(), mask=np.full(n, real))
    cols["sys.config_hash"] = _masked(_config_hashes(spec, ep), real)
    cols["sys.firmware"] = _masked(_firmware(spec, ep), real)
    return pa.table(cols)


def _masked(values: np.ndarray, present: bool) -> pa.Array:
    return pa.array(values, pa.string(), mask=np.full(len(values), not present))


def _config_hashes(spec: WorldSpec, ep: Episodes) -> np.ndarray:
    """A release config per pair of deployments; a system cause's own hash where it acts."""
    releases = [f"cfg-{hashlib.sha1(f'{spec.name}:{d // 2}'.encode()).hexdigest()[:8]}"
                for d in range(len(spec.deployments))]
    hashes = np.array(releases)[np.maximum(ep.deployment, 0)]
    for c, cause in enumerate(spec.causes):
        if cause.config_hash is not None:
            hashes = np.where(ep.config_cause == c, cause.config_hash, hashes)
    return hashes


def _firmware(spec: WorldSpec, ep: Episodes) -> np.ndarray:
    """Robots move to the newer firmware one by one from the middle of the fleet's history."""
    upgrade_at = len(spec.deployments) // 2 + np.arange(len(spec.robots)) % 3
    newer = ep.deployment >= upgrade_at[np.maximum(ep.robot, 0)]
    return np.where(newer, spec.firmware[1], spec.firmware[0])


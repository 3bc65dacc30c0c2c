"""Generate a zoo world: draw it, run the shared model for sim and real, write the dataset
and the answer key beside it.

Which failures a cause produced is decided by running the real episodes twice with the same
noise, once as they happened and once with every cause removed: a failure that does not
happen without the causes is its cause's, the rest are background failures (sim has them too).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sim2real._atomic import atomic_files
from sim2real.dataset.ids import EpisodeIndex
from sim2real.dataset.schema import Channel, ParamRange
from sim2real.dataset.write import write_dataset
from sim2real.demo.zoo.key import WorldKey, answer_key
from sim2real.demo.zoo.model import DT, FAILURES, PARAM_ROLES, ROLE_INDEX, Inputs, Run, simulate
from sim2real.demo.zoo.world import MECHANISMS, World, draw_world

__all__ = ["Fleet", "generate_world"]

_Q_PREF = 0.35
_DEEP = 0.27  # m of shelf depth from which the arm cannot reach (sim's support ends at 0.12)
_BLOCK = 200  # episodes per signals part
_CONTACT = {"impact": 1, "obstruction": 2, "snag": 3}


@dataclass(frozen=True)
class Fleet:
    """The real episodes drawn for a world, before the model runs: one row per episode."""

    deployment: np.ndarray
    robot: np.ndarray
    started_us: np.ndarray
    task: np.ndarray
    obj: np.ndarray    # index into World.objects; len(objects): the world's new object
    cause: np.ndarray  # -1: none active
    inputs: Inputs
    clean: Inputs      # the same episodes with every cause removed


def generate_world(seed: int, out_dir: str | Path, *, traps: list[str] | None = None,
                   size: float = 1.0, no_gap: bool | None = None) -> WorldKey:
    """Draw world ``seed`` and write ``out_dir/dataset`` and ``out_dir/answer_key.json``.

    Args:
        seed: same seed and options, byte-identical files.
        out_dir: folder to write; its ``dataset`` is replaced.
        traps: trap classes the world must set (see ``TRAP_CLASSES``); default: drawn.
        size: multiplies real episodes and sim rollouts.
        no_gap: force or forbid a world without a sim-to-real gap.

    Returns:
        The answer key (also written beside the dataset, never inside it).
    """
    world = draw_world(seed, traps=traps, size=size, no_gap=no_gap)
    out = Path(out_dir)
    fleet = _real_fleet(world, np.random.default_rng([seed, 1]))
    real = simulate(fleet.inputs, np.random.default_rng([seed, 2]))
    clean = simulate(fleet.clean, np.random.default_rng([seed, 2]))
    sim_task, sim_obj, sim_in = _sim_inputs(world, np.random.default_rng([seed, 3]))
    sim = simulate(sim_in, np.random.default_rng([seed, 4]))
    ids = _ids(world, len(fleet.task), len(sim_task), np.random.default_rng([seed, 5]))
    episodes = pa.concat_tables([
        _episodes(world, real, ids[0], fleet.task, fleet.obj, fleet.inputs, fleet),
        _episodes(world, sim, ids[1], sim_task, sim_obj, sim_in, None)])
    jitter = np.random.default_rng([seed, 6])
    real_rows = _signals(world, real, ids[0], True, jitter)
    sim_rows = _signals(world, sim, ids[1], False, jitter)
    dataset = out / "dataset"
    channels = [Channel(c.name, c.family, c.unit) for c in world.channels
                if world.declare == "all" or (c.declared and world.declare == "some")]
    params = [ParamRange(p.name, *p.range) for p in world.params]
    if world.layout == "parts":
        write_dataset(dataset, episodes, real_rows + sim_rows, channels=channels, params=params)
    else:
        write_dataset(dataset, episodes, [], channels=channels, params=params)
        _one_file(dataset, ids[0], fleet.started_us, real_rows, sim_rows)
    key = answer_key(world, fleet, real, clean, ids[0], size)
    with atomic_files(out) as stage:
        (stage / "answer_key.json").write_text(json.dumps(key, indent=1) + "\n")
    return WorldKey.read(out / "answer_key.json")


def _real_fleet(world: World, rng: np.random.Generator) -> Fleet:
    n_dep = len(world.deployments)
    weight = np.array(world.robot_weight)
    join = np.array(world.robot_join)
    active = np.arange(n_dep)[None, :] >= join[:, None]  # (robots, deployments)
    rate = world.episodes / max(float((weight[:, None] * active).sum()), 1e-9)
    counts = rng.poisson(rate * weight[:, None] * active)
    robot = np.repeat(np.repeat(np.arange(len(weight)), n_dep), counts.ravel())
    deployment = np.repeat(np.tile(np.arange(n_dep), len(weight)), counts.ravel())
    start = np.datetime64("2026-02-02T06:00:00", "us").astype("i8")
    started = start + ((deployment + rng.random(len(robot))) * 7 * 86_400e6).astype("i8")
    order = np.argsort(started, kind="stable")
    robot, deployment, started = robot[order], deployment[order], started[order]
    n = len(robot)
    task = _tasks(world, n, rng)
    clean, obj = _base_inputs(world, task, rng, real=True)
    cause = _assign(world, deployment, robot, rng)
    new = [c for c, d in enumerate(world.causes) if d.mechanism == "new_object"]
    obj = np.where(np.isin(cause, new), len(world.objects), obj)
    return Fleet(deployment, robot, started, task, obj, cause,
                 _apply(world, clean, cause, rng), clean)


def _tasks(world: World, n: int, rng: np.random.Generator) -> np.ndarray:
    w = np.array([t.weight for t in world.tasks])
    return rng.choice(len(w), n, p=w / w.sum())


def _base_inputs(world: World, task: np.ndarray, rng: np.random.Generator, *,
                 real: bool) -> tuple[Inputs, np.ndarray]:
    """Episodes as sim models them (real ones: hardware near nominal, a jittery network),
    and the object each one handles."""
    n = len(task)
    nominal = np.array([v[0] for v in PARAM_ROLES.values()])
    low = np.array([v[1] for v in PARAM_ROLES.values()])
    high = np.array([v[2] for v in PARAM_ROLES.values()])
    randomised = np.array([world.param(r) is not None for r in PARAM_ROLES])
    if real and not world.no_gap:
        drawn = np.clip(nominal + rng.normal(0, 0.1, (n, len(nominal))) * (high - low),
                        low, high)
    else:
        drawn = low + (high - low) * rng.random((n, len(nominal)))
    params = np.where(randomised, drawn, nominal)
    obj_w = np.array([o.weight for o in world.objects])
    obj = rng.choice(len(obj_w), n, p=obj_w / obj_w.sum())
    _name, lo, hi = world.depth
    depth = rng.uniform(lo, hi, n)
    dock = np.array([t.dock for t in world.tasks])[task]
    duration = np.array([t.duration for t in world.tasks])[task] * np.exp(rng.normal(0, 0.04, n))
    steps = int(np.ceil(duration.max() / DT)) + 2
    latency = None  # sim's model of the network: a constant 20 ms
    if real or world.no_gap:  # the network: 20 ms, slowly wandering a few ms
        wander = np.cumsum(rng.normal(0, 0.3, (n, steps)), axis=1)
        latency = 20 + np.clip(wander, -6, 6)
    bumped = rng.random(n) < 0.07  # knocks sim models too: background failures
    return Inputs(
        duration=duration, distance=dock + _Q_PREF + depth, dock=dock,
        tolerance=np.array([o.tolerance for o in world.objects])[obj],
        mass_factor=np.array([o.mass_factor for o in world.objects])[obj],
        grip_factor=np.array([o.grip_factor for o in world.objects])[obj],
        params=params, latency_ms=latency, contact=np.zeros(n, int),
        contact_at=rng.uniform(0.3, 0.7, n), bump=np.where(bumped, rng.uniform(0.15, 0.8, n), 0.0),
        bump_at=rng.uniform(0.1, 0.9, n), fps=world.fps_real if real else world.fps_sim,
    ), obj


def _sim_inputs(world: World, rng: np.random.Generator
                ) -> tuple[np.ndarray, np.ndarray, Inputs]:
    task = np.repeat(np.arange(len(world.tasks)), world.n_sim)
    inputs, obj = _base_inputs(world, task, rng, real=False)
    return task, obj, inputs


def _assign(world: World, deployment: np.ndarray, robot: np.ndarray,
            rng: np.random.Generator) -> np.ndarray:
    """At most one active cause per episode, at a rate that yields about its target failures."""
    n_dep = len(world.deployments)
    cause = np.full(len(robot), -1)
    u = rng.random(len(robot))
    low = np.zeros(len(robot))  # causes take consecutive slices of [0, 1): one per episode
    for c, draw in enumerate(world.causes):
        ok = np.isin(robot, draw.robots) & (deployment >= draw.onset)
        if draw.fixed_from is not None:
            ok &= deployment < draw.fixed_from
        span = max(n_dep - 1 - draw.onset, 1)
        frac = np.clip((deployment - draw.onset) / span, 0, 1)
        profile = {"grows": 0.2 + 0.8 * frac, "steady": np.ones(len(robot)),
                   "fades": 1.0 - 0.65 * frac}[draw.shape]
        expected = MECHANISMS[draw.mechanism][4] * float((profile * ok).sum())
        scale = min(draw.target / max(expected, 1e-9), 0.9 / profile.max())
        p = np.minimum(scale * profile * ok, np.maximum(0.95 - low, 0))
        cause[(u >= low) & (u < low + p)] = c
        low += p
    return cause


def _apply(world: World, clean: Inputs, cause: np.ndarray, rng: np.random.Generator) -> Inputs:
    """The episodes as they happened: each active cause changes what the robot meets."""
    n = len(cause)
    strength = rng.uniform(0.7, 1.3, n)
    params = clean.params.copy()
    latency = None if clean.latency_ms is None else clean.latency_ms.copy()
    fields = {"tolerance": clean.tolerance.copy(), "mass_factor": clean.mass_factor.copy(),
              "grip_factor": clean.grip_factor.copy(), "distance": clean.distance.copy(),
              "contact": clean.contact.copy()}
    clock = np.arange(0 if latency is None else latency.shape[1]) * DT  # s, per step
    for c, draw in enumerate(world.causes):
        on = cause == c
        if not on.any():
            continue
        mech = draw.mechanism
        _taxonomy, role, true, _actions, _rate = MECHANISMS[mech]
        if role is not None and true is not None:
            _nominal, low, high = PARAM_ROLES[role]
            # measured from the range edge the true value lies beyond: strength 1 gives it
            edge = min(max(true, low), high)
            params[on, ROLE_INDEX[role]] = edge + (true - edge) * strength[on]
        elif mech == "network" and latency is not None:
            rows = np.flatnonzero(on)
            for _ in range(2):
                centre = rng.uniform(0.2, 0.9, len(rows)) * clean.duration[rows]
                width = rng.uniform(0.3, 0.8, len(rows))
                bump = np.exp(-0.5 * ((clock[None, :] - centre[:, None]) / width[:, None]) ** 2)
                latency[rows] += 320 * strength[rows, None] * bump
        elif mech == "new_object":
            new = world.new_object
            fields["tolerance"][on] = new.tolerance
            fields["mass_factor"][on] = new.mass_factor
            fields["grip_factor"][on] = new.grip_factor
        elif mech == "deep_shelf":
            depth = _DEEP + 0.05 * strength[on]
            fields["distance"][on] = clean.dock[on] + _Q_PREF + depth
        else:
            fields["contact"][on] = _CONTACT[mech]
    contact_at = clean.contact_at.copy()
    # modes of one place meet the same obstacle at about the same spot
    moded = np.isin(cause, [c for c, d in enumerate(world.causes) if d.mechanism in _CONTACT])
    contact_at[moded] = rng.uniform(0.45, 0.55, int(moded.sum()))
    return replace(clean, tolerance=fields["tolerance"], mass_factor=fields["mass_factor"],
                   grip_factor=fields["grip_factor"], distance=fields["distance"],
                   contact=fields["contact"], params=params, latency_ms=latency,
                   contact_at=contact_at)


def _depth(inputs: Inputs) -> np.ndarray:
    """The ``ctx`` shelf depth of each episode (m)."""
    return inputs.distance - inputs.dock - _Q_PREF


def _ids(world: World, n_real: int, n_sim: int,
         rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if world.layout == "parts":
        return (np.array([f"real-{i:06d}" for i in range(n_real)]),
                np.array([f"sim-{i:06d}" for i in range(n_sim)]))
    tokens = np.array([rng.bytes(6).hex() for _ in range(n_real + n_sim)])
    return tokens[:n_real], tokens[n_real:]


def _episodes(world: World, run: Run, ids: np.ndarray, task: np.ndarray, obj: np.ndarray,
              inputs: Inputs, fleet: Fleet | None) -> pa.Table:
    """The episodes rows of one source (``fleet``: the real one)."""
    real = fleet is not None
    source = "real" if real else "sim"
    n = len(ids)
    failed = run.failure >= 0
    labels = np.array(FAILURES)[np.maximum(run.failure, 0)]
    cols: dict[str, pa.Array] = {
        "episode_id": pa.array(ids),
        "source": pa.array(np.full(n, source)),
        "task": pa.array(np.array([t.name for t in world.tasks])[task]),
        "outcome": pa.array(np.where(failed, "failure", "success")),
        "failure_time": pa.array(np.round(run.failure_time, 4), mask=~failed),
        "failure_label": pa.array(labels, mask=~failed),
    }
    none = np.full(n, not real)
    if fleet is not None:
        cols["deployment"] = pa.array(np.array(world.deployments)[fleet.deployment])
        cols["started_at"] = pa.array(fleet.started_us, pa.timestamp("us", tz="UTC"))
        cols["robot_id"] = pa.array(np.array(world.robots)[fleet.robot])
        cols["site"] = pa.array(np.array(world.sites)[np.array(world.robot_site)[fleet.robot]])
    else:
        cols["deployment"] = pa.nulls(n, pa.string())
        cols["started_at"] = pa.nulls(n, pa.timestamp("us", tz="UTC"))
        cols["robot_id"] = pa.nulls(n, pa.string())
        cols["site"] = pa.nulls(n, pa.string())
    names = np.array([o.name for o in world.objects] + [world.new_object.name])
    cols[f"ctx.{world.object_ctx}"] = pa.array(names[obj])
    cols[f"ctx.{world.depth[0]}"] = pa.array(np.round(_depth(inputs), 4))
    for p in world.params:
        values = p.scale * inputs.params[:, ROLE_INDEX[p.role]]
        cols[f"param.{p.name}"] = pa.array(values, pa.float64(), mask=~none)
    config, hardware = world.sys_names
    if fleet is not None:
        release = np.searchsorted(np.array(world.config_rollouts), fleet.deployment, "right") - 1
        hashes = np.array([f"cfg-{hashlib.sha1(f'{world.seed}:{r}'.encode()).hexdigest()[:8]}"
                           for r in range(len(world.config_rollouts))])
        cols[f"sys.{config}"] = pa.array(hashes[release])
        cols[f"sys.{hardware}"] = pa.array(np.array(world.hardware)[fleet.robot])
    else:
        cols[f"sys.{config}"] = pa.nulls(n, pa.string())
        cols[f"sys.{hardware}"] = pa.nulls(n, pa.string())
    return pa.table(cols)


def _signals(world: World, run: Run, ids: np.ndarray, real: bool,
             rng: np.random.Generator) -> list[pa.Table]:
    """Long-layout parts of ``_BLOCK`` episodes, each channel at its own rate, rows in the
    ``episode_id, channel, t`` order the dataset writer keeps."""
    channels = sorted(world.channels, key=lambda c: c.name)
    names = pa.array([c.name for c in channels])
    parts = []
    for start in range(0, len(ids), _BLOCK):
        rows = slice(start, start + _BLOCK)
        end = run.end[rows]
        eps, codes, stamps, values = [], [], [], []
        for code, ch in enumerate(channels):
            rate = ch.rate_real if real else ch.rate_sim
            if rate is None:
                continue
            if ch.role in ("det_conf", "brightness", "target_est", "loc_innov", "held_est"):
                rate = world.fps_real if real else world.fps_sim  # the camera's frames
            steps = np.arange(0, run.series[ch.role].shape[1], round(1 / (rate * DT)))
            series = run.series[ch.role][rows][:, steps]
            t = steps * DT
            ep, k = np.nonzero((t[None, :] <= end[:, None] + 1e-9) & np.isfinite(series))
            stamp = t[k]
            if real:  # a real recorder's clock: a little late, never out of order
                stamp = np.where(k > 0, stamp + rng.uniform(0, 0.3 * DT, len(k)), stamp)
            eps.append(ep)
            codes.append(np.full(len(ep), code))
            stamps.append(stamp)
            values.append(series[ep, k])
        episode, channel = np.concatenate(eps), np.concatenate(codes)
        stamp = np.concatenate(stamps)
        order = np.lexsort((stamp, channel, episode))
        parts.append(pa.table({
            "episode_id": pa.array(ids[rows]).take(pa.array(episode[order])),
            "t": pa.array(stamp[order]),
            "channel": names.take(pa.array(channel[order])),
            "value": pa.array(np.concatenate(values)[order], pa.float64())}))
    return parts


def _one_file(dataset: Path, real_ids: np.ndarray, started_us: np.ndarray,
              real: list[pa.Table], sim: list[pa.Table]) -> None:
    """Replace the parts by one ``signals.parquet`` in recording-time order, as a logger
    writes it: real episodes interleaved by wall clock, then the sim batch."""
    table = pa.concat_tables(real)
    index = EpisodeIndex(list(real_ids)).rows(table["episode_id"])
    clock = started_us[index] + np.round(table["t"].to_numpy() * 1e6).astype(np.int64)
    table = table.take(pa.array(np.argsort(clock, kind="stable")))
    signals = pa.concat_tables([table, *sim])
    with atomic_files(dataset, replace=True) as stage:
        for f in dataset.iterdir():
            if f.is_file():
                (stage / f.name).write_bytes(f.read_bytes())
        pq.write_table(signals, stage / "signals.parquet", write_page_checksum=True)

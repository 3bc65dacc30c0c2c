"""Telemetry for a block of episodes: phase-clock templates + parameter effects + noise.

Every channel is computed in its kind's *link space* (identity, logit for confidences, log for
positive errors) as ``template(phase) + envelope(phase) * offset(episode) + failure + spikes +
noise`` and mapped back, so effects stay additive yet bounded quantities stay in bounds. The
arrays of one block are flat: one entry per sample of every episode of the block.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from sim2real.demo.synthetic.fleet import Episodes, ctx_values, phase_bounds, phase_to_time
from sim2real.demo.synthetic.spec import FAILURE_MODES, ChannelSpec, WorldSpec

__all__ = ["LINKS", "block_signals", "sample_counts"]

LINKS: dict[str, str] = {
    "det_conf": "logit", "pose_err": "log", "slip": "log", "track_err": "log", "dropped": "count",
}
# Which part of the motion a kind's parameter offsets act on (the rest is "all").
_ENVELOPES: dict[str, str] = {
    "joint_pos": "hold", "joint_torque": "hold", "grip_force": "hold", "grip_width": "hold",
    "slip": "transport", "joint_vel": "move", "cmd_vel": "move",
}
# Failure signatures: kind -> (size, shape), "step" added from the failure on, "pulse" a
# decaying transient. Modes in _LOSES_OBJECT also empty the gripper: what the carried object
# causes (its weight on the joints, grip force, slip) fades out and the fingers close fully.
_SIGNATURES: dict[str, dict[str, tuple[float, str]]] = {
    "grasp_miss": {"track_err": (0.4, "pulse")},
    "bump_drop": {"track_err": (2.0, "pulse"), "joint_torque": (1.2, "pulse"),
                  "slip": (2.5, "pulse")},
    "slip_drop": {"slip": (2.0, "pulse")},
    "collision": {"track_err": (2.5, "step"), "joint_torque": (1.5, "pulse"),
                  "det_conf": (-0.5, "pulse")},
    "knock_over": {"pose_err": (1.5, "step"), "det_conf": (-1.0, "step"),
                   "track_err": (0.8, "pulse")},
}
_LOSES_OBJECT = ("grasp_miss", "bump_drop", "slip_drop", "knock_over")
_CARRIED = ("joint_pos", "joint_torque", "grip_force", "slip")
# Two joints of the same kind move differently: amplitude of the reach and of the carry.
_REACH = (1.0, -0.7, 0.5, 0.8)
_CARRY = (0.6, 0.9, -0.4, 0.3)
_SYSTEM_KINDS = ("latency", "dropped")
_NON_NEGATIVE = ("grip_force", "grip_width", "brightness", "contrast", "latency")


def g(z: np.ndarray) -> np.ndarray:
    """The mild, monotone nonlinearity every standardised parameter goes through."""
    return z + 0.25 * z * np.abs(z)


def sample_counts(ep: Episodes, rate_hz: float) -> np.ndarray:
    """Samples per episode: the recorded duration at ``rate_hz``, both ends included."""
    recorded = ep.duration / (1 + ep.clock_warp)
    return np.floor(recorded * rate_hz).astype(np.int64) + 1


@dataclass(frozen=True)
class _Clock:
    """Per-sample time and motion descriptors of a block (flat arrays)."""

    ep: np.ndarray
    t: np.ndarray
    t_true: np.ndarray
    phase: np.ndarray
    bounds: np.ndarray
    duration: np.ndarray

    def ss(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Smoothstep of the phase from ``a`` to ``b`` and its derivative per true second."""
        width = b - a
        x = np.clip((self.phase - a) / width, 0, 1)
        return x * x * (3 - 2 * x), 6 * x * (1 - x) / (width * self.duration)

    def b(self, k: int) -> np.ndarray:
        return self.bounds[:, k]


def _clock(spec: WorldSpec, ep: Episodes, rate: float, counts: np.ndarray,
           rng: np.random.Generator) -> _Clock:
    n = int(counts.sum())
    idx = np.repeat(np.arange(len(ep)), counts)
    k = np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts)
    t = k / rate
    if ep.is_real and spec.real_jitter > 0:
        jitter = np.clip(rng.normal(0, spec.real_jitter, n), -0.4, 0.4) / rate
        t = np.where(k > 0, t + jitter, 0.0)
    t_true = t * (1 + ep.clock_warp[idx])
    u = np.clip(t_true / ep.duration[idx], 0, 1)
    warp = ep.phase_warp[idx]
    phase = u + warp * np.sin(np.pi * u) / np.pi
    bounds = phase_bounds(spec, ep.task)[idx]
    return _Clock(idx, t, t_true, phase, bounds, ep.duration[idx])


def _motion(c: _Clock) -> dict[str, np.ndarray]:
    """Shared motion primitives: reach, carry, hold (object in hand), transport, speed."""
    reach, d_reach = c.ss(c.b(0), c.b(1))
    carry, d_carry = c.ss(c.b(2), c.b(3))
    close, _ = c.ss(c.b(1), (c.b(1) + c.b(2)) / 2)
    release, _ = c.ss(c.b(3), (c.b(3) + c.b(4)) / 2)
    tr_in, _ = c.ss(c.b(2), c.b(2) + 0.04)
    tr_out, _ = c.ss(c.b(3) - 0.04, c.b(3))
    speed = (d_reach * (c.b(1) - c.b(0)) + d_carry * (c.b(3) - c.b(2))) * c.duration / 1.5
    prims = {"reach": reach, "d_reach": d_reach, "carry": carry, "d_carry": d_carry,
             "hold": close * (1 - release), "transport": tr_in * (1 - tr_out), "move": speed,
             "release": release, "phase": c.phase}
    # float32 from here on: the channels are stored as float32 and this halves the traffic.
    return {k: v.astype(np.float32) for k, v in prims.items()}


def _template(kind: str, variant: int, m: dict[str, np.ndarray]) -> np.ndarray:
    """The noise-free, parameter-free shape of a kind, in link space."""
    a, b = _REACH[variant % 4], _CARRY[variant % 4]
    shapes: dict[str, Callable[[], np.ndarray]] = {
        "joint_pos": lambda: a * m["reach"] - b * m["carry"] + 0.1 * variant,
        "joint_vel": lambda: a * m["d_reach"] - b * m["d_carry"],
        "joint_torque": lambda: (0.2 + 0.8 * m["hold"]
                                 + 0.15 * np.sin(2 * np.pi * m["phase"] + variant)),
        "grip_force": lambda: m["hold"],
        "grip_width": lambda: 1.0 - 0.6 * m["hold"],
        "slip": lambda: np.log(0.01) + 1.0 * m["transport"],
        "track_err": lambda: np.log(0.005) + 1.0 * m["move"],
        "det_conf": lambda: 2.5 - 0.7 * m["transport"],
        "pose_err": lambda: np.log(0.004) + 0.5 * m["transport"],
        "brightness": lambda: 0.5 + 0.02 * np.sin(2 * np.pi * m["phase"]),
        "contrast": lambda: 0.35 - 0.03 * m["hold"],
        "cmd_vel": lambda: 1.1 * (a * m["d_reach"] - b * m["d_carry"]),
        "cmd_grip": lambda: 1.0 - m["hold"],
        "latency": lambda: np.full_like(m["phase"], 12.0),
        "dropped": lambda: np.full_like(m["phase"], 0.02),
    }
    return shapes[kind]()


def _offsets(spec: WorldSpec, ep: Episodes) -> dict[str, np.ndarray]:
    """Per-episode offset of each kind, from parameters, context and active causes."""
    n = len(ep)
    out: dict[str, np.ndarray] = {}

    def add(effects: Mapping[str, float], weight: np.ndarray) -> None:
        for kind, coef in effects.items():
            out[kind] = out.get(kind, np.zeros(n)) + coef * weight

    for j, p in enumerate(spec.params):
        add(p.effects, g((ep.params[:, j] - p.nominal) / (p.high - p.low)))
    for j, cn in enumerate(spec.ctx_numeric):
        mid = (cn.low + cn.high) / 2
        add(cn.effects, g((ep.ctx_num[:, j] - mid) / (cn.high - cn.low)))
    for j, cat in enumerate(spec.ctx_categorical):
        for code in range(len(ctx_values(spec, j))):
            # Values only causes bring (new_ctx) carry their effects on the cause instead.
            item: Mapping[str, float] = cat.items[code].effects if code < len(cat.items) else {}
            add(item, (ep.ctx_cat[:, j] == code).astype(float))
    for ci, cause in enumerate(spec.causes):
        add(cause.effects, (ep.cause == ci).astype(float))
    return out


def _failure_terms(ep: Episodes, c: _Clock) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Additive failure effects per kind, and the per-sample "object still in hand" factor."""
    add: dict[str, np.ndarray] = {}
    keep = np.ones(len(c.t), np.float32)
    failing = np.isfinite(ep.fail_u)
    t_fail = np.where(failing, phase_to_time(np.nan_to_num(ep.fail_u), ep.phase_warp)
                      * ep.duration, np.inf)
    since = c.t_true - t_fail[c.ep]
    step = np.clip(since / 0.15, 0, 1).astype(np.float32)
    pulse = np.where(since >= 0, np.exp(-np.clip(since, 0, None) / 0.4), 0.0).astype(np.float32)
    mode = ep.mode[c.ep]
    for m, name in enumerate(FAILURE_MODES):
        on = mode == m
        if not on.any():
            continue
        for kind, (size, shape) in _SIGNATURES[name].items():
            term = size * (step if shape == "step" else pulse) * on
            add[kind] = add.get(kind, 0.0) + term
        if name in _LOSES_OBJECT:
            keep = np.where(on, 1 - step, keep)
    return add, keep


def _spikes(spec: WorldSpec, ep: Episodes, c: _Clock) -> tuple[np.ndarray, np.ndarray]:
    """Latency (ms) and drop-rate added by system causes' spikes, per sample."""
    latency, drops = np.zeros(len(c.t)), np.zeros(len(c.t))
    if not np.isfinite(ep.spike_u).any():
        return latency, drops
    spike_ms = np.array([x.latency_spike_ms for x in spec.causes] + [0.0])[ep.cause]
    drop_rate = np.array([x.drop_rate for x in spec.causes] + [0.0])[ep.cause]
    for k in range(ep.spike_u.shape[1]):
        centre = (np.nan_to_num(ep.spike_u[:, k], nan=-9.0) * ep.duration)[c.ep]
        width = np.nan_to_num(ep.spike_w[:, k], nan=1.0)[c.ep]
        bump = np.exp(-0.5 * ((c.t_true - centre) / (0.5 * width)) ** 2) * ep.strength[c.ep]
        latency += spike_ms[c.ep] * bump
        drops += drop_rate[c.ep] * bump
    return latency, drops


def _channel(ch: ChannelSpec, base: np.ndarray, noise: np.ndarray, keep: np.ndarray,
             rng: np.random.Generator) -> np.ndarray:
    """Add noise and map a channel from link space to its units."""
    link = LINKS.get(ch.kind, "identity")
    if link == "count":
        return rng.poisson(np.clip(base, 0, None)).astype(np.float32)
    value = base + noise
    if link == "logit":
        value = 1 / (1 + np.exp(-value))
    elif link == "log":
        value = np.exp(value)
    if ch.kind == "grip_width":
        value = value * keep  # an empty gripper closes fully
    if link == "identity" and ch.kind in _NON_NEGATIVE:
        value = np.clip(value, 0, None)
    return (ch.scale * value).astype(np.float32)


def block_signals(spec: WorldSpec, ep: Episodes, ids: np.ndarray,
                  rng: np.random.Generator) -> pa.Table:
    """Signals of one block of episodes of one source, as an Arrow table.

    Columns: ``episode_id``, ``t`` (float64, recorded seconds), then one float32 column per
    channel in spec order; system channels are null on sim rows.
    """
    rate = spec.real_rate_hz if ep.is_real else spec.sim_rate_hz
    counts = sample_counts(ep, rate)
    c = _clock(spec, ep, rate, counts, rng)
    motion = _motion(c)
    offsets = _offsets(spec, ep)
    fail_add, keep = _failure_terms(ep, c)
    spike_ms, spike_drop = _spikes(spec, ep, c)
    # What the object causes fades once it is lost.
    carried = {**motion, "hold": motion["hold"] * keep, "transport": motion["transport"] * keep}
    columns: dict[str, pa.Array] = {
        # An Arrow take of the block's few IDs: far cheaper than converting repeated strings.
        "episode_id": pa.array(ids, pa.string()).take(pa.array(c.ep)), "t": pa.array(c.t)}
    for ch in spec.channels:
        if ch.kind in _SYSTEM_KINDS and not ep.is_real:
            columns[ch.name] = pa.nulls(len(c.t), pa.float32())
            continue
        m = carried if ch.kind in _CARRIED else motion
        base = _template(ch.kind, ch.variant, m)
        envelope = m[_ENVELOPES[ch.kind]] if ch.kind in _ENVELOPES else 1.0
        # Episodes differ a little beyond their parameters (wear, calibration, placement).
        per_episode = (offsets.get(ch.kind, 0.0)
                       + rng.normal(0, 0.3 * ch.noise, len(ep))).astype(np.float32)
        base = base + envelope * per_episode[c.ep]
        base = base + fail_add.get(ch.kind, 0.0)
        if ch.kind == "latency":
            base = base + spike_ms
        elif ch.kind == "dropped":
            base = base + spike_drop
        elif ch.kind == "track_err":
            base = base + 0.01 * spike_ms  # late commands -> the arm lags its reference
        noise = ch.noise * rng.standard_normal(len(c.t), dtype=np.float32)
        columns[ch.name] = pa.array(_channel(ch, base, noise, keep, rng))
    return pa.table(columns)

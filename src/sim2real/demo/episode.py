"""One pick-and-place episode in MuJoCo: the function both simulation and reality run.

Simulation rollouts call :func:`simulate_episode` with domain-randomised parameters;
"reality" calls it with hidden parameter values and a :class:`SystemProfile` (latency
jitter and spikes, dropped messages), which only real robots have. So a calibration that
searches the parameters of this function can recover what reality hid.
"""

from __future__ import annotations

import math
import struct
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import mujoco
import numpy as np
import pyarrow as pa

from sim2real.demo.controller import Command, Controller, Phase
from sim2real.demo.perception import LIGHT_SETTINGS, Detector, Frame
from sim2real.demo.telemetry import Recorder
from sim2real.demo.world import (
    BIN_CENTER,
    BIN_HALF,
    CATALOGUE,
    HEAD_HOME_Z,
    NOVEL_OBJECTS,
    PAD_BELOW_HEAD,
    PARAM_RANGES,
    TIMESTEP,
    apply_params,
    load_model,
)

__all__ = ["CONTROL_HZ", "EpisodeResult", "InitState", "SystemProfile", "simulate_episode"]

CONTROL_HZ = 50.0
T_MAX = 6.0
_SUBSTEPS = round(1.0 / CONTROL_HZ / TIMESTEP)
_PERCEPTION_EVERY = 5  # ticks: the detector runs at 10 Hz
_DRIVE_LIMIT_N = 40.0  # a drive pushing this hard is blocked by something
_IMPACT_N = 15.0  # a gripper-on-table/bin contact force this large is a crash
_AFTER_FAILURE_S = 0.3  # the robot's stop takes a moment; telemetry continues meanwhile
_SETTLE_S = 0.3
# The planner knows only the training catalogue: a new class is planned as the closest one.
_PLANNED_AS = {"bottle": "cyl_s"}
# Python 3.11 serves each enum member through a descriptor call: the monitor, which runs
# every tick, compares against these plain references instead.
_TRANSPORT, _LOWER, _DONE = Phase.TRANSPORT, Phase.LOWER, Phase.DONE


@dataclass(frozen=True)
class InitState:
    """Where the object lies at the start (metres, radians)."""

    object_xy: tuple[float, float]
    object_yaw: float = 0.0


@dataclass(frozen=True)
class SystemProfile:
    """The real-only software effects between the policy and the drives.

    Args:
        jitter_ms: standard deviation of the loop latency around the actuator latency.
        spike_rate_hz: how often latency bursts start (per second).
        spike_ms: extra latency during a burst.
        spike_s: how long a burst lasts.
        drop_prob: chance a command message is lost (the drives hold the previous one);
            five times higher during a burst.
    """

    jitter_ms: float = 2.0
    spike_rate_hz: float = 0.0
    spike_ms: float = 0.0
    spike_s: float = 0.4
    drop_prob: float = 0.002


@dataclass(frozen=True)
class EpisodeResult:
    """Telemetry (a signals table, see :mod:`sim2real.demo.telemetry`) and the outcome."""

    telemetry: pa.Table
    outcome: str
    failure_time: float | None
    failure_label: str | None


@dataclass(frozen=True)
class _Ids:
    obj_qpos: int
    obj_dof: int
    # (geom1, geom2) of a gripper geom (pads, palm) touching the table or the bin, either
    # way round: a contact between them is a crash when it pushes hard.
    crash_pairs: frozenset[tuple[int, int]]
    # Above this z joint position no gripper geom reaches down to the top of the table or
    # the bin, so no crash contact can exist and the contact scan is skipped.
    clear_z: float

    @classmethod
    def of(cls, m: mujoco.MjModel, d: mujoco.MjData) -> _Ids:
        """The ids of ``m``; ``d`` is scratch data for the geometry (its state is lost)."""
        def gid(name: str) -> int:
            return int(mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, name))

        jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, "obj")
        env = [gid(g) for g in ["table", "bin_floor"]
               + [f"bin_wall_{s}" for s in ("px", "nx", "py", "ny")]]
        gripper = [gid(g) for g in ("pad_l", "pad_r", "palm")]
        pairs = {(g, e) for g in gripper for e in env}
        crash_pairs = frozenset(pairs | {(e, g) for g, e in pairs})
        return cls(int(m.jnt_qposadr[jid]), int(m.jnt_dofadr[jid]), crash_pairs,
                   _clear_z(m, d, gripper, env))


def _clear_z(m: mujoco.MjModel, d: mujoco.MjData, gripper: list[int], env: list[int]) -> float:
    """The z joint position above which the ``gripper`` geoms clear every ``env`` geom.

    The gripper only translates (the gantry's and fingers' joints all slide), so each of
    its geoms' lowest point is its height at the start pose plus the z joint's travel;
    the table and bin do not move. Contacts need the geoms' margins to overlap.
    """
    mujoco.mj_resetData(m, d)
    mujoco.mj_kinematics(m, d)
    z_joint = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, "z")
    for g in gripper:
        body = int(m.geom_bodyid[g])
        while body:
            joints = range(m.body_jntadr[body], m.body_jntadr[body] + m.body_jntnum[body])
            if any(m.jnt_type[j] != mujoco.mjtJoint.mjJNT_SLIDE for j in joints):
                msg = f"gripper geom {g} can rotate: the crash scan guard assumes it cannot"
                raise ValueError(msg)
            body = int(m.body_parentid[body])

    def z_range(g: int) -> tuple[float, float]:
        # World-z extent of the geom's bounding box (given in the geom's frame).
        centre, half = m.geom_aabb[g, :3], m.geom_aabb[g, 3:]
        rot = d.geom_xmat[g].reshape(3, 3)
        z = float(d.geom_xpos[g, 2] + rot[2] @ centre)
        reach = float(np.abs(rot[2]) @ half) + float(m.geom_margin[g])
        return z - reach, z + reach

    gripper_bottom = min(z_range(g)[0] for g in gripper)
    env_top = max(z_range(e)[1] for e in env)
    return env_top - gripper_bottom + float(d.qpos[m.jnt_qposadr[z_joint]])


def simulate_episode(
    params: Mapping[str, float],
    context: Mapping[str, object],
    init_state: InitState,
    seed: int,
    rate_hz: float = CONTROL_HZ,
    *,
    system: SystemProfile | None = None,
    episode_id: str = "episode",
) -> EpisodeResult:
    """Run one pick-and-place episode and record its telemetry.

    Args:
        params: physical and sensing parameters (names of ``world.PARAM_RANGES``); missing
            ones take their nominal value.
        context: ``object_type`` (catalogue name), ``light_setting`` (``perception.
            LIGHT_SETTINGS``) and ``clutter`` (0-2 other objects around).
        init_state: the object's starting pose.
        seed: seeds the detector noise and the system effects.
        rate_hz: telemetry sample rate (at most the 50 Hz control rate).
        system: real-robot system effects; ``None`` for a simulation rollout (and then the
            system channels are not recorded).
        episode_id: written into the telemetry's ``episode_id`` column.

    Returns:
        The telemetry and the outcome, with the failure's time and symptom label.
    """
    values = {k: p.nominal for k, p in PARAM_RANGES.items()} | dict(params)
    obj_type = str(context.get("object_type", "box_m"))
    clutter = int(context.get("clutter", 0))  # type: ignore[call-overload]
    light = values["light_level"] * LIGHT_SETTINGS[str(context.get("light_setting", "standard"))]
    # Independent streams for the camera and for the system effects: a counterfactual twin
    # that differs only in its system profile (or a sim rollout, which has none) then sees
    # exactly the same detector noise, so any difference in outcome is the system's doing.
    sensor_seq, system_seq = np.random.SeedSequence(seed).spawn(2)
    rng = np.random.default_rng(sensor_seq)
    model = load_model(obj_type)
    apply_params(model, obj_type, values)
    data, ids = _workspace(obj_type)
    mujoco.mj_resetData(model, data)
    _place_object(data, ids, obj_type, init_state)
    mujoco.mj_forward(model, data)
    run = _Run(model, data, ids, values["actuator_latency_ms"], system,
               np.random.default_rng(system_seq))
    detector = Detector(light, values["camera_noise"], clutter, obj_type not in NOVEL_OBJECTS, rng)
    controller = Controller(_PLANNED_AS.get(obj_type, obj_type), 1.0 / CONTROL_HZ)
    recorder = Recorder(min(rate_hz, CONTROL_HZ), with_system=system is not None)
    return run.loop(controller, detector, recorder, episode_id)


@cache
def _workspace(object_type: str) -> tuple[mujoco.MjData, _Ids]:
    """The data a rollout of ``object_type`` runs in, and the ids it looks up.

    Like the model (see :mod:`sim2real.demo.world`), it is made once per process and
    reused: a fresh ``MjData`` allocates and clears MuJoCo's whole arena, which costs
    more than a short episode's bookkeeping, while ``mj_resetData`` restores exactly the
    state a fresh one starts in. So rollouts in one process run one at a time.
    """
    model = load_model(object_type)
    data = mujoco.MjData(model)
    return data, _Ids.of(model, data)


def _place_object(data: mujoco.MjData, ids: _Ids, obj_type: str, init: InitState) -> None:
    a = ids.obj_qpos
    data.qpos[a:a + 3] = [init.object_xy[0], init.object_xy[1],
                          CATALOGUE[obj_type].half_height + 1e-4]
    half = init.object_yaw / 2.0
    data.qpos[a + 3:a + 7] = [np.cos(half), 0.0, 0.0, np.sin(half)]


class _Run:
    """The loop of one episode: latency pipeline, physics, failure monitor, recording.

    The state the loop reads is copied out of MuJoCo once per tick as plain floats
    (``q`` positions, ``f`` actuator forces; velocities only for a sample): per-tick numpy
    calls on 3-vectors cost more than the arithmetic they do, which is the same IEEE
    arithmetic either way.
    """

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, ids: _Ids,
                 latency_ms: float, system: SystemProfile | None,
                 rng: np.random.Generator) -> None:
        self.m, self.d, self.ids = model, data, ids
        self.latency_ms = latency_ms
        self.system = system
        self.rng = rng
        self.step = 0
        self.pending: deque[tuple[int, bytes]] = deque()  # (step due, packed ctrl)
        self.last_apply = 0
        self.spike_until = -1.0
        self.obj_z0 = float(data.qpos[ids.obj_qpos + 2])
        self.holding = False
        self.failure: tuple[float, str] | None = None
        self.done_at: float | None = None
        self.dropped = 0  # command messages lost so far in this episode
        # Live views into the data, fetched once: each attribute access costs a call.
        self.badqvel = data.warning[mujoco.mjtWarning.mjWARN_BADQVEL]
        self.qpos, self.qvel, self.force = data.qpos, data.qvel, data.actuator_force
        # Commands travel packed as the bytes of ``data.ctrl``: applying one is then a copy,
        # where assigning a tuple to the array would first make numpy inspect the tuple.
        self.ctrl = data.ctrl
        self.ctrl_bytes = memoryview(data.ctrl).cast("B")
        self.pack_ctrl = struct.Struct(f"={model.nu}d").pack
        self.contact_force = np.zeros(6)

    def loop(self, controller: Controller, detector: Detector, recorder: Recorder,
             episode_id: str) -> EpisodeResult:
        frame: Frame | None = None
        n_ticks = round(T_MAX * CONTROL_HZ)
        dt = 1.0 / CONTROL_HZ
        obj = self.ids.obj_qpos
        qpos, force = self.qpos, self.force
        q = qpos.tolist()
        for k in range(n_ticks):
            t = k / CONTROL_HZ
            fresh = k % _PERCEPTION_EVERY == 0
            if fresh:
                frame = detector.observe(q[obj], q[obj + 1])
            cmd = controller.step(_pad(q), frame if fresh else None)
            latency = self._send(t, cmd)
            self._physics()
            q, f = qpos.tolist(), force.tolist()
            self._monitor(t + dt, controller.phase, q, f)
            if recorder.due(t):
                assert frame is not None  # the first tick always observes
                recorder.add(t, self._sample(cmd, frame, latency, q, f))
            if self._finished(t):
                break
        if self.failure is None and self.done_at is None:
            self.failure = (T_MAX, "timeout")
        table = recorder.table(episode_id)
        if self.failure is None:
            return EpisodeResult(table, "success", None, None)
        return EpisodeResult(table, "failure", round(self.failure[0], 4), self.failure[1])

    def _send(self, t: float, cmd: Command) -> float:
        """Queue the command behind the actuator latency; real robots add system effects.

        Returns the loop latency this message saw (ms); a lost message is counted.
        """
        latency = self.latency_ms
        drop_p = 0.0
        sysp = self.system
        if sysp is not None:
            if sysp.spike_rate_hz > 0 and self.rng.random() < sysp.spike_rate_hz / CONTROL_HZ:
                self.spike_until = t + sysp.spike_s
            burst = t < self.spike_until
            latency += abs(self.rng.normal(0.0, sysp.jitter_ms)) + (sysp.spike_ms if burst else 0.0)
            drop_p = sysp.drop_prob * (5.0 if burst else 1.0)
        if drop_p > 0 and self.rng.random() < drop_p:
            self.dropped += 1
            return latency
        grip = 0.05 * cmd.grip  # finger joint target: 0 open, 0.05 closed on the centre
        # Messages arrive in order: a late one holds back those behind it.
        apply = max(self.step + round(latency / 1000.0 / TIMESTEP), self.last_apply)
        self.last_apply = apply
        self.pending.append((apply, self.pack_ctrl(*cmd.vel, grip, grip)))
        return latency

    def _physics(self) -> None:
        """Step through one control tick, applying each queued command when it is due."""
        # nstep goes positionally: as a keyword it costs the binding a string match per call.
        m, d, pending, step = self.m, self.d, self.pending, self.step
        end = step + _SUBSTEPS
        while pending and pending[0][0] < end:
            at, ctrl = pending.popleft()
            if at > step:
                mujoco.mj_step(m, d, at - step)
                step = at
            self.ctrl_bytes[:] = ctrl
        if end > step:
            mujoco.mj_step(m, d, end - step)
        self.step = end

    def _monitor(self, t: float, phase: Phase, q: list[float], f: list[float]) -> None:
        """Turn what the physics did into the symptom an operator would log."""
        if self.failure is not None:
            return
        if self.badqvel.number > 0:
            # The object was squeezed out so violently that the solver gave up: in the real
            # cell it flies off the table. MuJoCo has reset the state, so stop here.
            self.failure = (t, "dropped_object")
        elif self._crashed(q, f):
            self.failure = (t, "collision")
        elif phase == _TRANSPORT and not self.holding:
            if q[self.ids.obj_qpos + 2] > self.obj_z0 + 0.08:
                self.holding = True
            else:
                self.failure = (t, "missed_pick")
        elif self.holding and phase in (_TRANSPORT, _LOWER):
            if math.dist(self._obj(q), _pad(q)) > 0.08:
                self.failure = (t, "dropped_object")
        elif phase == _DONE and self.done_at is None:
            self.done_at = t
        elif (self.done_at is not None and t >= self.done_at + _SETTLE_S
              and not _in_bin(self._obj(q))):
            self.failure = (t, "dropped_object")

    def _obj(self, q: list[float]) -> tuple[float, float, float]:
        a = self.ids.obj_qpos
        return (q[a], q[a + 1], q[a + 2])

    def _crashed(self, q: list[float], f: list[float]) -> bool:
        if max(abs(f[0]), abs(f[1]), abs(f[2])) > _DRIVE_LIMIT_N:
            return True
        if q[2] > self.ids.clear_z or self.d.ncon == 0:
            return False
        crash_pairs = self.ids.crash_pairs
        for i, pair in enumerate(self.d.contact.geom.tolist()):
            if tuple(pair) in crash_pairs:
                mujoco.mj_contactForce(self.m, self.d, i, self.contact_force)
                if self.contact_force[0] > _IMPACT_N:
                    return True
        return False

    def _finished(self, t: float) -> bool:
        if self.badqvel.number > 0:
            return True
        if self.failure is not None:
            return t >= self.failure[0] + _AFTER_FAILURE_S
        return self.done_at is not None and t >= self.done_at + _SETTLE_S + 0.02

    def _sample(self, cmd: Command, frame: Frame, latency: float, q: list[float],
                f: list[float]) -> tuple[float, ...]:
        """One telemetry row, in the order of ``telemetry.CHANNELS``."""
        v = self.qvel.tolist()
        o = self.ids.obj_dof
        slip = math.dist(v[o:o + 3], v[:3]) if cmd.grip > 0.5 else 0.0
        row = (
            q[0], q[1], q[2],  # x_pos, y_pos, z_pos
            v[0], v[1], v[2],  # x_vel, y_vel, z_vel
            f[0], f[1], f[2],  # x_force, y_force, z_force
            2.0 * (0.05 - 0.5 * (q[3] + q[4])),  # grip_width
            0.5 * (abs(f[3]) + abs(f[4])),  # grip_force
            slip,  # obj_slip
            math.dist(self.ctrl[:3].tolist(), v[:3]),  # tracking_err
            frame.confidence, frame.error_m * 1000.0,  # det_confidence, pose_err_mm
            frame.brightness, frame.contrast,  # img_brightness, img_contrast
            *cmd.vel, cmd.grip,  # cmd_x, cmd_y, cmd_z, cmd_grip
        )
        if self.system is None:
            return row
        # The driver's diagnostics counter, as real drivers report it: cumulative since the
        # episode started, not a 0/1 flag per message.
        return (*row, latency, float(self.dropped))  # loop_latency_ms, dropped_msgs


def _pad(q: list[float]) -> tuple[float, float, float]:
    """The pad centre (world metres) from the gantry joints."""
    return (q[0], q[1], HEAD_HOME_Z + q[2] - PAD_BELOW_HEAD)


def _in_bin(obj: tuple[float, float, float]) -> bool:
    return (abs(obj[0] - BIN_CENTER[0]) < BIN_HALF and abs(obj[1] - BIN_CENTER[1]) < BIN_HALF
            and obj[2] < 0.08)

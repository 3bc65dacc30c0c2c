"""A MuJoCo hopper as a sim2real simulator adapter, replayed open-loop.

The model is a planar one-legged hopper with the classic hopper's link lengths and
masses (torso 3.534 kg, thigh 3.927, leg 2.714, foot 5.089), written out here. A rollout
starts from the recorded first state, feeds back the recorded motor commands and ends
when the hopper falls (torso below ``healthy_z`` or pitched beyond ``healthy_angle``).
No noise: the adapter is deterministic, so sim2real replays each episode once.
"""

from __future__ import annotations

from collections.abc import Mapping

import mujoco
import numpy as np
import pyarrow as pa

from sim2real.sim import RolloutRequest, RolloutResult

__all__ = ["COMMANDS", "MASSES", "STATE", "HopperAdapter"]

_XML = """
<mujoco model="hopper_like">
  <compiler angle="radian"/>
  <option timestep="0.002"/>
  <default>
    <joint limited="true" armature="1" damping="1"/>
    <geom condim="1" margin="0.001" friction="0.9 0.005 0.0001" solimp="0.8 0.8 0.01"/>
    <motor ctrllimited="true" ctrlrange="-1 1" gear="200"/>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="20 20 0.125" condim="3"/>
    <body name="torso" pos="0 0 1.25">
      <joint name="x" type="slide" axis="1 0 0" pos="0 0 -1.25" limited="false" armature="0"
             damping="0"/>
      <joint name="z" type="slide" axis="0 0 1" pos="0 0 -1.25" ref="1.25" limited="false"
             armature="0" damping="0"/>
      <joint name="pitch" type="hinge" axis="0 1 0" limited="false" armature="0" damping="0"/>
      <geom type="capsule" fromto="0 0 0.2 0 0 -0.2" size="0.05" mass="3.534"/>
      <body name="thigh" pos="0 0 -0.2">
        <joint name="thigh" type="hinge" axis="0 -1 0" range="-2.618 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.45" size="0.05" mass="3.927"/>
        <body name="leg" pos="0 0 -0.7">
          <joint name="leg" type="hinge" axis="0 -1 0" pos="0 0 0.25" range="-2.618 0"/>
          <geom type="capsule" fromto="0 0 0.25 0 0 -0.25" size="0.04" mass="2.714"/>
          <body name="foot" pos="0.13 0 -0.35">
            <joint name="foot" type="hinge" axis="0 -1 0" pos="-0.13 0 0.1"
                   range="-0.785 0.785"/>
            <geom type="capsule" fromto="-0.26 0 0.1 0.13 0 0.1" size="0.06" mass="5.089"
                  friction="2 0.005 0.0001"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="thigh"/>
    <motor joint="leg"/>
    <motor joint="foot"/>
  </actuator>
</mujoco>
"""

# Parameter name (as in the dataset's params.csv, without ``param.``) -> body and the
# classic hopper's mass in kg.
MASSES = {"torso_mass": ("torso", 3.534), "thigh_mass": ("thigh", 3.927),
          "leg_mass": ("leg", 2.714), "foot_mass": ("foot", 5.089)}
_JOINTS = ("x", "z", "pitch", "thigh", "leg", "foot")
STATE = (*_JOINTS, *(f"d{j}" for j in _JOINTS))  # the telemetry channels
COMMANDS = ("a_thigh", "a_leg", "a_foot")

_cache: dict[str, tuple[mujoco.MjModel, np.ndarray, np.ndarray]] = {}  # one per process


def _shared_model() -> tuple[mujoco.MjModel, np.ndarray, np.ndarray]:
    """The model and its original body masses and inertias, built on first use."""
    if "model" not in _cache:
        m = mujoco.MjModel.from_xml_string(_XML)
        _cache["model"] = (m, m.body_mass.copy(), m.body_inertia.copy())
    return _cache["model"]


class HopperAdapter:
    """The hopper, its link masses as parameters, its motor commands replayed open-loop.

    Args:
        healthy_z: torso height (m) below which the hopper has fallen.
        healthy_angle: torso pitch (rad) beyond which it has fallen.
    """

    name = "hopper"
    command_channels: tuple[str, ...] = COMMANDS
    deterministic = True

    def __init__(self, healthy_z: float = 0.7, healthy_angle: float = 0.2) -> None:
        self.healthy_z = float(healthy_z)
        self.healthy_angle = float(healthy_angle)

    def initial_state(self, episode: Mapping[str, object], telemetry: pa.Table) -> dict[str, float]:
        """The first recorded sample of every joint position and velocity."""
        return {k: float(telemetry[k][0].as_py()) for k in STATE}

    def rollout(self, request: RolloutRequest) -> RolloutResult:
        """Replay the commands (one second of zero torque when none are given)."""
        m, mass0, inertia0 = _shared_model()
        for name, (body, nominal) in MASSES.items():
            i = m.body(body).id
            mass = float(request.params.get(name, nominal))
            # Absolute values every time (the model is shared within the process); the
            # inertia scales with the mass: same shape, denser material.
            m.body_mass[i] = mass
            m.body_inertia[i] = inertia0[i] * (mass / mass0[i])
        d = mujoco.MjData(m)
        s = request.init_state
        d.qpos[:] = [s.get(j, 1.25 if j == "z" else 0.0) for j in _JOINTS]
        d.qvel[:] = [s.get(f"d{j}", 0.0) for j in _JOINTS]
        mujoco.mj_forward(m, d)
        cmd = _commands(request)
        dt = 1.0 / request.rate_hz
        steps = max(1, round(dt / m.opt.timestep))
        # Row k is the state at k * dt and the command then applied; the last row's
        # command was never applied, so a recording of n rows replays n - 1 steps.
        rows = [[0.0, *d.qpos, *d.qvel, *cmd[0]]]
        failed_at = None
        for k in range(len(cmd) - 1):
            d.ctrl[:] = cmd[k]
            mujoco.mj_step(m, d, nstep=steps)
            rows.append([(k + 1) * dt, *d.qpos, *d.qvel, *cmd[k + 1]])
            if not self._healthy(d):
                failed_at = round((k + 1) * dt, 9)
                break
        data = np.asarray(rows)
        table = pa.table({n: data[:, j] for j, n in enumerate(("t", *STATE, *COMMANDS))})
        if failed_at is not None:
            return RolloutResult(table, "failure", failed_at)
        return RolloutResult(table, "success", None)

    def _healthy(self, d: mujoco.MjData) -> bool:
        z, pitch = float(d.qpos[1]), float(d.qpos[2])
        return (z > self.healthy_z and abs(pitch) < self.healthy_angle
                and bool(np.all(np.abs(d.qvel) < 100)))


def _commands(request: RolloutRequest) -> np.ndarray:
    if request.commands is None:
        return np.zeros((round(request.rate_hz) + 1, 3))
    return np.stack([np.asarray(request.commands[c].to_numpy(zero_copy_only=False), dtype=float)
                     for c in COMMANDS], axis=1)

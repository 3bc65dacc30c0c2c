"""How to write a simulator adapter: a MuJoCo two-link arm replayed open-loop.

An adapter is any class with the four members of :class:`~sim2real.sim.SimulatorAdapter`;
it does not need to inherit from anything. Make it importable and either pass
``--adapter my_pkg.my_module:MyAdapter`` or register it in your package's metadata::

    [project.entry-points."sim2real.adapters"]
    my_sim = "my_pkg.my_module:MyAdapter"

then ``sim2real calibrate DATASET --cluster C3 --adapter my_sim -o OUT``. The rules:

- ``rollout`` must be deterministic for a request (seed every random effect from
  ``request.seed``): calibration compares candidates on the same seeds.
- Parameters a request leaves out take your simulator's nominal values; names are the
  dataset's ``param.*`` columns without the prefix.
- Return telemetry channels named as in the dataset, so replays and real episodes compare.
- List the command channels in ``command_channels`` if you can replay them open-loop;
  ``request.commands`` then holds the real episode's ``t`` and those channels.
- Keep the instance picklable (rollouts run in worker processes); build heavy state
  lazily, once per process.

This arm is also the parameter-recovery benchmark's simulator (``bench/calibration_bench.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

import mujoco
import numpy as np
import pyarrow as pa

from sim2real.dataset.schema import ParamRange
from sim2real.sim.adapter import RolloutRequest, RolloutResult

__all__ = ["ARM_PARAMS", "ArmAdapter"]

_ARM_XML = """
<mujoco model="two_link_arm">
  <option timestep="0.002" gravity="0 0 -9.81"/>
  <worldbody>
    <body name="link1" pos="0 0 0">
      <joint name="j1" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="1.0"/>
      <body name="link2" pos="0.3 0 0">
        <joint name="j2" type="hinge" axis="0 1 0" damping="0.05"/>
        <geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.018" mass="0.6"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="j1" gear="1"/>
    <motor joint="j2" gear="1"/>
  </actuator>
</mujoco>
"""

# What the "team" randomised in sim: link masses (kg) and joint damping (N m s/rad).
ARM_PARAMS: dict[str, ParamRange] = {
    p.name: p for p in (
        ParamRange("mass1", 0.8, 1.2, 1.0),
        ParamRange("mass2", 0.45, 0.75, 0.6),
        ParamRange("damping", 0.03, 0.08, 0.05),
    )
}


@cache
def _model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(_ARM_XML)


class ArmAdapter:
    """A two-link arm driven by joint torques ``tau1``/``tau2``, replayed open-loop."""

    name = "two_link_arm"
    command_channels: tuple[str, ...] = ("tau1", "tau2")

    def initial_state(self, episode: Mapping[str, object], telemetry: pa.Table) -> dict[str, float]:
        """The recorded first joint angles (the arm starts at rest)."""
        return {k: float(telemetry[k][0].as_py()) for k in ("q1", "q2")}

    def rollout(self, request: RolloutRequest) -> RolloutResult:
        """Replay the torque sequence (zero torque when none is given) and record joints."""
        values = {k: p.nominal for k, p in ARM_PARAMS.items()} | dict(request.params)
        m = _model()
        # Write absolute values each time: the model is shared within the process.
        m.body_mass[1], m.body_mass[2] = values["mass1"], values["mass2"]
        m.dof_damping[:] = values["damping"]
        d = mujoco.MjData(m)
        d.qpos[:] = [request.init_state.get("q1", 0.0), request.init_state.get("q2", 0.0)]
        t_cmd, tau = _commands(request)
        dt_sample = 1.0 / request.rate_hz
        steps = max(1, round(dt_sample / m.opt.timestep))
        rows = []
        for k in range(len(t_cmd)):
            rows.append([k * dt_sample, *d.qpos, *d.qvel])
            d.ctrl[:] = tau[k]
            mujoco.mj_step(m, d, nstep=steps)
        data = np.asarray(rows)
        names = ["t", "q1", "q2", "dq1", "dq2"]
        cols = {n: pa.array(data[:, j]) for j, n in enumerate(names)}
        cols["tau1"], cols["tau2"] = pa.array(tau[:, 0]), pa.array(tau[:, 1])
        return RolloutResult(pa.table(cols), "success", None)


def _commands(request: RolloutRequest) -> tuple[np.ndarray, np.ndarray]:
    if request.commands is None:
        t = np.arange(0.0, 2.0, 1.0 / request.rate_hz)
        return t, np.zeros((t.size, 2))
    c = request.commands
    t = np.asarray(c["t"].to_numpy(zero_copy_only=False), dtype=float)
    tau = np.stack([np.asarray(c[n].to_numpy(zero_copy_only=False), dtype=float)
                    for n in ("tau1", "tau2")], axis=1)
    return t, tau

"""The deployed policy: a scripted pick-and-place state machine.

It works in pad-centre coordinates (world metres), sends velocity commands (a P law with
velocity and acceleration limits) and a grip command, and moves to the next phase only
when its measured state says the current one is done, as a real sequencer would. It never
sees the truth: the object's position comes from the detector, its class from the work
order (an unknown class is planned like the closest known one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple

import numpy as np

from sim2real.demo.perception import Frame
from sim2real.demo.world import BIN_CENTER, CATALOGUE

__all__ = ["Command", "Controller", "Phase"]

_KP = 8.0  # 1/s, position-to-velocity gain close to a waypoint
_VMAX = 0.4  # m/s
_AMAX = 3.0  # m/s^2, command rate limit
_ADEC = 2.0  # m/s^2, planned braking (below _AMAX so the rate limit can follow it)
_TOL = 0.005  # m, a waypoint counts as reached within this distance
_CONF_MIN = 0.5  # frames below this confidence are ignored
_HOVER_Z = 0.2
_CARRY_Z = 0.21
_MIN_GRASP_Z = 0.04  # the pad bottoms stay 8 mm above the table
_CLOSE_S = 0.35
_RELEASE_S = 0.3
_PERCEIVE_S = 0.2


class Phase(IntEnum):
    """The sequencer's phases, in order."""

    PERCEIVE = 0
    APPROACH = 1
    DESCEND = 2
    CLOSE = 3
    LIFT = 4
    TRANSPORT = 5
    LOWER = 6
    RELEASE = 7
    RETREAT = 8
    DONE = 9


# Python 3.11 serves each enum member through a descriptor call: the per-tick code
# compares against these plain references instead.
_PERCEIVE, _APPROACH, _DESCEND, _CLOSE, _LIFT = (
    Phase.PERCEIVE, Phase.APPROACH, Phase.DESCEND, Phase.CLOSE, Phase.LIFT)
_TRANSPORT, _LOWER, _RELEASE, _RETREAT, _DONE = (
    Phase.TRANSPORT, Phase.LOWER, Phase.RELEASE, Phase.RETREAT, Phase.DONE)


class Command(NamedTuple):
    """One control message: axis velocities (m/s) and grip (1 close, 0 open)."""

    vel: tuple[float, float, float]
    grip: float


Vec3 = tuple[float, float, float]


@dataclass
class Controller:
    """The policy for one episode; ``planned_type`` is the class it plans the grasp for.

    It computes in plain floats: it runs every control tick, where numpy's per-call cost
    on 3-vectors would outweigh the arithmetic (which is the same IEEE arithmetic either way).
    """

    planned_type: str
    dt: float
    phase: Phase = Phase.PERCEIVE
    _t_phase: float = 0.0
    _estimates: list[tuple[float, float]] = field(default_factory=list)
    _target: Vec3 = (0.0, 0.0, 0.0)
    _vel: Vec3 = (0.0, 0.0, 0.0)
    _grip: float = 0.0

    @property
    def grasp_z(self) -> float:
        """Pad-centre height it grasps at: the planned object's centre, above the table."""
        return max(CATALOGUE[self.planned_type].half_height, _MIN_GRASP_Z)

    def step(self, pad: Vec3, frame: Frame | None) -> Command:
        """Advance one control tick from the measured pad position and the latest frame."""
        self._t_phase += self.dt
        if frame is not None and frame.confidence >= _CONF_MIN and self.phase == _PERCEIVE:
            self._estimates.append(frame.estimate_xy)
        self._advance(pad)
        moving = self.phase != _PERCEIVE
        step = _AMAX * self.dt
        (tx, ty, tz), (px, py, pz), (vx, vy, vz) = self._target, pad, self._vel
        self._vel = (_axis_vel(tx - px, vx, step, moving), _axis_vel(ty - py, vy, step, moving),
                     _axis_vel(tz - pz, vz, step, moving))
        return Command(self._vel, self._grip)

    def _advance(self, pad: Vec3) -> None:
        reached = math.dist(self._target, pad) < _TOL
        p = self.phase
        if p == _PERCEIVE:
            self._target = pad
            if self._t_phase >= _PERCEIVE_S and self._estimates:
                x, y = np.mean(np.asarray(self._estimates), axis=0).tolist()
                self._go(_APPROACH, (x, y, _HOVER_Z))
        elif p == _APPROACH and reached:
            self._go(_DESCEND, (self._target[0], self._target[1], self.grasp_z))
        elif p == _DESCEND and reached:
            self._grip = 1.0
            self._go(_CLOSE, self._target)
        elif p == _CLOSE and self._t_phase >= _CLOSE_S:
            self._go(_LIFT, (self._target[0], self._target[1], _CARRY_Z))
        elif p == _LIFT and reached:
            self._go(_TRANSPORT, (BIN_CENTER[0], BIN_CENTER[1], _CARRY_Z))
        elif p == _TRANSPORT and reached:
            self._go(_LOWER, (BIN_CENTER[0], BIN_CENTER[1], self.grasp_z + 0.03))
        elif p == _LOWER and reached:
            self._grip = 0.0
            self._go(_RELEASE, self._target)
        elif p == _RELEASE and self._t_phase >= _RELEASE_S:
            self._go(_RETREAT, (BIN_CENTER[0], BIN_CENTER[1], _HOVER_Z))
        elif p == _RETREAT and reached:
            self._go(_DONE, self._target)

    def _go(self, phase: Phase, target: Vec3) -> None:
        self.phase = phase
        self._t_phase = 0.0
        self._target = target


def _axis_vel(err: float, vel: float, step: float, moving: bool) -> float:
    """One axis's next velocity command: towards ``err`` away, changing by at most ``step``."""
    # Comparisons rather than min()/max() calls: this runs for three axes every tick.
    want = 0.0
    if moving:
        dist = abs(err)
        # Brake-in-time profile far away, a P law near the waypoint: fast and stable.
        speed = _KP * dist
        brake = math.sqrt(2.0 * _ADEC * dist)
        if brake < speed:
            speed = brake
        if speed > _VMAX:
            speed = _VMAX
        want = speed if err > 0.0 else -speed if err < 0.0 else 0.0
    change = want - vel
    if change < -step:
        change = -step
    elif change > step:
        change = step
    return vel + change

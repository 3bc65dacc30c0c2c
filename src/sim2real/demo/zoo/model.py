"""The zoo's one physical model, shared by simulation and reality: a mobile picker, time-stepped.

A base drives to a shelf on wheel odometry corrected by camera fixes, its arm reaches for the
object the camera sees, grasps it, carries it back and places it. Simulation and reality run
this same code; they differ only in the inputs: parameter values, context, the network that
delivers camera frames, and contact with things sim does not model. Failures are not drawn:
they happen when the physics says so (a grasp too far from the object, an object sliding out
of the fingers, an arm that stalls or lands off target), so a cause changes an episode's
trajectories only through what it does to the robot.

Every array is ``(n_episodes,)`` or ``(n_episodes, n_steps)``; the loop runs over time steps,
vectorised over episodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DT", "FAILURES", "PARAM_ROLES", "Inputs", "Run", "simulate"]

DT = 0.01  # s: the model's step; every recorded rate divides 1 / DT
# The physical quantities a world may randomise in sim: (nominal, sim low, sim high).
PARAM_ROLES: dict[str, tuple[float, float, float]] = {
    "floor_mu": (0.8, 0.3, 1.0),      # wheel-floor friction (sim's low end just slips)
    "payload": (1.0, 0.6, 1.4),       # carried mass, kg
    "pad_mu": (1.0, 0.25, 1.2),       # gripper pad friction (sim's low end just slips)
    "gain": (1.0, 0.85, 1.15),        # actuator gain
    "cam_noise": (0.003, 0.0015, 0.0045),  # camera position noise, m
    "cam_bias": (0.0, -0.004, 0.004),      # camera calibration offset, m
    "light": (1.0, 0.8, 1.2),         # light level seen by the camera
}
ROLE_INDEX = {name: i for i, name in enumerate(PARAM_ROLES)}
# What a person sees when an episode fails, by the condition that ended it.
FAILURES = ("missed_pick", "dropped_object", "protective_stop", "misplaced")

_G = 9.81
_TRACTION = 0.35      # share of the weight on the driven wheels
_Q_PREF = 0.35        # m: where the arm likes the object at grasp
_REACH = 0.62         # m: the arm's longest reach
_TRANSPORT = 0.35     # m: how far the object is carried back
_ARM_INERTIA = 0.6
_TAU_MAX = 4.0
_KP, _KD = 600.0, 45.0
_GRIP = 30.0          # N: grip force
_SLIP_LOST = 0.02     # m: the object is lost once it slid this far
_STALL = 0.06         # m: tracking error that trips a protective stop
_FORCE_STOP = 40.0    # N: contact force that trips a protective stop
_PLACE_TOL = 0.025    # m
_STOP_AFTER = 0.4     # s recorded after a failure (the robot halts)


@dataclass(frozen=True)
class Inputs:
    """Everything one source's episodes start from.

    Attributes:
        duration: ``(n,)`` s, the task's nominal length (grasp at 45 %, place at 90 %).
        distance: ``(n,)`` m from the start to the object.
        dock: ``(n,)`` m, the farthest the base may drive (the shelf's front); the arm
            reaches the rest, up to its longest reach.
        tolerance: ``(n,)`` m, how far off a grasp may land (the object's size).
        mass_factor, grip_factor: ``(n,)`` the object's mass and pad friction multipliers.
        params: ``(n, len(PARAM_ROLES))`` physical values in the model's units.
        latency_ms: ``(n, n_steps)`` camera-frame delivery delay (``None``: sim's fixed 20 ms).
        contact: ``(n,)`` 0 none, 1 a stiff obstacle, 2 a soft one, 3 a snag that takes
            the object; ``contact_at``: ``(n,)`` where along the carry, as a fraction.
        bump: ``(n,)`` N s, a knock during the carry (0: none); ``bump_at``: fraction.
        fps: camera frames per second; ``rng``: the episodes' noise (drawn in fixed order, so
            the same seed gives the same noise whatever the inputs).
    """

    duration: np.ndarray
    distance: np.ndarray
    dock: np.ndarray
    tolerance: np.ndarray
    mass_factor: np.ndarray
    grip_factor: np.ndarray
    params: np.ndarray
    latency_ms: np.ndarray | None
    contact: np.ndarray
    contact_at: np.ndarray
    bump: np.ndarray
    bump_at: np.ndarray
    fps: int

    def __len__(self) -> int:
        return len(self.duration)


@dataclass(frozen=True)
class Run:
    """Trajectories ``(n, n_steps)`` (NaN where a camera frame was not delivered), the
    failure (-1: none; else an index into :data:`FAILURES`), its time, and where each
    episode's recording ends."""

    series: dict[str, np.ndarray]
    failure: np.ndarray
    failure_time: np.ndarray
    end: np.ndarray


def n_steps(duration: np.ndarray) -> int:
    """Steps enough for the longest episode."""
    return int(np.ceil(float(np.max(duration, initial=1.0)) / DT)) + 2


def simulate(x: Inputs, noise: np.random.Generator) -> Run:
    """Run the episodes of ``x`` to their end or their failure."""
    n, steps = len(x), n_steps(x.duration)
    p = {name: x.params[:, i] for name, i in ROLE_INDEX.items()}
    z = _Noise(noise, n, steps)
    t_stop = 0.33 * x.duration          # base stops
    t_grasp = 0.45 * x.duration
    t_place = 0.9 * x.duration
    out = {k: np.full((n, steps), np.nan) for k in (
        "wheel_speed", "base_vel", "arm_pos", "arm_vel", "arm_torque", "grip_force",
        "det_conf", "brightness", "target_est", "loc_innov", "held_est", "base_cmd",
        "arm_cmd", "net_latency", "frames_dropped")}
    latency = x.latency_ms if x.latency_ms is not None else np.full((n, steps), 20.0)
    frame_every = round(1 / (x.fps * DT))
    rel_hist = np.zeros((n, steps))
    q_hist = np.zeros((n, steps))
    # state
    omega = np.zeros(n)
    v_b = np.zeros(n)
    x_b = np.zeros(n)
    q = np.full(n, 0.1)
    qd = np.zeros(n)
    rel_est = x.distance + x.params[:, ROLE_INDEX["cam_bias"]]
    plan = np.clip(rel_est - _Q_PREF, 0.05, x.dock)
    attached = np.zeros(n, bool)
    slid = np.zeros(n)
    grasp_q = np.zeros(n)
    failure = np.full(n, -1)
    failure_time = np.full(n, np.inf)
    dropped = np.zeros(n)
    mass = p["payload"] * x.mass_factor
    pad = p["pad_mu"] * x.grip_factor
    contact_q = np.zeros(n)
    for k in range(steps):
        t = k * DT
        alive = t < failure_time
        halted = t >= failure_time
        rel_true = x.distance - x_b
        rel_hist[:, k] = rel_true
        q_hist[:, k] = q
        # --- camera: a frame captured `latency` ago, if the network delivered it
        if k % frame_every == 0:
            lag = np.minimum(np.round(latency[:, k] / 1000 / DT).astype(int), k)
            rows = np.arange(n)
            seen = rel_hist[rows, k - lag]
            bright = p["light"] * (0.6 + 0.02 * z.frame[:, k, 0])
            conf = 1 / (1 + np.exp(-10 * (bright - 0.33)))
            sd = p["cam_noise"] * (1 + 12 * (1 - conf))
            meas = seen + p["cam_bias"] + sd * z.frame[:, k, 1]
            late = latency[:, k] > 60
            lost = z.drop[:, k] < np.clip((latency[:, k] - 60) / 300, 0, 0.9)
            dropped += lost
            got = ~lost
            innov = meas - rel_est
            rel_est = np.where(got, meas, rel_est)
            out["brightness"][:, k] = np.where(got, bright, np.nan)
            out["det_conf"][:, k] = np.where(got, conf * (1 - 0.3 * late), np.nan)
            out["target_est"][:, k] = np.where(got, meas, np.nan)
            out["loc_innov"][:, k] = np.where(got, innov, np.nan)
            # the held object, where the camera sees it: the arm, less what slid
            # (through the same calibration as the object: an offset camera sees both off)
            held = q_hist[rows, k - lag] - slid + p["cam_bias"] + 0.5 * sd * z.frame[:, k, 2]
            out["held_est"][:, k] = np.where(got, held, np.nan)
        out["net_latency"][:, k] = latency[:, k]
        out["frames_dropped"][:, k] = dropped
        # --- base: a trapezoid planned from the first fix, on odometry in between fixes
        u = np.clip(t / t_stop, 0, 1)
        ramp = np.clip(np.minimum(u, 1 - u) / 0.2, 0, 1) * (u < 1)
        v_cmd = np.where(halted, 0.0, ramp * plan / (0.8 * t_stop))
        omega += (v_cmd - omega) * np.minimum(1.0, 25 * DT * p["gain"])
        grip_limit = p["floor_mu"] * _G * _TRACTION
        v_b += np.clip((omega - v_b) / DT * 0.5, -grip_limit, grip_limit) * DT
        x_b += v_b * DT
        rel_est = rel_est - omega * DT  # dead reckoning until the next fix
        # grasp
        now = (t >= t_grasp) & (t - DT < t_grasp) & alive
        miss = now & (np.abs(q - rel_true) > x.tolerance)
        _fail(failure, failure_time, miss, 0, t)
        took = now & ~miss
        attached |= took
        grasp_q = np.where(took, q, grasp_q)
        contact_q = np.where(took, q - _TRANSPORT * x.contact_at, contact_q)
        # --- arm: reach for the estimate, then carry back by a minimum-jerk profile
        reach = np.clip((t - t_stop + 0.2 * (t_grasp - t_stop)) / (0.8 * (t_grasp - t_stop)),
                        0, 1)
        s = reach * reach * (3 - 2 * reach)
        q_target = np.minimum(rel_est, _REACH)
        q_ref = np.where(t < t_grasp, 0.1 + (q_target - 0.1) * s, grasp_q)
        carry = np.clip((t - t_grasp - 0.1) / (t_place - t_grasp - 0.3), 0, 1)
        mj = carry ** 3 * (10 - 15 * carry + 6 * carry ** 2)
        q_ref = np.where(t >= t_grasp, grasp_q - _TRANSPORT * mj, q_ref)
        q_ref = np.where(halted, q, q_ref)
        # contact with what sim does not model, during the carry
        pen = np.where(attached | (x.contact == 3), np.maximum(contact_q - q, 0.0), 0.0)
        pen = np.where(t > t_grasp, pen, 0.0)
        f_ext = np.select([x.contact == 1, x.contact == 2],
                          [9000 * pen - 60 * qd * (pen > 0), 140 * pen], 0.0)
        snag = (x.contact == 3) & (pen > 0) & attached
        kick = np.where((np.abs(t - (t_grasp + 0.1 + x.bump_at * (t_place - t_grasp - 0.3)))
                         < DT / 2), x.bump / DT, 0.0)
        inertia = _ARM_INERTIA + mass * attached
        err = q_ref - q
        tau = np.clip(p["gain"] * (_KP * err - _KD * qd), -_TAU_MAX, _TAU_MAX)
        tau = np.where(halted, -_KD * qd, tau)
        # the load's weight pulls on the arm from the grasp on (a 5 cm lever)
        weight = mass * attached * _G * 0.05
        acc = (tau + f_ext + kick - weight - 1.5 * qd) / inertia
        qd += acc * DT
        q += qd * DT
        stall = (t > t_grasp) & alive & ((np.abs(err) > _STALL) | (np.abs(f_ext) > _FORCE_STOP))
        _fail(failure, failure_time, stall, 2, t)
        # the object slides in the fingers when its inertia asks more than the pads hold
        # it creeps once the pads carry more than 60 % of what they hold, and slides fast
        # past 100 % (a knock does it in one step)
        ratio = mass * (np.abs(acc) + 0.5 * _G) / (pad * _GRIP)
        creep = np.where(attached, 0.05 * np.maximum(ratio - 0.6, 0)
                         + 5.0 * np.maximum(ratio - 1.0, 0), 0.0)
        slid += creep * DT
        lost_obj = attached & ((slid > _SLIP_LOST) | snag) & alive
        _fail(failure, failure_time, lost_obj & ~snag, 1, t)
        _fail(failure, failure_time, lost_obj & snag, 2, t + 0.1)
        attached &= ~lost_obj
        placed = (t >= t_place) & (t - DT < t_place) & alive & attached
        _fail(failure, failure_time, placed & (np.abs(q - q_ref) > _PLACE_TOL), 3, t)
        # what the sensors read
        out["wheel_speed"][:, k] = omega + 0.004 * z.step[:, k, 0]
        out["base_vel"][:, k] = v_b + 0.01 * z.step[:, k, 1]
        out["arm_pos"][:, k] = q + 0.0005 * z.step[:, k, 2]
        out["arm_vel"][:, k] = qd + 0.01 * z.step[:, k, 3]
        out["arm_torque"][:, k] = tau + 0.05 * z.step[:, k, 4]
        # fingers closing on a sliding object read a sagging force
        out["grip_force"][:, k] = ((_GRIP - 0.3 * f_ext - 150 * creep) * attached
                                   + 0.3 * z.step[:, k, 5])
        out["base_cmd"][:, k] = v_cmd
        out["arm_cmd"][:, k] = q_ref
    end = np.minimum(failure_time + _STOP_AFTER, x.duration)
    failure_time = np.where(failure >= 0, np.minimum(failure_time, end), np.nan)
    return Run(out, failure, failure_time, end)


def _fail(failure: np.ndarray, when: np.ndarray, mask: np.ndarray, kind: int,
          t: float) -> None:
    """Record the first failure of each episode in ``mask`` (later ones are consequences)."""
    first = mask & (failure < 0)
    failure[first] = kind
    when[first] = t


class _Noise:
    """The episodes' noise, drawn up front so that a counterfactual run of the same episodes
    (a cause removed) meets exactly the same noise."""

    def __init__(self, rng: np.random.Generator, n: int, steps: int) -> None:
        self.step = rng.standard_normal((n, steps, 6)).astype(np.float32)
        self.frame = rng.standard_normal((n, steps, 3)).astype(np.float32)
        self.drop = rng.random((n, steps)).astype(np.float32)

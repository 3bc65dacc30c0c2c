"""Names from no fixed vocabulary: each world spells its channels, parameters and places its way.

A name is a role's synonym, perhaps under a part prefix, in one of several styles (snake,
camel, a ROS-like topic path, dotted), perhaps with a unit suffix. Channels the dataset does
not declare in ``channels.csv`` must still be named so that sim2real can infer their family:
the zoo scores the diagnosis, not luck with names, so the generator redraws until they are.
"""

from __future__ import annotations

import re

import numpy as np

from sim2real.dataset.schema import Family, infer_family

__all__ = ["channel_name", "param_name", "place_names", "word"]

_CHANNEL_WORDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # role: (prefixes, synonyms)
    "wheel_speed": (("base", "drive", "wheel", "odom"), ("speed", "wheel_vel", "odom_vel",
                                                        "wheel_speed")),
    "base_vel": (("imu", "base", "chassis"), ("velocity", "vel", "speed_imu")),
    "arm_pos": (("arm", "joint2", "j3", "lift", "shoulder"), ("pos", "position", "q", "angle")),
    "arm_vel": (("arm", "joint2", "j3", "lift"), ("vel", "velocity", "qd", "dq")),
    "arm_torque": (("arm", "joint2", "j3", "motor"), ("torque", "effort", "tau", "current")),
    "grip_force": (("gripper", "grip", "finger", "pad"), ("force", "grip_force", "wrench")),
    "det_conf": (("cam", "vision", "detector", "det"), ("confidence", "conf", "det_score")),
    "brightness": (("cam", "image", "img", "camera"), ("brightness", "exposure_mean", "lux")),
    "target_est": (("cam", "vision", "target", "object"), ("pose_est", "position_est",
                                                            "est_x", "estimate")),
    "loc_innov": (("loc", "vision", "landmark", "cam"), ("pose_error", "est_residual",
                                                          "pose_err", "detection_offset")),
    "held_est": (("cam", "vision", "held"), ("obj_pose_est", "object_estimate", "bbox_x",
                                             "keypoint_x")),
    "base_cmd": (("base", "drive", "nav"), ("cmd_vel", "command", "setpoint", "cmd")),
    "arm_cmd": (("arm", "joint2", "policy"), ("target", "cmd", "action", "setpoint")),
    "net_latency": (("net", "network", "loop", "comms"), ("latency", "rtt", "delay", "lag")),
    "frames_dropped": (("cam", "net", "stream"), ("dropped", "drop_count", "frames_dropped",
                                                  "packet_loss")),
}
_UNIT_SUFFIX = {"m": ("m",), "m/s": ("mps",), "N": ("n",), "ms": ("ms",), "": ("",),
                "count": ("",)}
_PARAM_WORDS: dict[str, tuple[str, ...]] = {
    "floor_mu": ("floor_friction", "ground_mu", "wheel_traction", "tire_friction", "surface_mu"),
    "payload": ("payload_mass", "object_mass", "load_kg", "tote_mass", "part_weight"),
    "pad_mu": ("pad_friction", "finger_mu", "grip_friction", "gripper_mu"),
    "gain": ("motor_gain", "actuator_strength", "kp_scale", "drive_gain"),
    "cam_noise": ("camera_noise", "sensor_noise", "pixel_noise", "depth_noise"),
    "cam_bias": ("camera_offset", "extrinsic_x", "calib_offset", "cam_shift"),
    "light": ("light_level", "illumination", "ambient_light", "lux_scale"),
}
_SYLLABLES = ("ka", "lo", "mi", "ra", "te", "nu", "vo", "si", "da", "pe", "zu", "ho")


def word(rng: np.random.Generator, syllables: int = 2) -> str:
    """A made-up word: names of places, tasks, objects."""
    return "".join(str(rng.choice(_SYLLABLES)) for _ in range(syllables))


def _style(parts: list[str], rng: np.random.Generator) -> str:
    words = [w for p in parts for w in p.split("_") if w]
    style = int(rng.integers(4))
    if style == 0:
        return "_".join(words)
    if style == 1:
        return words[0] + "".join(w.capitalize() for w in words[1:])
    if style == 2:
        return "/" + "/".join(parts)
    return ".".join(parts)


def channel_name(role: str, unit: str, family: Family, *, declared: bool,
                 rng: np.random.Generator, taken: set[str]) -> str:
    """A fresh name for a channel of ``role``; undeclared ones are named so their family can
    be inferred, declared ones may be opaque (``ch07``)."""
    prefixes, synonyms = _CHANNEL_WORDS[role]
    for _ in range(200):
        if declared and rng.random() < 0.15:
            name = f"ch{int(rng.integers(100)):02d}"
        else:
            parts = [str(rng.choice(synonyms))]
            if rng.random() < 0.7:
                parts.insert(0, str(rng.choice(prefixes)))
            suffix = str(rng.choice(_UNIT_SUFFIX[unit]))
            if suffix and rng.random() < 0.4:
                parts[-1] += "_" + suffix
            name = _style(parts, rng)
        if name in taken or (not declared and infer_family(name) != family):
            continue
        taken.add(name)
        return name
    msg = f"could not name a {role} channel"  # pragma: no cover - 200 draws always find one
    raise RuntimeError(msg)


def param_name(role: str, rng: np.random.Generator) -> str:
    """A simulation parameter's name for ``role``."""
    name = str(rng.choice(_PARAM_WORDS[role]))
    return re.sub(r"_+", "_", name if rng.random() < 0.7 else f"{name}_{word(rng, 1)}")


def place_names(prefix: str, n: int, rng: np.random.Generator) -> list[str]:
    """``n`` distinct names of robots, sites or deployments, in one random style."""
    style = int(rng.integers(3))
    if style == 0:
        return [f"{prefix}{i + 1:02d}" for i in range(n)]
    if style == 1:
        return [f"{prefix}-{word(rng)}-{i}" for i in range(n)]
    return [f"{word(rng, 1)}{prefix}{i + 1}" for i in range(n)]

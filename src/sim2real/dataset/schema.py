"""The dataset format (``docs/dataset.md``): names, vocabularies, typed records."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "BANK_SOURCES",
    "CTX_PREFIX",
    "EPISODES_REQUIRED",
    "FAMILIES",
    "OUTCOMES",
    "PARAM_PREFIX",
    "SOURCES",
    "SYS_PREFIX",
    "Channel",
    "Family",
    "ParamRange",
    "infer_family",
    "infer_param_family",
]

Family = Literal["perception", "dynamics", "policy", "system"]
FAMILIES: tuple[Family, ...] = ("perception", "dynamics", "policy", "system")
SOURCES = ("real", "sim", "reference")
# What real failures are compared with: sim rollouts or, where no simulator exists, normal
# real runs declared ``source = reference`` (addition). A dataset holds one or the other.
BANK_SOURCES = ("sim", "reference")
OUTCOMES = ("success", "failure")
EPISODES_REQUIRED = ("episode_id", "source", "task")
CTX_PREFIX = "ctx."
PARAM_PREFIX = "param."
SYS_PREFIX = "sys."


@dataclass(frozen=True)
class Channel:
    """One signal column and what it measures."""

    name: str
    family: Family
    unit: str = ""
    inferred: bool = False


@dataclass(frozen=True)
class ParamRange:
    """The randomisation range a simulation parameter was sampled from.

    Attributes:
        name: without ``param.``.
        low, high, nominal: the randomisation range and the nominal value.
        minimum, maximum: physical bounds (``params.csv`` ``min``/``max``), ``None`` where
            not declared; no estimate is reported outside them.
        family: the parameter's family where declared.
        targets: simulator -> where the parameter lives in its configuration
            (``params.csv`` ``target.<simulator>`` columns).
    """

    name: str
    low: float
    high: float
    nominal: float
    minimum: float | None = None
    maximum: float | None = None
    family: Family | None = None
    targets: Mapping[str, str] = field(default_factory=dict)

    @property
    def bounds(self) -> tuple[float, float]:
        """Physical bounds, ``-inf``/``inf`` where none was declared; a parameter sim only
        ever randomised over non-negative values (a mass, a friction, a noise level) is
        taken to be non-negative."""
        low = self.minimum if self.minimum is not None else (0.0 if self.low >= 0 else -math.inf)
        high = self.maximum if self.maximum is not None else math.inf
        return float(low), float(high)

    @property
    def spread(self) -> float:
        """Width of the range; 1.0 for a degenerate range so shifts stay finite."""
        width = self.high - self.low
        return width if width > 0 else 1.0


# Checked in order: the first family whose pattern matches a word of the name wins, so the
# specific system/perception vocabularies come before the broad dynamics one.
_FAMILY_PATTERNS: tuple[tuple[Family, re.Pattern[str]], ...] = (
    ("system", re.compile(
        r"latency|lag|delay|drop|dropped|jitter|skew|clock|cpu|mem|network|net|rtt|ping|"
        r"packet|queue|loop_dt|heartbeat|bandwidth|temp_c|load|stale|timeout")),
    ("perception", re.compile(
        r"det|detect|detection|conf|confidence|pose_err|pose_error|est|estimate|bright|"
        r"brightness|contrast|sharp|sharpness|blur|exposure|image|img|cam|camera|depth|"
        r"lidar|point|pixel|saturation|hist|visib|visibility|occlu|occlusion|lux|seg|"
        r"keypoint|bbox|track_conf|perception")),
    ("policy", re.compile(
        r"cmd|command|action|act|target|setpoint|goal|policy|plan|ref|desired|logit|"
        r"entropy|value")),
    ("dynamics", re.compile(
        r"pos|pose|position|vel|velocity|acc|accel|torque|tau|effort|force|wrench|contact|slip|"
        r"grip|gripper|width|joint|q|qd|dq|current|motor|track|tracking|err|error|imu|"
        r"gyro|wheel|odom|friction|load_cell|mass|speed")),
)


# A pose *estimate* or its error is what perception reports, a pose alone is physical state.
_PERCEIVED_POSE = re.compile(r"pose_?(est|estimate|err|error|uncert)")


# Simulation parameters speak the randomisation vocabulary of Isaac Lab, MJCF, robosuite and
# MuJoCo Playground (friction, mass, damping, armature, gains; light, camera; latency): what
# a parameter *is* decides its family, not where sim shows it (a wheel friction whose
# slips show first as localisation error is still dynamics).
_PARAM_PATTERNS: tuple[tuple[Family, re.Pattern[str]], ...] = (
    ("system", re.compile(
        r"latency|lag|delay|rtt|ping|jitter|network|net|packet|drop|dropout|timeout|stale|"
        r"bandwidth|clock|skew|queue")),
    ("perception", re.compile(
        r"light|lighting|lux|illumination|illum|bright|brightness|exposure|camera|cam|pixel|"
        r"calib|calibration|extrinsic|intrinsic|fov|fovy|focal|blur|lens|glare|texture|"
        r"colour|color|contrast|lidar|depth|occlusion|occluder")),
    ("dynamics", re.compile(
        r"friction|frictionloss|mu|traction|grip|mass|weight|kg|load|payload|inertia|"
        r"damping|stiffness|spring|armature|gear|gain|kp|kd|kv|ki|pd|strength|torque|force|"
        r"actuator|motor|drive|joint|wheel|tire|tyre|pad|restitution|com|density|"
        r"compliance|elasticity")),
)


def infer_param_family(name: str) -> Family | None:
    """Guess a simulation parameter's family from its name (``None``: no word says).

    Words are split as in :func:`infer_family`; a family matches when one of its words
    equals or starts a word of the name (``illumination_zu``, ``wheel_traction``).
    """
    return _match(_spaced(name), _PARAM_PATTERNS)


def infer_family(name: str) -> Family | None:
    """Guess a channel's family from its name, or ``None`` when nothing matches.

    Names are split on ``_``, ``.``, ``/``, ``-`` and camelCase; a family matches when one of
    its words equals or starts a word of the name (``det_confidence`` -> perception).
    """
    spaced = _spaced(name)
    if _PERCEIVED_POSE.search(spaced):
        return "perception"
    return _match(spaced, _FAMILY_PATTERNS)


def _spaced(name: str) -> str:
    """``name`` lower-cased, camelCase humps split with ``_``."""
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def _match(spaced: str, patterns: tuple[tuple[Family, re.Pattern[str]], ...]) -> Family | None:
    """The first family one of whose words equals or (4 letters and more) starts a word
    of ``spaced`` (split on ``_ . / -``, spaces and brackets)."""
    words = [w for w in re.split(r"[_./\-\s\[\]]+", spaced) if w]
    for family, pattern in patterns:
        for word in words:
            if pattern.fullmatch(word) or any(
                word.startswith(p) for p in pattern.pattern.split("|") if len(p) >= 4
            ):
                return family
    return None

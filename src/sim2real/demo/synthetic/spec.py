"""What a synthetic world is made of: channels, parameters, context, causes (frozen records).

A :class:`WorldSpec` is pure data; :func:`sim2real.demo.synthetic.generate_world` turns it into a
dataset. Channels and effects are described by *kind* (``"joint_pos"``, ``"det_conf"``...), the
generator's own vocabulary of telemetry templates (:data:`KINDS`), so that a world can name its
channels anything (``shoulder_q``, ``kp_confidence``) and keep the same physics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from sim2real.dataset.schema import Family
from sim2real.errors import UsageError

__all__ = [
    "FAILURE_MODES",
    "KINDS",
    "BackgroundSpec",
    "CatalogueItem",
    "CauseSpec",
    "ChannelSpec",
    "CtxCategorical",
    "CtxNumeric",
    "ParamSpec",
    "TaskSpec",
    "Taxonomy",
    "WorldSpec",
]

Taxonomy = Literal[
    "perception_drift", "dynamics_mismatch", "task_scope_overflow", "deployment_system_noise"
]

# The telemetry templates the generator knows (see telemetry.py for their shapes).
KINDS: tuple[str, ...] = (
    "joint_pos", "joint_vel", "joint_torque", "grip_force", "grip_width", "slip", "track_err",
    "det_conf", "pose_err", "brightness", "contrast",
    "cmd_vel", "cmd_grip",
    "latency", "dropped",
)

# How an episode can fail; each mode has its own telemetry signature and failure_label.
FAILURE_MODES: tuple[str, ...] = ("grasp_miss", "bump_drop", "slip_drop", "collision", "knock_over")

Effects = Mapping[str, float]
"""Kind -> coefficient, in the kind's link space (identity, logit or log; see telemetry.py)."""


@dataclass(frozen=True)
class ChannelSpec:
    """One signal column: its name, family, which template it follows and how big it is.

    ``variant`` gives two channels of the same kind different trajectories (two joints).
    ``noise`` is the per-sample noise sd in the kind's link space.
    """

    name: str
    kind: str
    family: Family
    unit: str = ""
    scale: float = 1.0
    noise: float = 0.02
    variant: int = 0


@dataclass(frozen=True)
class ParamSpec:
    """A simulation parameter: sim samples it uniformly in ``[low, high]``.

    ``effects`` maps kinds to coefficients applied to ``g(z)``, where ``z`` is the
    standardised value ``(value - nominal) / (high - low)`` and ``g`` a mild nonlinearity, so
    the parameter is identifiable from telemetry and a value beyond the range extrapolates.
    """

    name: str
    low: float
    high: float
    nominal: float
    effects: Effects = field(default_factory=dict)


@dataclass(frozen=True)
class CatalogueItem:
    """One value of a categorical context column, its sampling weight and its telemetry effect."""

    name: str
    weight: float = 1.0
    effects: Effects = field(default_factory=dict)


@dataclass(frozen=True)
class CtxCategorical:
    """A categorical ``ctx.<name>`` column drawn from a catalogue (in sim and real alike)."""

    name: str
    items: tuple[CatalogueItem, ...]


@dataclass(frozen=True)
class CtxNumeric:
    """A numeric ``ctx.<name>`` column drawn uniformly in ``[low, high]``; effects as params."""

    name: str
    low: float
    high: float
    effects: Effects = field(default_factory=dict)


@dataclass(frozen=True)
class TaskSpec:
    """A task: nominal duration and the share of it spent in approach, grasp, transport, place."""

    name: str
    duration_s: float = 6.0
    phases: tuple[float, float, float, float] = (0.25, 0.2, 0.35, 0.2)
    weight: float = 1.0


@dataclass(frozen=True)
class BackgroundSpec:
    """Failures sim has too, with the same mechanism and signature in sim and real.

    ``rate``: chance of a random bump that drops the object (any params). ``extreme_rate``:
    chance of a grasp miss when ``extreme_param`` lies in the low ``extreme_share`` of its
    range, rising linearly to that rate at the range's end.
    """

    rate: float = 0.022
    extreme_param: str | None = None
    extreme_rate: float = 0.15
    extreme_share: float = 0.2


@dataclass(frozen=True)
class CauseSpec:
    """A source of real failures that sim does not have.

    Where it acts: ``robots``, ``sites``, ``deployments`` (empty = everywhere) and optionally
    only on episodes whose ``when_ctx = (column, value)``; it stops acting from ``fixed_from``.
    How often: in an eligible episode it is active with a probability that ramps linearly from
    ``ramp[0]`` at the first deployment of the world to ``ramp[1]`` at the last.
    How it acts, combined freely:
      * ``key_param``/``true_value``: the hidden parameter takes (about) this value, usually
        outside the sim range; the telemetry follows from the parameter's effects;
      * ``new_ctx = (column, value)`` with ``effects``: the episode meets a context value sim
        never shows (task scope), with its own telemetry effects;
      * ``latency_spike_ms``/``drop_rate``: spikes on the system channels, with tracking-error
        consequences; ``config_hash`` marks the affected episodes' ``sys.config_hash``;
      * ``effects``: any extra direct effects.
    An active episode fails with probability ``failure_prob * strength`` (strength ~ 1,
    the per-episode size of the cause), in ``failure_mode``.
    """

    name: str
    taxonomy: Taxonomy
    failure_mode: str
    failure_prob: float = 0.6
    ramp: tuple[float, float] = (0.1, 0.1)
    robots: tuple[str, ...] = ()
    sites: tuple[str, ...] = ()
    deployments: tuple[str, ...] = ()
    when_ctx: tuple[str, str] | None = None
    fixed_from: str | None = None
    key_param: str | None = None
    true_value: float | None = None
    new_ctx: tuple[str, str] | None = None
    effects: Effects = field(default_factory=dict)
    latency_spike_ms: float = 0.0
    drop_rate: float = 0.0
    config_hash: str | None = None


@dataclass(frozen=True)
class WorldSpec:
    """A whole synthetic fleet: what is recorded, how sim is randomised, and what goes wrong.

    Real episodes run with hidden parameters near ``nominal`` (sd ``real_param_sd`` in units
    of the range width) or, with ``real_param_sd=None``, exactly like sim (no gap). Real sample
    times get ``real_jitter`` (fraction of a sample period) and a per-episode clock warp of sd
    ``real_time_warp``. ``episodes_per_deployment`` and ``n_sim`` are multiplied by the scale.
    """

    name: str
    tasks: tuple[TaskSpec, ...]
    channels: tuple[ChannelSpec, ...]
    params: tuple[ParamSpec, ...]
    deployments: tuple[str, ...]
    episodes_per_deployment: tuple[int, ...]
    robots: tuple[str, ...]
    sites: tuple[str, ...]
    robot_sites: tuple[str, ...]
    ctx_categorical: tuple[CtxCategorical, ...] = ()
    ctx_numeric: tuple[CtxNumeric, ...] = ()
    causes: tuple[CauseSpec, ...] = ()
    background: BackgroundSpec = BackgroundSpec()
    n_sim: int = 600
    sim_rate_hz: float = 20.0
    real_rate_hz: float = 50.0
    real_jitter: float = 0.1
    real_time_warp: float = 0.01
    real_param_sd: float | None = 0.1
    firmware: tuple[str, str] = ("fw-3.1.0", "fw-3.2.0")
    start: str = "2026-01-05T08:00:00"
    deployment_days: float = 7.0

    def __post_init__(self) -> None:
        _check_world(self)

    def channel(self, name: str) -> ChannelSpec:
        """The channel called ``name``."""
        for ch in self.channels:
            if ch.name == name:
                return ch
        msg = f"world {self.name!r} has no channel {name!r}"
        raise UsageError(msg)

    def param_index(self, name: str) -> int:
        """Position of parameter ``name`` in :attr:`params`."""
        names = [p.name for p in self.params]
        if name not in names:
            msg = f"world {self.name!r} has no parameter {name!r}; it has {names}"
            raise UsageError(msg)
        return names.index(name)

    def robot_site(self, robot: str) -> str:
        """The site a robot works at."""
        return self.robot_sites[self.robots.index(robot)]


def _check_world(spec: WorldSpec) -> None:
    """Reject a spec the generator would misread, naming the offending field."""
    problems = _world_problems(spec)
    for cause in spec.causes:
        problems += _cause_problems(cause, spec)
    if problems:
        msg = f"world {spec.name!r}: " + "; ".join(problems)
        raise UsageError(msg)


def _world_problems(spec: WorldSpec) -> list[str]:
    problems = []
    if len(spec.episodes_per_deployment) != len(spec.deployments):
        problems.append("episodes_per_deployment needs one count per deployment")
    if len(spec.robot_sites) != len(spec.robots) or set(spec.robot_sites) - set(spec.sites):
        problems.append("robot_sites needs one known site per robot")
    if len({c.name for c in spec.channels}) != len(spec.channels):
        problems.append("channel names must be unique")
    effect_maps: list[tuple[str, Effects]] = [(f"param {p.name}", p.effects) for p in spec.params]
    effect_maps += [(f"ctx {c.name}", c.effects) for c in spec.ctx_numeric]
    effect_maps += [(f"ctx value {i.name}", i.effects)
                    for c in spec.ctx_categorical for i in c.items]
    effect_maps += [(f"cause {c.name}", c.effects) for c in spec.causes]
    effect_maps += [(f"channel {c.name}", {c.kind: 0.0}) for c in spec.channels]
    for where, effects in effect_maps:
        unknown = set(effects) - set(KINDS)
        if unknown:
            problems.append(f"{where} names unknown kinds {sorted(unknown)}; known: {list(KINDS)}")
    extreme = spec.background.extreme_param
    if extreme and extreme not in {p.name for p in spec.params}:
        problems.append(f"background.extreme_param {extreme!r} is not a parameter")
    return problems


def _cause_problems(cause: CauseSpec, spec: WorldSpec) -> list[str]:
    where = f"cause {cause.name!r}"
    params = {p.name for p in spec.params}
    ctx = {c.name: {i.name for i in c.items} for c in spec.ctx_categorical}
    problems = []
    if cause.failure_mode not in FAILURE_MODES:
        problems.append(f"{where}: failure_mode must be one of {FAILURE_MODES}")
    if cause.key_param is not None and (cause.key_param not in params or cause.true_value is None):
        problems.append(f"{where}: key_param must name a parameter and come with a true_value")
    if set(cause.robots) - set(spec.robots) or set(cause.sites) - set(spec.sites):
        problems.append(f"{where}: unknown robots or sites")
    named = {*cause.deployments, *([cause.fixed_from] if cause.fixed_from else [])}
    if named - set(spec.deployments):
        problems.append(f"{where}: unknown deployments {sorted(named - set(spec.deployments))}")
    for pair, label in ((cause.when_ctx, "when_ctx"), (cause.new_ctx, "new_ctx")):
        if pair is not None and pair[0] not in ctx:
            problems.append(f"{where}: {label} names no categorical ctx column")
    if cause.new_ctx is not None and cause.new_ctx[1] in ctx.get(cause.new_ctx[0], set()):
        problems.append(f"{where}: new_ctx value {cause.new_ctx[1]!r} is already in the catalogue")
    return problems

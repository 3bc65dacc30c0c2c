"""Draw a random world: what it records, how sim is randomised, its fleet, and its causes.

A :class:`World` is pure data drawn from a seed; :mod:`sim2real.demo.zoo.generate` runs the
shared model on it and writes the dataset. Each cause comes from a *trap class*
(:data:`TRAP_CLASSES`), the situations that mislead a diagnosis on real fleets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim2real.dataset.schema import Family
from sim2real.demo.zoo.model import PARAM_ROLES
from sim2real.demo.zoo.names import channel_name, param_name, place_names, word
from sim2real.errors import UsageError

__all__ = ["TRAP_CLASSES", "CauseDraw", "ChannelDraw", "ObjectDraw", "ParamDraw", "TaskDraw",
           "World", "draw_world"]

# The trap classes of the zoo (issue "A world zoo", plus same-place modes of issue 22).
TRAP_CLASSES: tuple[str, ...] = (
    "perception_site",          # lighting, sensor noise or calibration at one site
    "dynamics_via_perception",  # wheel slip or a heavy load, seen first on perception
    "system_via_perception",    # network latency: late and dropped camera frames
    "same_family_pair",         # two causes of one family, different key parameters
    "fleetwide_thin",           # a cause thin on every robot
    "unseen_context",           # an object sim never shows, or a depth beyond sim's
    "confounders",              # a sys rollout at another cause's onset, a shared
                                # hardware variant, a robot that runs more episodes
    "validate",                 # a cause fixed mid-way, and one starting after the baseline
    "no_gap",                   # no sim-to-real gap at all: background failures only
    "same_place_modes",         # failure modes of one family, same place and time
)

# channel role -> (family, unit, rate class)
ROLES: dict[str, tuple[Family, str, str]] = {
    "wheel_speed": ("dynamics", "m/s", "fast"),
    "base_vel": ("dynamics", "m/s", "fast"),
    "arm_pos": ("dynamics", "m", "fast"),
    "arm_vel": ("dynamics", "m/s", "fast"),
    "arm_torque": ("dynamics", "N", "fast"),
    "grip_force": ("dynamics", "N", "fast"),
    "det_conf": ("perception", "", "frame"),
    "brightness": ("perception", "", "frame"),
    "target_est": ("perception", "m", "frame"),
    "loc_innov": ("perception", "m", "frame"),
    "held_est": ("perception", "m", "frame"),
    "base_cmd": ("policy", "m/s", "control"),
    "arm_cmd": ("policy", "m", "control"),
    "net_latency": ("system", "ms", "slow"),
    "frames_dropped": ("system", "count", "slow"),
}
_REQUIRED = ("wheel_speed", "arm_pos", "arm_torque", "grip_force", "det_conf", "target_est",
             "loc_innov", "held_est", "arm_cmd", "net_latency")
_TAXONOMY: dict[Family, str] = {
    "perception": "perception_drift", "dynamics": "dynamics_mismatch",
    "system": "deployment_system_noise", "policy": "task_scope_overflow"}
_PARAM_ACTIONS = ("recalibrate_param", "widen_randomization")
# mechanism -> (taxonomy, key role, value in model units, fitting action kinds,
#               failures an active episode yields, about: measured on the worlds of seeds
#               100-117, it sets the activity rate that gives a cause about its target)
MECHANISMS: dict[str, tuple[str, str | None, float | None, tuple[str, ...], float]] = {
    "dim_light": ("perception_drift", "light", 0.38, (*_PARAM_ACTIONS, "improve_perception"),
                  0.35),
    "sensor_noise": ("perception_drift", "cam_noise", 0.025,
                     (*_PARAM_ACTIONS, "improve_perception"), 0.4),
    "calibration": ("perception_drift", "cam_bias", 0.027,
                    (*_PARAM_ACTIONS, "improve_perception"), 0.5),
    "wheel_slip": ("dynamics_mismatch", "floor_mu", 0.12, _PARAM_ACTIONS, 0.3),
    "heavy_load": ("dynamics_mismatch", "payload", 4.0, _PARAM_ACTIONS, 0.45),
    "worn_pads": ("dynamics_mismatch", "pad_mu", 0.21, _PARAM_ACTIONS, 0.5),
    "network": ("deployment_system_noise", None, None, ("fix_infrastructure",), 0.37),
    "new_object": ("task_scope_overflow", None, None, ("add_training_scenarios",), 0.6),
    "deep_shelf": ("task_scope_overflow", None, None, ("add_training_scenarios",
                                                       "widen_randomization"), 0.6),
    "impact": ("dynamics_mismatch", None, None, ("investigate", "add_training_scenarios"), 1.0),
    "obstruction": ("dynamics_mismatch", None, None, ("investigate", "add_training_scenarios"),
                    0.9),
    "snag": ("dynamics_mismatch", None, None, ("investigate", "add_training_scenarios"), 1.0),
}


@dataclass(frozen=True)
class ChannelDraw:
    """A recorded channel: name, the model quantity it reads, family, unit, rates (Hz)."""

    name: str
    role: str
    family: Family
    unit: str
    rate_real: int
    rate_sim: int | None  # None: not recorded in sim
    declared: bool


@dataclass(frozen=True)
class ParamDraw:
    """A randomised sim parameter; values written as ``scale`` times the model's units."""

    role: str
    name: str
    scale: float

    def written(self, value: float) -> float:
        return float(value) * self.scale

    @property
    def range(self) -> tuple[float, float, float]:
        """(low, high, nominal) as written."""
        nominal, low, high = PARAM_ROLES[self.role]
        return self.written(low), self.written(high), self.written(nominal)


@dataclass(frozen=True)
class TaskDraw:
    name: str
    duration: float
    dock: float
    weight: float


@dataclass(frozen=True)
class ObjectDraw:
    """A kind of object: its mass and pad friction multipliers and grasp tolerance (m)."""

    name: str
    mass_factor: float
    grip_factor: float
    tolerance: float
    weight: float


@dataclass(frozen=True)
class CauseDraw:
    """One cause: its trap class, mechanism, where and when it acts, how often.

    ``robots`` are indices into :attr:`World.robots`; ``onset``/``fixed_from`` deployment
    indices; ``target`` failures it should produce about; ``shape`` of its rate over time.
    """

    name: str
    trap: str
    mechanism: str
    robots: tuple[int, ...]
    onset: int
    fixed_from: int | None
    target: int
    shape: str  # "grows", "steady" or "fades"

    @property
    def taxonomy(self) -> str:
        return MECHANISMS[self.mechanism][0]

    @property
    def key_role(self) -> str | None:
        return MECHANISMS[self.mechanism][1]


@dataclass(frozen=True)
class World:
    """Everything drawn for one seed (see :func:`draw_world`)."""

    seed: int
    tasks: tuple[TaskDraw, ...]
    objects: tuple[ObjectDraw, ...]
    new_object: ObjectDraw
    depth: tuple[str, float, float]  # ctx column name, sim support low, high (m)
    object_ctx: str
    channels: tuple[ChannelDraw, ...]
    params: tuple[ParamDraw, ...]
    declare: str  # "all", "some" or "none": which channels channels.csv lists
    layout: str   # "parts" or "one_file"
    fps_real: int
    fps_sim: int
    deployments: tuple[str, ...]
    robots: tuple[str, ...]
    sites: tuple[str, ...]
    robot_site: tuple[int, ...]
    robot_join: tuple[int, ...]
    robot_weight: tuple[float, ...]
    hardware: tuple[str, ...]
    sys_names: tuple[str, str]  # the config and hardware columns
    config_rollouts: tuple[int, ...]  # deployments where a new config ships fleetwide
    episodes: int   # real episodes, about
    n_sim: int      # sim rollouts per task
    causes: tuple[CauseDraw, ...]
    traps: tuple[str, ...]
    validate_split: int | None
    no_gap: bool

    def param(self, role: str) -> ParamDraw | None:
        return next((p for p in self.params if p.role == role), None)


def draw_world(seed: int, *, traps: Sequence[str] | None = None, size: float = 1.0,
               no_gap: bool | None = None) -> World:
    """A random world for ``seed``.

    Args:
        seed: same seed and options, same world.
        traps: trap classes the world must set (default: 2 to 4 drawn at random);
            ``"no_gap"`` makes a world without causes.
        size: multiplies the number of real episodes and sim rollouts.
        no_gap: force (or forbid) a world without a sim-to-real gap; default: 1 in 8.

    Raises:
        UsageError: an unknown trap class or a size that is not positive.
    """
    unknown = sorted(set(traps or ()) - set(TRAP_CLASSES))
    if unknown:
        msg = f"unknown trap class(es) {unknown}; known: {list(TRAP_CLASSES)}"
        raise UsageError(msg)
    if size <= 0:
        raise UsageError(f"size must be positive, got {size}")
    rng = np.random.default_rng([seed, 15])
    if no_gap is None:
        no_gap = "no_gap" in (traps or ()) or (traps is None and rng.random() < 0.125)
    chosen = ["no_gap"] if no_gap else list(traps or _draw_traps(rng, seed))
    n_dep = int(rng.integers(4, 13))
    n_sites = int(rng.integers(1, 6))
    n_robots = int(rng.integers(max(3, n_sites), 41))
    robot_site = np.concatenate([np.arange(n_sites), rng.integers(0, n_sites,
                                                                  n_robots - n_sites)])
    join = np.where(rng.random(n_robots) < 0.6, 0, rng.integers(0, max(1, n_dep - 2), n_robots))
    join[robot_site == robot_site[0]] = np.minimum(join[robot_site == robot_site[0]], 1)
    weight = rng.uniform(0.5, 1.5, n_robots)
    hw_share = 0.85 if "confounders" in chosen else 0.5
    hardware = np.where(rng.random(n_robots) < hw_share, "rev-b", "rev-a")
    if "confounders" in chosen:
        weight[int(rng.integers(n_robots))] = 6.0  # a robot that simply runs more
    fast_real = int(rng.choice([50, 100]))
    frames = (int(rng.choice([10, 20, 25])), int(rng.choice([10, 20, 25])))
    fast_sim = int(rng.choice([20, 25, 50]) if fast_real == 100 else rng.choice([20, 25]))
    rates: dict[str, tuple[int, int | None]] = {
        "fast": (fast_real, fast_sim),
        "frame": frames,
        "control": (int(rng.choice([20, 25, 50])), int(rng.choice([20, 25, 50]))),
        "slow": (int(rng.choice([2, 5, 10])), None),
    }
    declare = str(rng.choice(["all", "some", "none"]))
    channels = _channels(rng, rates, declare)
    world_tasks = tuple(
        TaskDraw(f"{word(rng)}_{word(rng, 1)}", float(rng.uniform(3.2, 4.8)),
                 float(rng.uniform(0.4, 0.8)), float(rng.uniform(0.5, 1.5)))
        for _ in range(int(rng.integers(1, 4))))
    objects = tuple(
        ObjectDraw(word(rng), float(rng.uniform(0.7, 1.3)), float(rng.uniform(0.9, 1.1)),
                   float(rng.uniform(0.018, 0.03)), float(rng.uniform(0.5, 1.5)))
        for _ in range(int(rng.integers(2, 5))))
    new_object = ObjectDraw(f"{word(rng, 3)}", 3.5, 0.45, 0.012, 0.0)
    causes = () if no_gap else _causes(rng, chosen, n_dep, robot_site, n_sites)
    key_roles = {c.key_role for c in causes if c.key_role}
    decoys = [r for r in PARAM_ROLES if r not in key_roles]
    n_decoys = min(len(decoys), int(rng.integers(1, 4)))
    roles = sorted(key_roles) + [str(r) for r in rng.choice(decoys, n_decoys, replace=False)]
    params = tuple(ParamDraw(r, param_name(r, rng), float(rng.choice([1.0, 1.0, 10.0, 0.1])))
                   for r in roles)
    tagged = next((c for c in causes if c.trap == "confounders"), None)
    rollouts = [0, *sorted({int(d) for d in rng.integers(1, n_dep, 2)})]
    if tagged is not None:  # the fleetwide config ships where the tagged cause starts
        rollouts = sorted({0, tagged.onset, *rollouts[1:2]})
    split = next((c.fixed_from for c in causes if c.fixed_from is not None), None)
    return World(
        seed=seed, tasks=world_tasks, objects=objects, new_object=new_object,
        depth=(f"{word(rng)}_depth", -0.05, 0.12), object_ctx=str(rng.choice(
            ["object", "item_type", "sku_class", "part"])),
        channels=channels, params=params, declare=declare,
        layout=str(rng.choice(["parts", "one_file"])),
        fps_real=frames[0], fps_sim=frames[0] if no_gap else frames[1],
        deployments=tuple(place_names(str(rng.choice(["w", "rel", "sprint"])), n_dep, rng)),
        robots=tuple(place_names(str(rng.choice(["r", "amr", "bot"])), n_robots, rng)),
        sites=tuple(place_names(str(rng.choice(["site", "dc", "cell"])), n_sites, rng)),
        robot_site=tuple(int(s) for s in robot_site), robot_join=tuple(int(j) for j in join),
        robot_weight=tuple(float(w) for w in weight), hardware=tuple(str(h) for h in hardware),
        sys_names=(str(rng.choice(["config_hash", "cfg_release", "stack_version"])),
                   str(rng.choice(["hw_rev", "board", "chassis_variant"]))),
        config_rollouts=tuple(rollouts),
        episodes=round(float(rng.uniform(450, 750)) * size),
        n_sim=round(float(rng.uniform(130, 180)) * size),
        causes=causes, traps=tuple(chosen), validate_split=split, no_gap=bool(no_gap),
    )


def _draw_traps(rng: np.random.Generator, seed: int) -> list[str]:
    """2 to 4 trap classes; seed ``s`` always sets class ``s`` mod 9 first (so that any
    run of seeds sets every class about equally often, and a full world never drops it)."""
    pool = [t for t in TRAP_CLASSES if t != "no_gap"]
    first = pool.pop(seed % len(pool))
    return [first, *(str(t) for t in rng.choice(pool, int(rng.integers(1, 4)), replace=False))]


def _channels(rng: np.random.Generator, rates: dict[str, tuple[int, int | None]],
              declare: str) -> tuple[ChannelDraw, ...]:
    roles = [r for r in ROLES if r in _REQUIRED or rng.random() < 0.5]
    taken: set[str] = set()
    out = []
    for role in roles:
        family, unit, rate = ROLES[role]
        declared = declare == "all" or (declare == "some" and rng.random() < 0.5)
        real, sim = rates[rate]
        out.append(ChannelDraw(channel_name(role, unit, family, declared=declared, rng=rng,
                                            taken=taken),
                               role, family, unit, real, sim, declared))
    order = rng.permutation(len(out))
    return tuple(out[i] for i in order)


def _causes(rng: np.random.Generator, traps: list[str], n_dep: int, robot_site: np.ndarray,
            n_sites: int) -> tuple[CauseDraw, ...]:
    """Causes for the trap classes, 2 to 6 in all, no mechanism twice (two causes with the
    same key parameter and symptoms would be one cause, whatever the key says)."""
    out: list[CauseDraw] = []
    site_of = [int(s) for s in robot_site]

    def at_site(site: int) -> tuple[int, ...]:
        return tuple(i for i, s in enumerate(site_of) if s == site)

    def some_robots() -> tuple[int, ...]:
        k = int(rng.integers(1, max(2, len(site_of) // 4) + 1))
        return tuple(sorted(int(i) for i in rng.choice(len(site_of), k, replace=False)))

    def place() -> tuple[int, ...]:
        return at_site(int(rng.integers(n_sites))) if rng.random() < 0.6 else some_robots()

    def pick(*options: str) -> str | None:
        free = [m for m in options if m not in {c.mechanism for c in out}]
        return str(rng.choice(free)) if free else None

    def add(trap: str, mechanism: str | None, robots: tuple[int, ...], *,
            onset: int | None = None, fixed: int | None = None, target: int | None = None,
            shape: str | None = None) -> None:
        if mechanism is None:
            return
        start = int(rng.integers(0, max(1, n_dep // 2))) if onset is None else onset
        out.append(CauseDraw(
            name=f"{mechanism}_{len(out) + 1}", trap=trap, mechanism=mechanism, robots=robots,
            onset=start, fixed_from=fixed,
            target=int(rng.integers(18, 40)) if target is None else target,
            shape=str(rng.choice(["grows", "steady", "fades"])) if shape is None else shape))

    for trap in traps:
        if len(out) >= 6:
            break
        if trap == "perception_site":
            add(trap, pick("dim_light", "sensor_noise", "calibration"),
                at_site(int(rng.integers(n_sites))))
        elif trap == "dynamics_via_perception":
            add(trap, pick("wheel_slip", "heavy_load"), place())
        elif trap == "system_via_perception":
            add(trap, pick("network"), place())
        elif trap == "same_family_pair":
            pairs = [p for p in (("wheel_slip", "heavy_load"), ("heavy_load", "worn_pads"),
                                 ("dim_light", "sensor_noise"), ("sensor_noise", "calibration"))
                     if pick(*p[:1]) and pick(*p[1:])]
            if not pairs:
                continue
            pair = pairs[int(rng.integers(len(pairs)))]
            first = int(rng.integers(n_sites))
            if n_sites > 1:
                add(trap, pair[0], at_site(first))
                add(trap, pair[1], at_site((first + 1) % n_sites))
            else:  # one site: two disjoint groups of robots
                order = [int(i) for i in rng.permutation(len(site_of))]
                half = len(order) // 2
                add(trap, pair[0], tuple(sorted(order[:half])))
                add(trap, pair[1], tuple(sorted(order[half:])))
        elif trap == "fleetwide_thin":
            add(trap, pick("worn_pads", "heavy_load", "calibration"), tuple(range(len(site_of))),
                target=int(rng.integers(15, 25)))
        elif trap == "unseen_context":
            add(trap, pick("new_object", "deep_shelf"), place())
        elif trap == "confounders":
            add(trap, pick("wheel_slip", "dim_light", "worn_pads"), place(),
                onset=int(rng.integers(1, max(2, n_dep - 2))), shape="grows")
        elif trap == "validate":
            split = int(rng.integers(max(2, n_dep // 2), n_dep))
            fixed = pick("sensor_noise", "heavy_load", "network")
            late = pick("wheel_slip", "calibration", "new_object")
            if fixed is None or late is None:
                continue
            add(trap, fixed, place(), onset=0, fixed=split, shape="steady")
            add(trap, late, place(), onset=split, shape="steady")
        elif trap == "same_place_modes":
            site = at_site(int(rng.integers(n_sites)))
            for mode in rng.choice(["impact", "obstruction", "snag"], int(rng.integers(2, 4)),
                                   replace=False):
                add(trap, str(mode), site, onset=0, shape="steady")
    return tuple(out)

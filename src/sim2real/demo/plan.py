"""What to run: every simulation rollout and real episode as a picklable spec.

All randomness of the plan comes from one generator seeded with the demo seed, and each
episode gets its own seed, so results do not depend on how episodes are spread over workers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import numpy as np

from sim2real.demo.episode import EpisodeResult, InitState, SystemProfile, simulate_episode
from sim2real.demo.fleet import (
    CAUSES,
    DEPLOYMENTS,
    FLEET,
    FLEET_CONFIG,
    NORMAL_SYSTEM,
    STALE_CONFIG,
    STALE_SYSTEM,
    Cause,
    Robot,
    deployment_start,
)
from sim2real.demo.perception import LIGHT_SETTINGS
from sim2real.demo.world import PARAM_RANGES, TRAINING_OBJECTS

__all__ = ["SIZES", "EpisodeSpec", "RealEpisode", "Size", "plan_real", "plan_sim", "run_spec"]

SIM_RATE_HZ = 25.0
REAL_RATE_HZ = 50.0
TASK = "pick_place"


@dataclass(frozen=True)
class Size:
    """How much to generate: simulation rollouts, real episodes per robot and week."""

    n_sim: int
    per_robot_week: int


# "tiny" is for quick checks of the machinery (determinism), too small to analyse.
SIZES = {
    "tiny": Size(24, 1),
    "small": Size(500, 9),
    "default": Size(2000, 30),
    "large": Size(6000, 150),
}


@dataclass(frozen=True)
class EpisodeSpec:
    """Everything :func:`simulate_episode` needs for one episode."""

    episode_id: str
    params: dict[str, float]
    context: dict[str, object]
    init: InitState
    seed: int
    rate_hz: float
    system: SystemProfile | None = None


@dataclass(frozen=True)
class RealEpisode:
    """A real episode: its spec, fleet coordinates, and the cause acting on it (if any).

    ``counterfactual`` is the same episode with the cause removed: a failure is blamed on
    the cause only when this twin succeeds.
    """

    spec: EpisodeSpec
    deployment: str
    started_at: datetime
    robot: Robot
    config_hash: str
    cause: str | None
    counterfactual: EpisodeSpec | None


def run_spec(spec: EpisodeSpec) -> EpisodeResult:
    """Run one planned episode (a top-level function, so worker processes can call it)."""
    return simulate_episode(spec.params, spec.context, spec.init, spec.seed, spec.rate_hz,
                            system=spec.system, episode_id=spec.episode_id)


def _draw(rng: np.random.Generator) -> tuple[dict[str, float], InitState, int, int]:
    """Parameters, start pose, clutter and seed of an ordinary episode (sim's distribution)."""
    params = {k: round(float(rng.uniform(p.low, p.high)), 4) for k, p in PARAM_RANGES.items()}
    init = InitState((round(float(rng.uniform(-0.12, 0.12)), 4),
                      round(float(rng.uniform(-0.1, 0.1)), 4)),
                     round(float(rng.uniform(-np.pi, np.pi)), 4))
    return params, init, int(rng.integers(0, 3)), int(rng.integers(0, 2**31 - 1))


def plan_sim(size: Size, seed: int) -> list[EpisodeSpec]:
    """The domain-randomised simulation rollouts (training catalogue only)."""
    rng = np.random.default_rng([seed, 1])
    settings = sorted(LIGHT_SETTINGS)
    specs = []
    for i in range(size.n_sim):
        params, init, clutter, ep_seed = _draw(rng)
        context: dict[str, object] = {
            "object_type": str(rng.choice(TRAINING_OBJECTS)),
            "light_setting": settings[int(rng.integers(0, len(settings)))],
            "clutter": clutter,
        }
        specs.append(EpisodeSpec(f"sim-{i:05d}", params, context, init, ep_seed, SIM_RATE_HZ))
    return specs


def plan_real(size: Size, seed: int) -> list[RealEpisode]:
    """The fleet's episodes, deployment by deployment, with the causes injected."""
    rng = np.random.default_rng([seed, 2])
    episodes = []
    for d, deployment in enumerate(DEPLOYMENTS):
        for robot in FLEET:
            if d < robot.joins:
                continue
            # Utilisation grows a little week on week, on top of the fleet growth.
            growth = d * size.per_robot_week // 20
            n = max(1, size.per_robot_week + int(rng.integers(-2, 3)) + growth)
            for k in range(n):
                episodes.append(_real_episode(rng, d, deployment, robot, k, n))
    return episodes


def _real_episode(rng: np.random.Generator, d: int, deployment: str, robot: Robot, k: int,
                  n: int) -> RealEpisode:
    params, init, clutter, ep_seed = _draw(rng)
    obj = str(rng.choice(TRAINING_OBJECTS))
    context: dict[str, object] = {"object_type": obj, "light_setting": robot.light_setting,
                                  "clutter": clutter}
    slot = timedelta(days=6.0 * (k + rng.uniform(0.1, 0.9)) / n)
    started = deployment_start(d) + slot + timedelta(minutes=7 * FLEET.index(robot))
    episode_id = f"real-{deployment}-{robot.robot_id}-{k:04d}"
    normal = EpisodeSpec(episode_id, params, context, init, ep_seed, REAL_RATE_HZ, NORMAL_SYSTEM)
    draw = float(rng.random())  # drawn for every episode, so the plan stays aligned
    active = [c for c in CAUSES if c.active(robot, d)]
    config = FLEET_CONFIG
    for cause in active:
        spec = _inject(cause, d, normal, draw, rng)
        if spec is None:
            continue
        if cause.taxonomy == "deployment_system_noise":
            config = STALE_CONFIG
        return RealEpisode(spec, deployment, started, robot, config, cause.name, normal)
    return RealEpisode(normal, deployment, started, robot, config, None, None)


def _inject(cause: Cause, d: int, normal: EpisodeSpec, draw: float,
            rng: np.random.Generator) -> EpisodeSpec | None:
    """The episode as reality runs it under ``cause``, or ``None`` if it spares this one."""
    value = cause.schedule[d]
    if cause.key_param is not None:
        hidden = round(value * float(np.exp(rng.normal(0.0, 0.05))), 4)
        return replace(normal, params={**normal.params, cause.key_param: hidden})
    if cause.taxonomy == "task_scope_overflow":
        if draw >= value:
            return None
        return replace(normal, context={**normal.context, "object_type": "bottle"})
    return replace(normal, system=STALE_SYSTEM)

"""The fleet, its weekly deployments and the root causes injected into "reality".

Reality runs the same episode function as simulation, with hidden parameter values: an
ordinary episode draws them from the same distribution the simulation randomises over (so
its failures are the background failures simulation has too); a cause overrides one of them
beyond that range, swaps the object for one simulation never had, or adds system effects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sim2real.demo.episode import SystemProfile

__all__ = [
    "CAUSES",
    "DEPLOYMENTS",
    "FLEET",
    "FLEET_CONFIG",
    "NORMAL_SYSTEM",
    "STALE_CONFIG",
    "STALE_SYSTEM",
    "Cause",
    "Robot",
    "deployment_start",
]

DEPLOYMENTS = tuple(f"w{i:02d}" for i in range(1, 9))
_FIRST_START = datetime(2024, 3, 4, 7, 0, tzinfo=UTC)


def deployment_start(index: int) -> datetime:
    """When deployment ``index`` (0-based) starts: weekly, Monday 07:00 UTC."""
    return _FIRST_START + timedelta(days=7 * index)


@dataclass(frozen=True)
class Robot:
    """One robot: its site, the deployment it joins the fleet at, its light setting."""

    robot_id: str
    site: str
    joins: int = 0
    light_setting: str = "standard"


# Fleet growth: r03 and r05 join later, so raw failure counts grow with exposure alone.
FLEET: tuple[Robot, ...] = (
    Robot("r01", "site_a"), Robot("r02", "site_a"), Robot("r03", "site_a", joins=2),
    Robot("r04", "site_b"), Robot("r05", "site_b", joins=1),
    Robot("r06", "site_c", light_setting="bright"), Robot("r07", "site_c", light_setting="bright"),
    Robot("r08", "site_c", light_setting="bright"),
)

# A healthy robot's loop: a little jitter and a rare lost message, both too small to make
# an episode fail that would succeed in simulation (which has neither).
NORMAL_SYSTEM = SystemProfile(jitter_ms=2.0, drop_prob=0.001)
# A stale controller config: a bigger message queue that stalls, so latency spikes and
# messages get dropped.
STALE_SYSTEM = SystemProfile(jitter_ms=6.0, spike_rate_hz=0.18, spike_ms=160.0, spike_s=0.4,
                             drop_prob=0.01)
FLEET_CONFIG = "cfg-9b52f4c"
STALE_CONFIG = "cfg-3e1d7a0"


@dataclass(frozen=True)
class Cause:
    """One injected root cause and where and when it acts.

    ``schedule`` maps a deployment index to the hidden value of ``key_param`` there (for
    parameter causes) or to the share of episodes affected (for the new object type).
    """

    name: str
    taxonomy: str
    key_param: str | None
    robots: tuple[str, ...]
    sites: tuple[str, ...]
    schedule: dict[int, float] = field(default_factory=dict)
    fixed_in: int | None = None

    def active(self, robot: Robot, deployment: int) -> bool:
        """Whether this cause acts on ``robot`` during ``deployment``."""
        return robot.robot_id in self.robots and deployment in self.schedule

    @property
    def deployments(self) -> list[str]:
        """Names of the deployments it acts in."""
        return [DEPLOYMENTS[i] for i in sorted(self.schedule)]

    @property
    def true_value(self) -> float | None:
        """The hidden value of ``key_param`` in its last (worst) deployment."""
        if self.key_param is None:
            return None
        return self.schedule[max(self.schedule)]


CAUSES: tuple[Cause, ...] = (
    # The site's lighting dims week after week, from just below the dimmest light simulation
    # covers down. That is 0.55 x 0.9 = 0.495, not 0.55: sim also randomises the "eco"
    # light setting (x0.9), and a light inside that coverage is a condition sim already
    # has, not a gap.
    Cause("site_b_dim_lighting", "perception_drift", "light_level", ("r04", "r05"),
          ("site_b",), {2: 0.46, 3: 0.44, 4: 0.42, 5: 0.40, 6: 0.37, 7: 0.34}),
    # A bad batch of gripper pads on one robot: friction far below the simulated range.
    Cause("r08_worn_pads", "dynamics_mismatch", "friction", ("r08",), ("site_c",),
          {1: 0.3, 2: 0.2, 3: 0.16, 4: 0.15, 5: 0.15, 6: 0.15, 7: 0.15}),
    # A new product line from w03: a tall thin bottle the training catalogue never had.
    Cause("site_a_new_bottle", "task_scope_overflow", None, ("r01", "r02", "r03"),
          ("site_a",), {d: 0.12 for d in range(2, 8)}),
    # One robot kept a stale config until the update shipped with w07.
    Cause("r07_stale_config", "deployment_system_noise", None, ("r07",), ("site_c",),
          {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.0}, fixed_in=6),
)

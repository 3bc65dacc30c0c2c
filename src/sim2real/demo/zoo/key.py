"""A zoo world's answer key: what each cause is, where and when it acts, which failures are its.

The document extends the answer key of the demo and synthetic worlds (same ``events``,
``causes[].name/taxonomy/key_param``, ``fastest_growing``), so their scoring reads it too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sim2real.demo.synthetic.answer import fastest_growing
from sim2real.demo.zoo.model import PARAM_ROLES, Run
from sim2real.demo.zoo.world import MECHANISMS, World

if TYPE_CHECKING:
    from sim2real.demo.zoo.generate import Fleet

__all__ = ["GENERATOR", "VERSION", "CauseKey", "WorldKey", "answer_key"]

GENERATOR = "sim2real.demo.zoo"
VERSION = 1


@dataclass(frozen=True)
class CauseKey:
    """One true cause.

    Attributes:
        key_param: the sim parameter whose real value it changes (``None``: it acts through
            context, the network or contact sim does not model); ``true_value`` and
            ``outside_range`` (of the sim range) go with it.
        actions: the action kinds that fit it.
        deployments: where it can act (its onset up to its fix).
    """

    name: str
    trap: str
    mechanism: str
    taxonomy: str
    key_param: str | None
    true_value: float | None
    outside_range: bool | None
    context: str | None
    actions: tuple[str, ...]
    robots: tuple[str, ...]
    sites: tuple[str, ...]
    deployments: tuple[str, ...]
    fixed_in: str | None
    n_failures: int


@dataclass(frozen=True)
class WorldKey:
    """Where a generated world lies and what it holds (``answer_key.json``, typed).

    ``validate``: the baseline and candidate deployments a fix is checked on, with the
    verdicts each cause's cluster should get, or ``None`` when the world sets no such trap.
    """

    root: Path
    dataset: Path
    path: Path
    seed: int
    traps: tuple[str, ...]
    no_gap: bool
    causes: tuple[CauseKey, ...]
    fastest_growing: str | None
    validate: tuple[tuple[str, ...], tuple[str, ...], Mapping[str, tuple[str, ...]]] | None
    events: Mapping[str, str]
    document: Mapping[str, Any]

    @classmethod
    def read(cls, path: str | Path) -> WorldKey:
        """The key written at ``path`` (the dataset lies beside it, in ``dataset/``)."""
        path = Path(path)
        doc = json.loads(path.read_text())
        causes = tuple(CauseKey(**{**c, "actions": tuple(c["actions"]),
                                   "robots": tuple(c["robots"]), "sites": tuple(c["sites"]),
                                   "deployments": tuple(c["deployments"])})
                       for c in doc["causes"])
        check = doc["validate"]
        validate = None if check is None else (
            tuple(check["baseline"]), tuple(check["candidate"]),
            {k: tuple(v) for k, v in check["expect"].items()})
        return cls(root=path.parent, dataset=path.parent / "dataset", path=path,
                   seed=doc["seed"], traps=tuple(doc["traps"]), no_gap=doc["no_gap"],
                   causes=causes, fastest_growing=doc["fastest_growing"], validate=validate,
                   events=doc["events"], document=doc)


def answer_key(world: World, fleet: Fleet, real: Run, clean: Run, ids: np.ndarray,
               size: float) -> dict[str, Any]:
    """The answer-key document of a generated world.

    A real failure belongs to its episode's active cause when the same episode, with the
    same noise but no cause (``clean``), does not fail; every other failure is background.
    """
    failed = real.failure >= 0
    by_cause = failed & (fleet.cause >= 0) & (clean.failure < 0)
    names = [c.name for c in world.causes]
    events = {str(ids[i]): names[fleet.cause[i]] if by_cause[i] else "background"
              for i in np.flatnonzero(failed)}
    n_dep = len(world.deployments)
    exposure = np.bincount(fleet.deployment, minlength=n_dep)
    per_cause = {name: np.bincount(fleet.deployment[by_cause & (fleet.cause == c)],
                                   minlength=n_dep) for c, name in enumerate(names)}
    split = world.validate_split
    validate = None
    if split is not None:
        expect = {}
        for c in world.causes:
            if c.trap == "validate":
                expect[c.name] = ["shrank", "gone"] if c.fixed_from is not None else ["new",
                                                                                     "grew"]
        validate = {"baseline": list(world.deployments[:split]),
                    "candidate": list(world.deployments[split:]), "expect": expect}
    return {
        "generator": GENERATOR,
        "version": VERSION,
        "seed": world.seed,
        "size": size,
        "traps": list(world.traps),
        "no_gap": world.no_gap,
        "layout": world.layout,
        "channels_declared": world.declare,
        "causes": [_cause(world, c, int(per_cause[c.name].sum())) for c in world.causes],
        "fastest_growing": fastest_growing(per_cause, exposure),
        "fixed": next((c.name for c in world.causes if c.fixed_from is not None), None),
        "validate": validate,
        "confounders": {
            "config_rollouts": [world.deployments[d] for d in world.config_rollouts],
            "hardware": dict(zip(world.robots, world.hardware, strict=True)),
            "episodes_per_robot": dict(zip(world.robots, np.bincount(
                fleet.robot, minlength=len(world.robots)).tolist(), strict=True)),
        },
        "growth": {k: v.tolist() for k, v in per_cause.items()},
        "real_episodes_per_deployment": dict(zip(world.deployments, exposure.tolist(),
                                                 strict=True)),
        "events": dict(sorted(events.items())),
    }


def _cause(world: World, cause: Any, n_failures: int) -> dict[str, Any]:
    taxonomy, role, value, actions, _ = MECHANISMS[cause.mechanism]
    param = world.param(role) if role else None
    outside = None
    if role is not None and value is not None:
        _, low, high = PARAM_ROLES[role]
        outside = not low <= value <= high
    context = None
    if cause.mechanism == "new_object":
        context = f"ctx.{world.object_ctx}={world.new_object.name}"
    elif cause.mechanism == "deep_shelf":
        context = f"ctx.{world.depth[0]}"
    end = cause.fixed_from if cause.fixed_from is not None else len(world.deployments)
    return {
        "name": cause.name,
        "trap": cause.trap,
        "mechanism": cause.mechanism,
        "taxonomy": taxonomy,
        "key_param": param.name if param else None,
        "true_value": round(param.written(value), 6) if param and value is not None else None,
        "outside_range": outside,
        "context": context,
        "actions": list(actions),
        "robots": [world.robots[r] for r in cause.robots],
        "sites": sorted({world.sites[world.robot_site[r]] for r in cause.robots}),
        "deployments": list(world.deployments[cause.onset:end]),
        "fixed_in": world.deployments[cause.fixed_from] if cause.fixed_from is not None
        else None,
        "n_failures": n_failures,
    }

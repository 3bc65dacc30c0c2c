"""The answer key: what really caused each real failure, and which cause grows fastest."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sim2real.cluster.trend import poisson_loglinear
from sim2real.demo.synthetic.fleet import Episodes
from sim2real.demo.synthetic.spec import CauseSpec, WorldSpec

__all__ = ["GENERATOR", "VERSION", "answer_key", "fastest_growing"]

GENERATOR = "sim2real.demo.synthetic"
VERSION = 1


def answer_key(
    spec: WorldSpec, real: Episodes, ids: np.ndarray, counts: np.ndarray, *, seed: int, size: str
) -> dict[str, Any]:
    """The answer-key document (schema shared with the MuJoCo demo) for a generated world.

    Args:
        spec: the world.
        real: the real episodes drawn for it.
        ids: their episode IDs.
        counts: real episodes per deployment (the exposure).
        seed: the generation seed.
        size: the preset name or scale, as recorded.
    """
    names = [c.name for c in spec.causes]
    failed = real.failed
    by_cause = failed & ~real.background
    events = {
        str(ids[i]): "background" if real.background[i] else names[real.cause[i]]
        for i in np.flatnonzero(failed)
    }
    per_cause = {
        name: np.bincount(real.deployment[by_cause & (real.cause == c)], minlength=len(counts))
        for c, name in enumerate(names)
    }
    return {
        "generator": GENERATOR,
        "version": VERSION,
        "seed": seed,
        "size": size,
        "causes": [_cause_entry(spec, c) for c in spec.causes],
        "fastest_growing": fastest_growing(per_cause, counts),
        "fixed": next((c.name for c in spec.causes if c.fixed_from is not None), None),
        "events": events,
    }


def _cause_entry(spec: WorldSpec, cause: CauseSpec) -> dict[str, Any]:
    """Where a cause acts, resolved to concrete robots, sites and deployments."""
    robots = [r for r, s in zip(spec.robots, spec.robot_sites, strict=True)
              if (not cause.robots or r in cause.robots) and (not cause.sites or s in cause.sites)]
    deployments = [d for d in spec.deployments if not cause.deployments or d in cause.deployments]
    if cause.fixed_from is not None:
        deployments = deployments[: spec.deployments.index(cause.fixed_from)]
    return {
        "name": cause.name,
        "taxonomy": cause.taxonomy,
        "key_param": cause.key_param,
        "true_value": cause.true_value,
        "robots": robots,
        "sites": sorted({spec.robot_site(r) for r in robots}, key=spec.sites.index),
        "deployments": deployments,
        "fixed_in": cause.fixed_from,
    }


def fastest_growing(failures: Mapping[str, np.ndarray], episodes: np.ndarray) -> str | None:
    """The cause whose failure rate grows fastest, by the analysis' own statistics.

    Per cause, a Poisson GLM of failures per deployment on the deployment index with offset
    log(real episodes per deployment); the winner has the largest lower 95% bound of the
    slope, provided that bound is above zero.

    Args:
        failures: cause name -> failures per deployment, in deployment order.
        episodes: real episodes per deployment.

    Returns:
        The cause name, or ``None`` when no cause grows significantly.
    """
    x = np.arange(len(episodes), dtype=float)
    exposure = np.asarray(episodes, float)
    best, best_low = None, 0.0
    for name, counts in failures.items():
        # failures in one deployment only pin no slope: no growth can be shown
        if np.count_nonzero(counts) < 2:
            continue
        low = poisson_loglinear(np.asarray(counts, float), x, exposure).slope_low
        if np.isfinite(low) and low > best_low:
            best, best_low = name, low
    return best

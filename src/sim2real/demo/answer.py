"""The answer key: what was injected, which failure each cause produced, what grows fastest."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sim2real.cluster.trend import poisson_loglinear
from sim2real.demo.fleet import CAUSES, DEPLOYMENTS

__all__ = ["BACKGROUND", "answer_key", "growth"]

BACKGROUND = "background"


def growth(failures: Sequence[int], exposure: Sequence[int]) -> tuple[float, float]:
    """Growth of a failure count per deployment, exposure-normalised.

    A Poisson GLM ``failures ~ 1 + deployment_index`` with ``log(exposure)`` as offset: the
    same statistic the analysis uses to rank clusters.

    Returns:
        The growth coefficient (log rate per deployment) and its lower 95% bound.
    """
    y = np.asarray(failures, dtype=float)
    fit = poisson_loglinear(y, np.arange(len(y), dtype=float), np.asarray(exposure, float))
    return fit.slope, fit.slope_low


def answer_key(*, seed: int, size: str, version: int, events: Mapping[str, str],
               deployment_of: Mapping[str, str], exposure: Mapping[str, int]) -> dict[str, Any]:
    """Build the answer key written beside the dataset.

    Args:
        seed, size, version: how the dataset was generated.
        events: real failure episode ID -> cause name or ``"background"``.
        deployment_of: real failure episode ID -> its deployment.
        exposure: deployment -> number of real episodes in it.
    """
    per_deployment = [exposure.get(d, 0) for d in DEPLOYMENTS]
    causes, stats = [], {}
    for cause in CAUSES:
        counts = [sum(1 for e, c in events.items() if c == cause.name and deployment_of[e] == d)
                  for d in DEPLOYMENTS]
        coef, low = growth(counts, per_deployment)
        stats[cause.name] = {"coef": round(coef, 4), "lower95": round(low, 4),
                             "failures_per_deployment": counts}
        causes.append({
            "name": cause.name,
            "taxonomy": cause.taxonomy,
            "key_param": cause.key_param,
            "true_value": cause.true_value,
            "robots": list(cause.robots),
            "sites": list(cause.sites),
            "deployments": cause.deployments,
            "fixed_in": DEPLOYMENTS[cause.fixed_in] if cause.fixed_in is not None else None,
            "n_failures": sum(counts),
            "schedule": {DEPLOYMENTS[i]: v for i, v in sorted(cause.schedule.items())},
        })
    best = max(stats, key=lambda n: stats[n]["lower95"])  # type: ignore[arg-type, return-value]
    fastest = best if float(stats[best]["lower95"]) > 0 else None  # type: ignore[arg-type]
    fixed = [c.name for c in CAUSES if c.fixed_in is not None]
    return {
        "generator": "sim2real.demo",
        "version": version,
        "seed": seed,
        "size": size,
        "causes": causes,
        "fastest_growing": fastest,
        "fixed": fixed[0] if fixed else None,
        "growth": stats,
        "background_failures": sum(1 for c in events.values() if c == BACKGROUND),
        "real_episodes_per_deployment": dict(zip(DEPLOYMENTS, per_deployment, strict=True)),
        "events": dict(sorted(events.items())),
    }

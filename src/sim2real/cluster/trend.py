"""A cluster's failure rate per deployment and its growth, exposure-normalised."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import statsmodels.api as sm

__all__ = ["Trend", "fit_trend"]


@dataclass(frozen=True)
class Trend:
    """Rate per deployment and its log-linear growth.

    Attributes:
        deployments: in time order.
        episodes: ``(n_deployments,)`` real episodes run (the exposure).
        failures: ``(n_deployments,)`` the cluster's failures.
        growth: slope of log-rate per deployment.
        growth_low, growth_high: its 95% Wald interval.
        p_value: two-sided Wald test of zero growth.
        projected_rate: the fitted rate one deployment after the last.
    """

    deployments: tuple[str, ...]
    episodes: np.ndarray
    failures: np.ndarray
    growth: float
    growth_low: float
    growth_high: float
    p_value: float
    projected_rate: float

    @property
    def rates(self) -> np.ndarray:
        return self.failures / np.maximum(self.episodes, 1)


def fit_trend(deployments: Sequence[str], episodes: np.ndarray, failures: np.ndarray) -> Trend:
    """Fit ``failures ~ Poisson(episodes * exp(a + b * deployment_index))``.

    Where the counts cannot pin a slope (failures in fewer than two deployments) half a
    failure is added to every deployment, a Jeffreys-style prior that keeps the slope and
    its interval finite and wide rather than infinite.
    """
    episodes = np.asarray(episodes, dtype=float)
    failures = np.asarray(failures, dtype=float)
    usable = episodes > 0
    x = np.arange(len(deployments), dtype=float)[usable]
    y, exposure = failures[usable], episodes[usable]
    if usable.sum() < 2:
        rate = float(y.sum() / exposure.sum()) if exposure.sum() else 0.0
        return Trend(tuple(deployments), episodes, failures, 0.0, -np.inf, np.inf, 1.0, rate)
    if (y > 0).sum() < 2:
        y = y + 0.5
    design = sm.add_constant(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = sm.GLM(y, design, family=sm.families.Poisson(), offset=np.log(exposure)).fit()
    low, high = fit.conf_int(0.05)[1]
    projected = float(np.exp(fit.params[0] + fit.params[1] * len(deployments)))
    return Trend(tuple(deployments), episodes, failures, float(fit.params[1]), float(low),
                 float(high), float(fit.pvalues[1]), projected)

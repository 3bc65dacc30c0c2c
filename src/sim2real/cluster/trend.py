"""A cluster's failure rate per deployment and its growth, exposure-normalised."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

__all__ = ["PoissonFit", "Trend", "fit_trend", "poisson_loglinear", "rate_ratio_pvalue"]


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
    fit = poisson_loglinear(y, x, exposure)
    projected = float(np.exp(fit.intercept + fit.slope * len(deployments)))
    return Trend(tuple(deployments), episodes, failures, fit.slope, fit.slope_low,
                 fit.slope_high, fit.p_value, projected)


@dataclass(frozen=True)
class PoissonFit:
    """``log E[y] = log(exposure) + intercept + slope * x``, by maximum likelihood.

    Attributes:
        slope_low, slope_high: the slope's 95% Wald interval.
        p_value: two-sided Wald test of a zero slope.
    """

    intercept: float
    slope: float
    slope_low: float
    slope_high: float
    p_value: float


def poisson_loglinear(y: np.ndarray, x: np.ndarray, exposure: np.ndarray) -> PoissonFit:
    """Fit a Poisson log-linear model with one covariate and an exposure offset.

    Newton-Raphson (for the canonical log link the same as iteratively reweighted least
    squares), started from the pooled rate; standard errors from the inverse Fisher
    information, the intervals and test normal (Wald), as a GLM does it.

    Args:
        y: ``(n,)`` counts (may be fractional: a prior's half counts).
        x: ``(n,)`` covariate, at least two distinct values.
        exposure: ``(n,)`` positive exposures.
    """
    y, x, offset = (np.asarray(a, dtype=float) for a in (y, x, np.log(exposure)))
    design = np.column_stack([np.ones_like(x), x])  # (n, 2)

    def loglik(b: np.ndarray) -> float:
        eta = offset + design @ b
        return float(y @ eta - np.exp(eta).sum())

    beta = np.array([np.log(max(y.sum(), 1e-12) / np.exp(offset).sum()), 0.0])
    for _ in range(100):
        mu = np.exp(offset + design @ beta)
        step = np.linalg.solve(design.T @ (mu[:, None] * design), design.T @ (y - mu))
        # halve a step that overshoots (counts at one end only push the slope far out)
        while loglik(beta + step) < loglik(beta) and np.max(np.abs(step)) > 1e-12:
            step = step / 2
        beta = beta + step
        if np.max(np.abs(step)) < 1e-10:
            break
    mu = np.exp(offset + design @ beta)
    se = float(np.sqrt(np.linalg.inv(design.T @ (mu[:, None] * design))[1, 1]))
    z = stats.norm.ppf(0.975)
    p = float(2 * stats.norm.sf(abs(beta[1]) / se)) if se > 0 else 1.0
    return PoissonFit(float(beta[0]), float(beta[1]), float(beta[1] - z * se),
                      float(beta[1] + z * se), p)


def rate_ratio_pvalue(c1: int, e1: float, c0: int, e0: float,
                      alternative: Literal["greater", "less"]) -> float:
    """One-sided exact conditional test of the rate ratio ``(c1/e1) / (c0/e0)`` against 1.

    Given ``c1 + c0`` failures in all, ``c1`` is binomial with success probability
    ``e1 / (e1 + e0)`` when both rates are equal.
    """
    if c1 + c0 == 0:
        return 1.0
    return float(stats.binomtest(int(c1), int(c1 + c0), e1 / (e1 + e0),
                                 alternative=alternative).pvalue)

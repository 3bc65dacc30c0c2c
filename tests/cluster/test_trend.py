"""Growth is exposure-normalised and ranked by its lower bound."""

from __future__ import annotations

import numpy as np

from sim2real.cluster.trend import fit_trend

DEPLOYMENTS = ("w01", "w02", "w03", "w04")


def test_fleet_growth_is_not_cluster_growth() -> None:
    episodes = np.array([100, 200, 400, 800])
    trend = fit_trend(DEPLOYMENTS, episodes, np.array([5, 10, 20, 40]))
    assert abs(trend.growth) < 1e-6
    assert trend.p_value > 0.5
    np.testing.assert_allclose(trend.rates, 0.05)


def test_small_cluster_does_not_outrank_large_steady_growth() -> None:
    episodes = np.full(4, 1000)
    small = fit_trend(DEPLOYMENTS, episodes, np.array([1, 1, 2, 3]))
    large = fit_trend(DEPLOYMENTS, episodes, np.array([50, 63, 77, 90]))
    assert small.growth > large.growth  # the point estimate alone would rank it first
    assert large.growth_low > 0 > small.growth_low
    assert large.p_value < 0.01 < small.p_value


def test_single_deployment_and_isolated_counts_stay_finite() -> None:
    one = fit_trend(("w01",), np.array([100]), np.array([3]))
    assert one.growth == 0.0 and one.p_value == 1.0
    late = fit_trend(DEPLOYMENTS, np.full(4, 100), np.array([0, 0, 0, 6]))
    assert np.isfinite(late.growth) and np.isfinite(late.growth_low)

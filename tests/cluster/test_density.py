"""A faint failure joins the cluster it deviates along; sim-like noise does not."""

from __future__ import annotations

import numpy as np

from sim2real.cluster.density import FailureClusterer, FeatureSpace

_CHANNELS = 6


def _space(rng: np.random.Generator) -> tuple[FeatureSpace, np.ndarray]:
    """40 strong events along one direction (a perception group), 10 faint ones along it and
    10 sim-like ones (no family group), and a null of 300 no-gap comparisons."""
    direction = np.array([-1.0, -0.8, 0.5, 0.0, 0.0, 0.0])
    direction /= np.linalg.norm(direction)
    strong = 8.0 * direction + rng.normal(0.0, 0.7, (40, _CHANNELS))
    faint = 3.5 * direction + rng.normal(0.0, 0.7, (10, _CHANNELS))
    sim_like = rng.normal(0.0, 1.0, (10, _CHANNELS))
    effects = np.vstack([strong, faint, sim_like])
    groups = np.array(["perception_drift"] * 40 + ["unexplained"] * 20, dtype=object)
    columns = {"perception_drift": np.arange(3), "unexplained": np.arange(_CHANNELS)}
    values = np.where(np.abs(effects) > 3.0, effects, 0.0)  # the dead band of the features
    null = rng.normal(0.0, 1.0, (300, _CHANNELS))
    truth = np.array(["strong"] * 40 + ["faint"] * 10 + ["sim_like"] * 10)
    return FeatureSpace(values, groups, columns, ((), ()), effects, null), truth


def test_faint_events_join_the_cluster_they_deviate_along() -> None:
    space, truth = _space(np.random.default_rng(0))
    labels = FailureClusterer(min_cluster_size=10).fit(space).labels_
    cluster = np.bincount(labels[truth == "strong"] + 1).argmax() - 1
    assert cluster >= 0
    assert np.mean(labels[truth == "faint"] == cluster) >= 0.8
    assert np.mean(labels[truth == "sim_like"] == -1) >= 0.8


def test_predict_attaches_new_events_by_the_same_rule() -> None:
    space, _ = _space(np.random.default_rng(1))
    clusterer = FailureClusterer(min_cluster_size=10).fit(space)
    np.testing.assert_array_equal(clusterer.predict(space), clusterer.labels_)

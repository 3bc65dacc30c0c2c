"""Density-based clustering of drift signatures: no number of clusters to choose."""

from __future__ import annotations

import numpy as np
from sklearn.cluster import HDBSCAN

from sim2real.drift.compute import Signatures

__all__ = ["FailureClusterer", "signature_features"]


def signature_features(
    sig: Signatures, deadband: float = 3.0, max_norm: float = 1.5
) -> np.ndarray:
    """``(n_events, n_features)`` the space failures are clustered in.

    Channel effects (sigma units) lose a dead band of ``deadband`` (what sim-vs-sim comparisons
    show routinely) and are log-compressed, so a cause whose size grows over deployments
    stays one elongated cluster and sim-like failures collapse near the origin; then one
    feature per context column's novelty. Suspicious ``sys.*`` values are left out: they
    mark every failure of a robot, whatever its cause, and would split real clusters.
    """
    effects = sig.effects
    if not len(effects):
        return np.zeros((0, 1))
    shrunk = np.sign(effects) * np.log1p(np.maximum(np.abs(effects) - deadband, 0.0))
    novelty = [np.log1p(v) for v in sig.novelty.scores.values()]
    features = np.column_stack([shrunk, *novelty])
    # Past ``max_norm`` only the direction counts: which signals deviate, and which way.
    # A cause that grows over deployments then stays one cluster instead of a trail.
    norm = np.linalg.norm(features, axis=1, keepdims=True)
    return features * np.minimum(1.0, max_norm / np.maximum(norm, 1e-12))


class FailureClusterer:
    """HDBSCAN over signature features; events in no dense region get label -1.

    HDBSCAN calls the sparse rim of a cluster noise; an event is attached to a cluster when
    it lies no farther from the cluster's nearest member than the cluster's own members lie
    from each other (the largest nearest-neighbour distance inside it). The same rule
    assigns new events in :meth:`predict`.

    Args:
        min_cluster_size: smallest group called a cluster; ``None`` scales it with the
            number of events (2 %, at least 5).
        min_samples: neighbourhood size of the density estimate.
    """

    def __init__(self, min_cluster_size: int | None = None, min_samples: int = 4) -> None:
        self.min_cluster_size = min_cluster_size
        self.min_samples = min_samples

    def fit(self, features: np.ndarray) -> FailureClusterer:
        """Cluster ``features`` ``(n_events, n_features)``; sets ``labels_``."""
        n = features.shape[0]
        size = self.min_cluster_size or max(5, round(0.02 * n))
        self.features_ = features
        self.labels_ = np.full(n, -1)
        self.reach_: dict[int, float] = {}
        if n < size:
            return self
        model = HDBSCAN(min_cluster_size=size, min_samples=min(self.min_samples, n - 1),
                        copy=True)
        dense = model.fit_predict(features)
        self.reach_ = {c: _reach(features[dense == c]) for c in sorted(set(dense) - {-1})}
        self.labels_ = np.where(dense >= 0, dense, self._attach(features, dense))
        return self

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Assign new events ``(n, n_features)`` to the fitted clusters, -1 where none fits."""
        return self._attach(features, self.labels_)

    def _attach(self, features: np.ndarray, labels: np.ndarray) -> np.ndarray:
        clustered = labels >= 0
        if not clustered.any() or features.shape[0] == 0:
            return np.full(features.shape[0], -1)
        members = self.features_[clustered]
        member_labels = labels[clustered]
        out = np.full(features.shape[0], -1)
        for start in range(0, features.shape[0], 1024):
            block = features[start : start + 1024]
            dist = np.linalg.norm(block[:, None, :] - members[None, :, :], axis=2)
            nearest = dist.argmin(axis=1)
            label = member_labels[nearest]
            reach = np.array([self.reach_[c] for c in label])
            fits = dist[np.arange(len(block)), nearest] <= reach
            out[start : start + len(block)] = np.where(fits, label, -1)
        return out


def _reach(members: np.ndarray) -> float:
    """The largest distance from a member to its nearest fellow member."""
    if len(members) < 2:
        return 0.0
    dist = np.linalg.norm(members[:, None, :] - members[None, :, :], axis=2)
    np.fill_diagonal(dist, np.inf)
    return float(dist.min(axis=1).max())

"""Clustering: the sampled HDBSCAN path against scikit-learn's HDBSCAN on all points.

Data: signature-like points, 16 dimensions: 8 Gaussian causes of different spreads plus
5 % uniform background, seeded. At 100k points both run and are compared (ARI of our labels
against scikit-learn's); at 1M only the sampled path runs.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

__all__ = ["clustering", "points"]

N_DIM, N_CAUSES = 16, 8


def points(n: int, seed: int = 0) -> np.ndarray:
    """``(n, 16)`` seeded points: Gaussian causes and uniform background."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-6, 6, size=(N_CAUSES, N_DIM))
    spread = rng.uniform(0.3, 0.8, size=N_CAUSES)
    n_noise = n // 20
    cause = rng.integers(0, N_CAUSES, size=n - n_noise)
    x = centres[cause] + rng.normal(size=(n - n_noise, N_DIM)) * spread[cause, None]
    noise = rng.uniform(-8, 8, size=(n_noise, N_DIM))
    return np.vstack([x, noise])[rng.permutation(n)]


def _clusterer() -> Any:
    # The density clusterer of one feature group: what HDBSCAN's cost is measured on.
    from sim2real.cluster.density import _DensityClusterer

    return _DensityClusterer


def clustering(sizes: list[int]) -> dict[str, Any]:
    """Times (and, where scikit-learn's full run is measured, ARI) per size."""
    from sklearn.cluster import HDBSCAN
    from sklearn.metrics import adjusted_rand_score

    out: dict[str, Any] = {}
    for n in sizes:
        x = points(n)
        size = max(5, round(0.02 * n))
        start = time.perf_counter()
        ours = _clusterer()(size).fit(x).labels_
        row: dict[str, Any] = {"ours_s": time.perf_counter() - start,
                               "clusters": len(set(ours.tolist()) - {-1})}
        if n <= 200_000:
            start = time.perf_counter()
            full = HDBSCAN(min_cluster_size=size, min_samples=4, copy=True).fit_predict(x)
            row["sklearn_s"] = time.perf_counter() - start
            row["speedup"] = row["sklearn_s"] / row["ours_s"]
            row["ari"] = float(adjusted_rand_score(full, ours))
        out[str(n)] = row
    return out

"""Dynamic time warping between multichannel windows, compiled with numba where installed.

Used to refine prefiltered candidates (numba compiles the kernel; without numba a NumPy
version gives the same numbers, slowly).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["HAVE_NUMBA", "dtw_distances"]


def _dtw_many(query: np.ndarray, candidates: np.ndarray, band: int) -> np.ndarray:
    """DTW (squared-Euclidean step cost, Sakoe-Chiba ``band``) of ``query`` to each candidate."""
    n, p = candidates.shape[0], query.shape[0]
    out = np.empty(n)
    for k in range(n):
        cost = np.full((p + 1, p + 1), np.inf)
        cost[0, 0] = 0.0
        cand = candidates[k]
        for i in range(1, p + 1):
            lo, hi = max(1, i - band), min(p, i + band)
            for j in range(lo, hi + 1):
                d = 0.0
                for c in range(query.shape[1]):
                    diff = query[i - 1, c] - cand[j - 1, c]
                    d += diff * diff
                cost[i, j] = d + min(cost[i - 1, j], cost[i, j - 1], cost[i - 1, j - 1])
        out[k] = cost[p, p]
    return out


def _compile() -> tuple[Callable[..., Any], bool]:
    try:
        import numba
    except ImportError:
        return _dtw_many, False
    return numba.njit(cache=True, nogil=True)(_dtw_many), True


_KERNEL, HAVE_NUMBA = _compile()


def dtw_distances(query: np.ndarray, candidates: np.ndarray, band: int | None = None) -> np.ndarray:
    """``(n,)`` DTW distances of ``query`` ``(n_points, n_channels)`` to ``candidates``.

    Args:
        query: one window, NaN-free (scale channels beforehand).
        candidates: ``(n, n_points, n_channels)`` windows of the same length.
        band: largest allowed time shift in samples; default a tenth of the window (the
            usual Sakoe-Chiba width).
    """
    p = query.shape[0]
    width = max(1, p // 10) if band is None else band
    q = np.ascontiguousarray(query, dtype=np.float64)
    c = np.ascontiguousarray(candidates, dtype=np.float64)
    return np.asarray(_KERNEL(q, c, width))

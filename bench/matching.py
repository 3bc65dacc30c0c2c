"""Matching: descriptor prefilter + compiled DTW against brute-force DTW, same candidates.

Bank: every sim rollout of the fleet as one window over its whole run (32 points, all sim
channels, scaled by the sim's own spread). Queries: real failures, over the run up to the
failure. Exact: DTW to every rollout of the bank. Fast: :class:`FlatIndex` over 8-segment
piecewise-mean descriptors picks ``K`` candidates, DTW ranks them. DTW:
squared-Euclidean step cost, Sakoe-Chiba band of a tenth of the window (3 of 32 samples).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc

__all__ = ["matching"]

N_POINTS, N_QUERIES, K_NEAREST, N_CANDIDATES = 32, 100, 10, 200


def _windows(grid: Any, ends: np.ndarray) -> np.ndarray:
    from sim2real.match.matcher import window_times

    times = window_times(ends, float(ends.max()) + 1.0, N_POINTS)  # start 0, end at ``ends``
    return np.asarray(grid.at(np.arange(len(ends)), times))


def matching(dataset: Path) -> dict[str, Any]:
    """Recall@10 and speed of the fast path against brute-force DTW."""
    from sim2real.dataset import load_dataset
    from sim2real.match.dtw import HAVE_NUMBA, dtw_distances
    from sim2real.match.grid import build_grid
    from sim2real.match.index import FlatIndex, paa_descriptors
    from sim2real.match.timebase import time_base

    ds = load_dataset(dataset)
    ep = ds.episodes
    sim = ep.filter(pc.equal(ep["source"], "sim"))["episode_id"].to_pylist()
    real = ep.filter(pc.and_(pc.equal(ep["source"], "real"), pc.equal(ep["outcome"], "failure")))
    rng = np.random.default_rng(0)
    picked = sorted(rng.choice(real.num_rows, size=min(N_QUERIES, real.num_rows),
                               replace=False).tolist())
    failures = real.take(picked)
    channels = [c for c in ds.channels if not c.startswith(("loop_", "dropped"))]
    dt = time_base(ds, {"sim": sim}, channels).dt
    sim_grid = build_grid(ds, sim, channels, dt, 12.0)
    bank = _windows(sim_grid, sim_grid.durations)
    scale = np.nanstd(bank.reshape(-1, bank.shape[-1]), axis=0)
    scale = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
    bank = np.nan_to_num(bank / scale)
    fail_grid = build_grid(ds, failures["episode_id"].to_pylist(), channels, dt, 12.0)
    ends = failures["failure_time"].to_numpy(zero_copy_only=False).astype(float)
    ends = np.where(np.isfinite(ends), ends, fail_grid.durations)
    queries = np.nan_to_num(_windows(fail_grid, ends) / scale)
    dtw_distances(queries[0], bank[:2])  # compile outside the timing
    start = time.perf_counter()
    exact = [np.argsort(dtw_distances(q, bank), kind="stable")[:K_NEAREST] for q in queries]
    brute_s = time.perf_counter() - start
    start = time.perf_counter()
    index = FlatIndex().fit(paa_descriptors(bank))
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    fast = []
    candidates = index.search_batch(paa_descriptors(queries), N_CANDIDATES)
    for q, cand in zip(queries, candidates, strict=True):
        fast.append(cand[np.argsort(dtw_distances(q, bank[cand]), kind="stable")[:K_NEAREST]])
    fast_s = time.perf_counter() - start
    recall = float(np.mean([len(set(a) & set(b)) / K_NEAREST
                            for a, b in zip(exact, fast, strict=True)]))
    return {"bank": int(bank.shape[0]), "queries": len(queries), "channels": len(channels),
            "numba": HAVE_NUMBA, "recall_at_10": recall, "brute_s": brute_s,
            "index_build_s": build_s, "fast_s": fast_s, "speedup": brute_s / fast_s}

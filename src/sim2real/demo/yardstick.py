"""A plain yardstick for failure clustering: KMeans on per-episode summary features.

Benchmarks and tests run it beside ``analyze`` on the same failures: where sim2real's
clusters agree less with the true causes than this does, its clustering space has lost
information the raw signals carry. The analysis never uses it.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score

from sim2real.dataset import Dataset, load_dataset
from sim2real.dataset.schema import BANK_SOURCES

__all__ = ["STATISTICS", "summary_features", "yardstick_labels"]

STATISTICS = ("mean", "std", "min", "max", "last")


def summary_features(ds: Dataset, episode_ids: list[str]) -> np.ndarray:
    """``(n, n_channels * 5)``: each channel's mean, std, min, max and last value over each
    episode (NaN where the episode never records the channel)."""
    channels = list(ds.channels)
    table = ds.read_signals(episode_ids, channels)
    ids = np.array(table["episode_id"].to_pylist(), dtype=object)
    values = np.column_stack([table[c].to_numpy(zero_copy_only=False).astype(float)
                              for c in channels])
    out = np.full((len(episode_ids), len(channels) * len(STATISTICS)), np.nan)
    for i, episode in enumerate(episode_ids):
        rows = values[ids == episode]
        if rows.size == 0:
            continue
        with warnings.catch_warnings():  # a channel the episode never records: NaN, quietly
            warnings.simplefilter("ignore", RuntimeWarning)
            last = np.array([col[np.isfinite(col)][-1] if np.isfinite(col).any() else np.nan
                             for col in rows.T])
            stats = [np.nanmean(rows, axis=0), np.nanstd(rows, axis=0),
                     np.nanmin(rows, axis=0), np.nanmax(rows, axis=0), last]
        out[i] = np.concatenate(stats)
    return out


def yardstick_labels(dataset: str | Path | Dataset, seed: int = 0,
                     k_max: int = 8) -> dict[str, int]:
    """Cluster the real failures of ``dataset`` with KMeans, the number of clusters chosen
    by silhouette among 2 ... ``k_max``.

    Features: :func:`summary_features`, z-scored against the reference episodes (sim
    rollouts, or the normal runs of a ``source = reference`` dataset).

    Returns:
        Every real failure's episode ID -> its cluster.
    """
    ds = dataset if isinstance(dataset, Dataset) else load_dataset(dataset)
    episodes = ds.episodes
    failed = pc.and_(pc.equal(episodes["source"], "real"),
                     pc.equal(episodes["outcome"], "failure"))
    failures = episodes.filter(pc.fill_null(failed, False))["episode_id"].to_pylist()
    bank = episodes.filter(pc.is_in(episodes["source"], value_set=pa.array(BANK_SOURCES)))
    reference = summary_features(ds, bank["episode_id"].to_pylist())
    x = summary_features(ds, failures)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        centre = np.nanmean(reference, axis=0)
        spread = np.nanstd(reference, axis=0)
    # A feature constant over the reference (a channel that never moves) is scaled by the
    # failures' own spread instead of dividing by zero.
    own = np.nanstd(x, axis=0)
    spread = np.where(spread > 0, spread, np.where(own > 0, own, 1.0))
    z = np.nan_to_num((x - np.nan_to_num(centre)) / spread)
    if len(failures) < 3:
        return dict.fromkeys(failures, 0)
    best, best_score = np.zeros(len(failures), dtype=int), -np.inf
    for k in range(2, min(k_max, len(failures) - 1) + 1):
        labels = KMeans(k, n_init=10, random_state=seed).fit_predict(z)
        if len(set(labels.tolist())) < 2:
            continue
        score = silhouette_score(z, labels)
        if score > best_score:
            best, best_score = labels, score
    return dict(zip(failures, best.tolist(), strict=True))


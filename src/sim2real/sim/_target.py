"""Which real episodes a calibration or check replays, and which parameters it may move.

The episodes are a cluster's events, taken from an existing ``analyze`` run folder or
from a fresh analysis, or listed explicitly. The parameters default to the cluster's
``sim_params`` that the report's attribution says explain part of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim2real.dataset import Dataset
from sim2real.errors import UsageError
from sim2real.report.model import ClusterReport, ReportModel
from sim2real.report.snapshot import Report

__all__ = ["Target", "resolve_target"]


@dataclass(frozen=True)
class Target:
    """The episodes to replay and, from the report, the parameters it points to.

    Attributes:
        cluster_id: the cluster, or ``None`` for an explicit episode list.
        episodes: real episode IDs, at most ``max_episodes`` of them.
        suggested: the parameters the report says explain part of the cluster, most first
            (empty without a report or when it explains nothing).
    """

    cluster_id: str | None
    episodes: tuple[str, ...]
    suggested: tuple[str, ...]


def resolve_target(ds: Dataset, *, cluster: str | None, episodes: Sequence[str] | None,
                   run: str | Path | ReportModel | None, max_episodes: int, seed: int,
                   progress: bool = False) -> Target:
    """Find the episodes to replay.

    Args:
        ds: the dataset.
        cluster: a cluster ID of the report.
        episodes: explicit real episode IDs (instead of, or narrowing, ``cluster``).
        run: an ``analyze`` output folder, or a report already in memory; without it the
            dataset is analysed first.
        max_episodes: replay at most this many (a seeded random subset beyond that).
        seed: chooses that subset.
        progress: show the analysis' progress when it has to run.

    Raises:
        UsageError: neither a cluster nor episodes, or the cluster is not in the report.
    """
    if cluster is None and not episodes:
        raise UsageError("name a cluster (--cluster C3) or the episodes to replay (--episodes)")
    suggested: tuple[str, ...] = ()
    ids = list(episodes or [])
    if cluster is not None:
        found = _cluster(_report(ds, run, seed, progress), cluster, run)
        # Only what the attribution says explains part of the cluster, most first: a
        # parameter merely shifted is no evidence (calibration screens them all instead).
        suggested = tuple(p.param for p in sorted(
            (p for p in found.sim_params if (p.explained or 0.0) > 0),
            key=lambda p: -(p.explained or 0.0)))
        ids = [e for e in found.events if not ids or e in ids]
    if len(ids) > max_episodes:
        rng = np.random.default_rng(seed)
        keep = sorted(rng.choice(len(ids), size=max_episodes, replace=False).tolist())
        ids = [ids[i] for i in keep]
    if not ids:
        raise UsageError(f"cluster {cluster}: none of the given episodes are in it")
    return Target(cluster, tuple(ids), suggested)


def _report(ds: Dataset, run: str | Path | ReportModel | None, seed: int, progress: bool
            ) -> ReportModel:
    if isinstance(run, ReportModel):
        return run
    if run is not None:
        return Report.load(run).model
    from sim2real.api import analyze  # late: the analysis pulls in every stage

    return analyze(ds, seed=seed, progress=progress).model


def _cluster(model: ReportModel, cluster: str, run: str | Path | ReportModel | None
             ) -> ClusterReport:
    for c in model.clusters:
        if c.cluster_id == cluster:
            return c
    where = f"{run}/report.json" if isinstance(run, str | Path) else "the analysis"
    known = ", ".join(c.cluster_id for c in model.clusters) or "none"
    msg = f"cluster {cluster!r} is not in {where}; its clusters: {known}"
    raise UsageError(msg)

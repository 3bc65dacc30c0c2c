"""Ranked actions per cluster (filled in by the attribution work)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim2real.report.model import Action

if TYPE_CHECKING:
    from sim2real.attribute.params import ParamEstimate
    from sim2real.cluster.taxonomy import ClusterLabel
    from sim2real.pipeline import Diagnosis

__all__ = ["propose_actions"]


def propose_actions(
    diagnosis: Diagnosis, rows: np.ndarray, label: ClusterLabel, params: list[ParamEstimate]
) -> list[Action]:
    """Actions most likely to shrink the cluster, most promising first."""
    return []

"""Cluster IDs that stay the same across runs, and each cluster's lifecycle state."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim2real.pipeline import Diagnosis
    from sim2real.report.build import ClusterFinding
    from sim2real.report.model import ReportModel

__all__ = ["Identity", "assign_ids"]


@dataclass(frozen=True)
class Identity:
    cluster_id: str
    lifecycle: str


def assign_ids(
    diagnosis: Diagnosis, findings: Sequence[ClusterFinding], previous: ReportModel | None
) -> list[Identity]:
    """IDs in urgency order, ``C1`` first."""
    return [Identity(f"C{i + 1}", "new") for i in range(len(findings))]

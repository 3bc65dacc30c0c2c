"""Simulation-parameter attribution (filled in by the attribution work)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sim2real.pipeline import Diagnosis

__all__ = ["ParamEstimate", "infer_params"]


@dataclass(frozen=True)
class ParamEstimate:
    """The value a cluster's real episodes point to for one simulation parameter."""

    param: str
    sim_low: float
    sim_high: float
    sim_nominal: float
    estimate: float
    shift: float
    outside_range: bool
    uncertainty: float
    explained: float

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def infer_params(diagnosis: Diagnosis, rows: np.ndarray) -> list[ParamEstimate]:
    """Parameter estimates for the cluster of events ``rows``, most different first."""
    return []

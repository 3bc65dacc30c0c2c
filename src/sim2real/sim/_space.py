"""The space calibration searches: parameters in units of their randomisation range.

The optimiser works on ``x``, one coordinate per parameter, in which the randomisation
range is one unit wide and ``x = 0`` is the nominal value. A positive parameter is
searched in log scale (a friction of 0.15 is as far below 0.6 as 2.4 is above it) and its
bounds reach ``widen`` times beyond the range on either side; a parameter that may be
negative is searched linearly, ``widen`` range widths beyond each end. Searching beyond
the randomisation range is the point: reality's value is often outside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sim2real.dataset.schema import ParamRange

__all__ = ["SearchSpace"]


@dataclass(frozen=True)
class SearchSpace:
    """Maps optimiser coordinates to parameter values and back.

    Attributes:
        ranges: the searched parameters' randomisation ranges, in coordinate order.
        widen: how far beyond the range the search may go (a factor for log-scaled
            parameters, range widths for linear ones).
    """

    ranges: tuple[ParamRange, ...]
    widen: float = 4.0

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.ranges]

    def _log(self, r: ParamRange) -> bool:
        return r.low > 0 and r.nominal > 0

    def _unit(self, r: ParamRange) -> float:
        if self._log(r):
            return math.log(r.high / r.low) if r.high > r.low else math.log(2.0)
        return r.spread

    def value(self, r: ParamRange, x: float) -> float:
        """The parameter value at coordinate ``x``."""
        if self._log(r):
            return r.nominal * math.exp(x * self._unit(r))
        return r.nominal + x * self._unit(r)

    def coord(self, r: ParamRange, value: float) -> float:
        """The coordinate of a parameter value."""
        if self._log(r):
            return math.log(max(value, 1e-12) / r.nominal) / self._unit(r)
        return (value - r.nominal) / self._unit(r)

    def values(self, x: Sequence[float] | np.ndarray) -> dict[str, float]:
        """Parameter values, rounded to 6 significant digits so outputs read cleanly."""
        return {r.name: float(f"{self.value(r, float(xi)):.6g}")
                for r, xi in zip(self.ranges, x, strict=True)}

    def coords(self, values: Mapping[str, float]) -> np.ndarray:
        return np.array([self.coord(r, values[r.name]) for r in self.ranges])

    def bounds(self) -> tuple[list[float], list[float]]:
        """Lower and upper coordinate bounds of the search."""
        lo, hi = [], []
        for r in self.ranges:
            if self._log(r):
                lo.append(self.coord(r, r.low / self.widen))
                hi.append(self.coord(r, r.high * self.widen))
            else:
                lo.append(self.coord(r, r.low - self.widen * r.spread))
                hi.append(self.coord(r, r.high + self.widen * r.spread))
        return lo, hi

    def value_std(self, r: ParamRange, x: float, x_std: float) -> float:
        """A coordinate spread at ``x`` in parameter units (first order)."""
        if self._log(r):
            return self.value(r, x) * self._unit(r) * x_std
        return self._unit(r) * x_std

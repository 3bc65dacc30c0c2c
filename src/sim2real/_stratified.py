"""Stratified 2x2 tests: does an exposure go with an outcome *within* each stratum?

Shared by the event-level ``sys.*`` findings (:mod:`sim2real.drift.evidence`) and the
cluster-level confounders (:mod:`sim2real.attribute.confounding`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["StratifiedTest", "mantel_haenszel", "strata", "tables"]


@dataclass(frozen=True)
class StratifiedTest:
    """A Cochran-Mantel-Haenszel test of 2x2 tables (exposed x outcome), one per stratum.

    Attributes:
        odds_ratio: the Mantel-Haenszel common odds ratio (``inf`` when no unexposed
            stratum member had the outcome).
        ci_low, ci_high: its 95 % interval (Robins-Breslow-Greenland variance).
        p_value: one-sided (odds ratio above 1), continuity-corrected.
    """

    odds_ratio: float
    ci_low: float
    ci_high: float
    p_value: float


def mantel_haenszel(tables: np.ndarray) -> StratifiedTest:
    """Test ``tables`` ``(n_strata, 2, 2)``: rows exposed / not, columns outcome / not.

    Strata with a single episode or no variation carry no information and are skipped.
    """
    t = np.asarray(tables, dtype=float)
    n = t.sum(axis=(1, 2))
    a, b, c, d = t[:, 0, 0], t[:, 0, 1], t[:, 1, 0], t[:, 1, 1]
    keep = (n > 1) & (a + b > 0) & (c + d > 0) & (a + c > 0) & (b + d > 0)
    if not keep.any():
        return StratifiedTest(1.0, 0.0, np.inf, 1.0)
    a, b, c, d, n = a[keep], b[keep], c[keep], d[keep], n[keep]
    expected = (a + b) * (a + c) / n
    variance = (a + b) * (c + d) * (a + c) * (b + d) / (n**2 * (n - 1))
    excess = a.sum() - expected.sum()
    chi = (max(abs(excess) - 0.5, 0.0)) / np.sqrt(variance.sum())
    p = float(stats.norm.sf(chi)) if excess > 0 else 1.0
    r, s = a * d / n, b * c / n
    pp, q = (a + d) / n, (b + c) / n
    if s.sum() == 0:
        return StratifiedTest(np.inf, np.inf, np.inf, p)
    if r.sum() == 0:
        return StratifiedTest(0.0, 0.0, 0.0, p)
    odds = r.sum() / s.sum()
    var = ((pp * r).sum() / (2 * r.sum() ** 2) + (pp * s + q * r).sum() / (2 * r.sum() * s.sum())
           + (q * s).sum() / (2 * s.sum() ** 2))
    half = 1.96 * np.sqrt(var)
    return StratifiedTest(float(odds), float(odds * np.exp(-half)), float(odds * np.exp(half)),
                          p)


def tables(strata: np.ndarray, exposed: np.ndarray, outcome: np.ndarray,
           members: np.ndarray) -> np.ndarray:
    """``(n_strata, 2, 2)`` counts of ``members`` by stratum (:func:`strata`), exposure and
    outcome."""
    codes, index = np.unique(strata[members], return_inverse=True)
    out = np.zeros((len(codes), 2, 2))
    np.add.at(out, (index, (~exposed[members]).astype(int), (~outcome[members]).astype(int)),
              1)
    return out


def strata(*columns: np.ndarray) -> np.ndarray:
    """``(n,)`` each row's stratum, the combination of its ``columns``' values, as an
    integer code in the order of the combinations' text (each test then groups integers,
    not strings)."""
    keys = np.array(["\x1f".join(map(str, row)) for row in zip(*columns, strict=True)],
                    dtype=object)
    return np.unique(keys, return_inverse=True)[1].reshape(-1)


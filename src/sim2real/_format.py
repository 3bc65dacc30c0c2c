"""Numbers as people read them: p-values, and values to the precision their interval has.

Shared by the report pages, the terminal summaries and the action texts, so a number reads
the same wherever it appears.
"""

from __future__ import annotations

import math

__all__ = ["fmt_p", "fmt_range", "fmt_value"]


def fmt_p(p: float) -> str:
    """A p-value as people read it: ``< 0.001`` below that, else two significant digits."""
    return "< 0.001" if p < 0.001 else f"{p:.2g}"


def _decimals(spread: float) -> int:
    """Decimals that show ``spread`` to two significant digits (none for spreads >= 10)."""
    if not math.isfinite(spread) or spread <= 0:
        return 3
    return max(0, 1 - math.floor(math.log10(spread)))


def fmt_value(value: float, low: float, high: float) -> str:
    """``value`` to the precision its interval ``[low, high]`` supports.

    The interval's width sets the last decimal shown, two significant digits of the width:
    0.3111 in an interval 1.09 wide reads 0.3, not 0.3111.
    """
    d = _decimals(abs(high - low))
    return f"{value:.{d}f}"


def fmt_range(low: float, high: float, *, outward: bool = False) -> str:
    """A range ``[low, high]`` with both ends to the precision of its width.

    ``outward`` rounds the low end down and the high end up, so the range shown still
    holds everything the exact one does (a range to widen a randomisation to).
    """
    if not outward:
        return f"[{fmt_value(low, low, high)}, {fmt_value(high, low, high)}]"
    d = _decimals(abs(high - low))
    step = 10.0**-d
    lo, hi = math.floor(low / step) * step, math.ceil(high / step) * step
    return f"[{lo:.{d}f}, {hi:.{d}f}]"

"""Test helpers: the demo world as the sim tests see it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Demo:
    """The demo dataset and its answer key (read by tests only)."""

    dataset: Path
    key: dict[str, object]

    def events_of(self, cause: str, n: int) -> list[str]:
        """The first ``n`` real failures the answer key blames on ``cause``, latest first
        (the cause's hidden value is then its final one)."""
        events: dict[str, str] = self.key["events"]  # type: ignore[assignment]
        return sorted((e for e, c in events.items() if c == cause), reverse=True)[:n]

    def truth(self, cause: str) -> float:
        causes: list[dict[str, object]] = self.key["causes"]  # type: ignore[assignment]
        value = next(c["true_value"] for c in causes if c["name"] == cause)
        assert isinstance(value, float) and math.isfinite(value)
        return value

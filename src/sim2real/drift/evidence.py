"""Evidence outside the telemetry: unseen context (task scope) and suspicious sys.* values."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import stats

from sim2real._columns import strings
from sim2real._stratified import mantel_haenszel, strata, tables
from sim2real.match.context import ContextTable

__all__ = ["NOVEL_CATEGORY", "Novelty", "SysFinding", "context_novelty", "sys_findings"]

# An unseen category is as strong a finding as a 5-sigma excursion of a number.
NOVEL_CATEGORY = 5.0
_SYS_ALPHA = 0.01
_SYS_MIN_RATIO = 1.5
_SYS_CAP = 8.0


@dataclass(frozen=True)
class Novelty:
    """How far each query's context lies outside what sim covered for its task.

    Attributes:
        scores: ctx column -> ``(n,)`` novelty (0 inside the sim's support).
        values: per query, the novel ``ctx`` values as ``column=value`` strings.
    """

    scores: dict[str, np.ndarray]
    values: list[list[str]]

    @property
    def total(self) -> np.ndarray:
        """``(n,)`` the largest novelty of each query: the task-scope score."""
        if not self.scores:
            return np.zeros(len(self.values))
        return np.max(np.column_stack(list(self.scores.values())), axis=1)


@dataclass(frozen=True)
class SysFinding:
    """A ``sys.*`` value under which failures are over-represented versus successes."""

    task: str
    column: str
    value: str
    failures: int
    successes: int
    rate_ratio: float
    p_value: float
    evidence: float


def context_novelty(
    queries: ContextTable, tasks: np.ndarray, sim: ContextTable, sim_tasks: np.ndarray
) -> Novelty:
    """Score each query's context against the sim rollouts of the same task.

    A categorical value sim never had scores :data:`NOVEL_CATEGORY`; a number outside the
    sim's range scores its distance beyond the edge in units of the sim's spread.
    """
    scores: dict[str, np.ndarray] = {}
    values: list[list[str]] = [[] for _ in range(queries.size)]
    for task in np.unique(tasks):
        q = np.flatnonzero(tasks == task)
        s = np.flatnonzero(sim_tasks == task)
        for name, column in queries.categorical.items():
            seen = set(sim.categorical.get(name, np.array([], dtype=object))[s]) - {None}
            out = scores.setdefault(name, np.zeros(queries.size))
            for i in q:
                if column[i] is not None and column[i] not in seen:
                    out[i] = NOVEL_CATEGORY
                    values[i].append(f"{name}={column[i]}")
        for name, column in queries.numeric.items():
            ref = sim.numeric.get(name, np.array([]))[s]
            ref = ref[np.isfinite(ref)]
            out = scores.setdefault(name, np.zeros(queries.size))
            if ref.size == 0:
                continue
            low, high, spread = ref.min(), ref.max(), (ref.std() or 1.0)
            beyond = np.maximum(low - column[q], 0) + np.maximum(column[q] - high, 0)
            beyond = np.nan_to_num(beyond / spread)
            out[q] = beyond
            for i, b in zip(q, beyond, strict=True):
                if b > 0:
                    values[i].append(f"{name}={column[i]:g}")
    return Novelty(scores, values)


def sys_findings(real: pa.Table) -> list[SysFinding]:
    """``sys.*`` values whose episodes fail more often than the task's other real episodes
    of the same deployment and site.

    One-sided Cochran-Mantel-Haenszel test per (task, column, value) within strata of
    deployment and site, Bonferroni-corrected over all of them; a value counts only when
    significant at 1% and its common odds ratio is at least 1.5. Within strata, because a
    config released in the deployment where another cause began to grow, or a board only
    the busiest site runs, would otherwise mark every failure there as a system failure.
    ``rate_ratio`` is the crude one, for the reader.
    """
    columns = [c for c in real.column_names if c.startswith("sys.")]
    if not columns or real.num_rows == 0:
        return []
    tasks = np.array(real["task"].to_pylist(), dtype=object)
    failed = np.array(pc.equal(real["outcome"], "failure").to_pylist(), dtype=bool)
    by_place = strata(strings(real, "deployment"), strings(real, "site"))
    tests: list[tuple[str, str, str, np.ndarray, np.ndarray]] = []
    for column in columns:
        values = strings(real, column)
        for task in np.unique(tasks):
            in_task = tasks == task
            for value in sorted({v for v in values[in_task] if v is not None}):
                tests.append((str(task), column, value, in_task, values == value))
    findings = []
    for task, column, value, in_task, under in tests:
        a, b = int((under & failed).sum()), int((under & ~failed).sum())
        c, d = int((in_task & ~under & failed).sum()), int((in_task & ~under & ~failed).sum())
        if a == 0 or c + d == 0:
            continue
        test = mantel_haenszel(tables(by_place, under, failed, in_task))
        p_adj = min(1.0, test.p_value * len(tests))
        if p_adj < _SYS_ALPHA and test.odds_ratio >= _SYS_MIN_RATIO:
            ratio = (a / (a + b)) / max(c / (c + d), 0.5 / (c + d))
            evidence = float(min(stats.norm.isf(max(p_adj, 1e-300)), _SYS_CAP))
            findings.append(SysFinding(task, column, value, a, b, ratio, p_adj, evidence))
    return findings

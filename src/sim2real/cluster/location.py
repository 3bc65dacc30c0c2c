"""Where a cluster's failures concentrate, against what sim's own failure rate predicts there.

Telemetry alone cannot tell every failure's cause: a gripper pad worn smooth drops an
object the way a sim rollout with a bad grasp does. A fleet engineer then looks at where
the failures happen. Robot r08 misses one pick in four where sim misses one in fifty: r08's
missed picks are the worn pad's. A single missed pick of the same look on r06 is what sim
predicts for r06's episodes: it says nothing about the pads. A place is a robot, a site or
the whole fleet: a cause that acts on a whole site, or on every robot, may be too thin on
each robot to show.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy.stats import poisson

__all__ = ["Excess", "Fleet", "Place", "excess", "fleet_of", "hot_places"]


# (level, name): level 0 is a robot, 1 a site, 2 the whole fleet (name "").
Place = tuple[int, str]
_LEVELS = ("robot_id", "site")
_FLEET: Place = (2, "")


@dataclass(frozen=True)
class Fleet:
    """Where each event happened, and what sim's own failure rate predicts at each place.

    Attributes:
        where: ``(n_events, 2)`` each event's robot and site, None where not logged.
        symptom: ``(n_events,)`` each event's failure label, None where none is logged.
        exposure: (robot, site) -> real episodes analysed there, successes and failures.
        sim_rate: failure label -> share of sim rollouts that fail with it; the key None
            holds the share that fail at all. A symptom sim labels none of its failures
            with is one sim does not predict (rate 0), unless sim labels no failure at all.
    """

    where: np.ndarray
    symptom: np.ndarray
    exposure: Mapping[tuple[str | None, str | None], int]
    sim_rate: Mapping[str | None, float]

    @property
    def placed(self) -> np.ndarray:
        """``(n_events,)`` whether an event has a robot or a site."""
        return np.array([any(p is not None for p in row) for row in self.where], dtype=bool)

    def at(self, places: frozenset[Place]) -> np.ndarray:
        """``(n_events,)`` whether an event with a place happened at one of ``places``."""
        if _FLEET in places:
            return self.placed
        return np.array([any((level, name) in places for level, name in enumerate(row))
                         for row in self.where], dtype=bool)

    def expected(self, cells: list[tuple[str | None, str | None]], rows: np.ndarray,
                 look_alike: float = 1.0) -> float:
        """How many sim-like failures showing the symptoms of events ``rows`` sim's own
        failure rate predicts among the episodes of ``cells`` ((robot, site) pairs).

        ``look_alike``: the share of sim's comparisons that look like those events; the
        prediction is the smaller of it and sim's rate of their symptoms.
        """
        episodes = sum(self.exposure.get(cell, 0) for cell in cells)
        if len(self.sim_rate) == 1:
            # Sim labels none of its failures: any of them may show any symptom.
            rate = self.sim_rate[None]
        else:
            symptoms = {None if s is None else str(s) for s in self.symptom[rows]}
            rate = sum(self.sim_rate.get(s, 0.0) for s in symptoms)
        return episodes * min(rate, look_alike)


def fleet_of(events: pa.Table, real: pa.Table, sim: pa.Table) -> Fleet:
    """The :class:`Fleet` of failure ``events`` among the analysed ``real`` episodes.

    Args:
        events: the failures being clustered.
        real: every real episode they come from (the exposure).
        sim: the sim rollouts (their failure rate per label).
    """
    sim_failed = sim.filter(pc.equal(sim["outcome"], "failure"))
    n_sim = max(sim.num_rows, 1)
    rate: dict[str | None, float] = {None: sim_failed.num_rows / n_sim}
    for label in _column(sim_failed, "failure_label"):
        if label is not None:
            rate[label] = rate.get(label, 0.0) + 1.0 / n_sim
    exposure: dict[tuple[str | None, str | None], int] = {}
    for robot, site in _places(real):
        exposure[robot, site] = exposure.get((robot, site), 0) + 1
    return Fleet(_places(events), np.array(_column(events, "failure_label"), dtype=object),
                 exposure, rate)


@dataclass(frozen=True)
class Excess:
    """A cluster's failures at one place against what sim's own failure rate predicts."""

    place: Place
    failures: int
    expected: float

    def __str__(self) -> str:
        kind = ("robot ", "site ", "the whole fleet")[self.place[0]]
        return f"{kind}{self.place[1]} ({self.failures} where sim predicts " \
               f"{self.expected:.1f})"


def hot_places(labels: np.ndarray, fleet: Fleet, look_alike: Mapping[int, float],
               alpha: float) -> dict[int, frozenset[Place]]:
    """Per cluster (the keys of ``look_alike``: each cluster's share of sim's comparisons
    that look like it), the places where it has more failures than sim's own failure rate
    explains: the chance that sim-like failures alone (Poisson, at the rate
    :meth:`Fleet.expected` gives) produce as many of its members there is at most ``alpha``.

    Robots are tested first, then each site on its members beyond its hot robots, then the
    fleet beyond both: a site is not hot for a cause that acts on one of its robots only.
    """
    return {c: frozenset(e.place for e in excess(fleet, np.flatnonzero(labels == c), share,
                                                 alpha))
            for c, share in look_alike.items()}


def excess(fleet: Fleet, rows: np.ndarray, look_alike: float, alpha: float) -> list[Excess]:
    """The places where events ``rows`` (one cluster, ``look_alike`` of sim's comparisons
    like it) are more than sim's failure rate explains at chance ``alpha``, by the rule of
    :func:`hot_places`; most failures first."""
    found: list[Excess] = []
    rows = rows[fleet.placed[rows]]
    for level in range(len(_LEVELS) + 1):
        robots = {e.place[1] for e in found if e.place[0] == 0}
        sites = {e.place[1] for e in found if e.place[0] == 1}
        rows_at: dict[str, list[int]] = {}
        for i in rows.tolist():
            robot, site = fleet.where[i]
            name = (robot, site, "")[level]
            if name is not None and robot not in robots and site not in sites:
                rows_at.setdefault(name, []).append(i)
        for name, at in rows_at.items():
            cells = [cell for cell in fleet.exposure
                     if (*cell, "")[level] == name and cell[0] not in robots
                     and cell[1] not in sites]
            expected = fleet.expected(cells, np.array(at), look_alike)
            if poisson.sf(len(at) - 1, expected) <= alpha:
                found.append(Excess((level, name), len(at), expected))
    return sorted(found, key=lambda e: (-e.failures, e.place))


def _places(table: pa.Table) -> np.ndarray:
    """``(n_rows, 2)``: each row's robot and site."""
    columns = [_column(table, name) for name in _LEVELS]
    return np.array(list(zip(*columns, strict=True)), dtype=object).reshape(-1, len(_LEVELS))


def _column(table: pa.Table, name: str) -> list[str | None]:
    if name not in table.column_names:
        return [None] * table.num_rows
    return [None if v is None else str(v) for v in table[name].to_pylist()]

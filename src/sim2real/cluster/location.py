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

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy.stats import false_discovery_control, poisson

__all__ = ["FLEET", "ROBOT", "SITE", "Excess", "Fleet", "Place", "excess", "fleet_of"]

# (level, robot, site): a robot at its site, a site (robot None), the fleet (both None).
# Named, not indexed: a fit's places apply to the fleet of other deployments.
Place = tuple[int, str | None, str | None]
ROBOT, SITE, FLEET = 0, 1, 2
_FLEET: Place = (FLEET, None, None)


@dataclass(frozen=True)
class Fleet:
    """Where each event happened, and what sim's own failure rate predicts at each place.

    Attributes:
        cells: the (robot, site) pairs episodes ran at, either None where not logged but
            never both. A robot is known by its site too: robot IDs may repeat across sites.
        cell: ``(n_events,)`` each event's index into ``cells``, -1 where it has neither.
        exposure: ``(n_cells,)`` real episodes analysed at each cell, successes included.
        symptom: ``(n_events,)`` each event's failure label, None where none is logged.
        sim_rate: failure label -> sim's rate of failures showing it; the key None: its
            rate of failures at all.
    """

    cells: tuple[tuple[str | None, str | None], ...]
    cell: np.ndarray
    exposure: np.ndarray
    symptom: np.ndarray
    sim_rate: Mapping[str | None, float]

    @cached_property
    def sites(self) -> tuple[str, ...]:
        """The sites of ``cells``, sorted."""
        return tuple(sorted({s for _, s in self.cells if s is not None}))

    @cached_property
    def cell_site(self) -> np.ndarray:
        """``(n_cells,)`` each cell's index into :attr:`sites`, -1 where it has none."""
        index: dict[str | None, int] = {s: i for i, s in enumerate(self.sites)}
        return np.array([index.get(s, -1) for _, s in self.cells], dtype=np.int64)

    @cached_property
    def cell_robot(self) -> np.ndarray:
        """``(n_cells,)`` whether a cell names a robot."""
        return np.array([r is not None for r, _ in self.cells], dtype=bool)

    @cached_property
    def placed(self) -> np.ndarray:
        """``(n_events,)`` whether an event has a robot or a site."""
        return self.cell >= 0

    def rate(self, rows: np.ndarray) -> float:
        """Sim's rate of failures showing the symptoms of events ``rows``: the sum over
        their symptoms, at most its rate of failures at all. An unlabelled event, or one
        whose label sim never used, may be any of sim's failures."""
        total = self.sim_rate.get(None, 0.0)
        symptoms = set(self.symptom[rows].tolist())
        return min(total, sum(self.sim_rate.get(s, total) for s in symptoms))

    def at(self, places: frozenset[Place]) -> np.ndarray:
        """``(n_events,)`` whether each event with a place happened at one of ``places``."""
        if _FLEET in places:
            return self.placed
        robots = {(r, s) for level, r, s in places if level == ROBOT}
        sites = {s for level, _, s in places if level == SITE}
        inside = np.array([c in robots or c[1] in sites for c in self.cells], dtype=bool)
        return self.placed & inside[np.maximum(self.cell, 0)] if len(inside) else self.placed

    @staticmethod
    def name(place: Place) -> str:
        """How a report names ``place``."""
        level, robot, site = place
        if level == ROBOT:
            return f"robot {robot}"
        return f"site {site}" if level == SITE else "the whole fleet"


def fleet_of(events: pa.Table, real: pa.Table, sim: pa.Table) -> Fleet:
    """The :class:`Fleet` of failure ``events`` among the analysed ``real`` episodes.

    Sim's rate of a symptom is its share of sim's labelled failures times sim's rate of
    failures at all: failures sim left unlabelled are spread over the labels alike.

    Args:
        events: the failures being clustered.
        real: every real episode they come from (the exposure).
        sim: the sim rollouts (their failure rate per label).
    """
    sim_failed = sim.filter(pc.equal(sim["outcome"], "failure"))
    total = sim_failed.num_rows / max(sim.num_rows, 1)
    labels = Counter(v for v in _column(sim_failed, "failure_label") if v is not None)
    labelled = sum(labels.values())
    rate: dict[str | None, float] = {None: total}
    rate.update({label: total * n / labelled for label, n in labels.items()})
    real_cells = _cells(real)
    event_cells = _cells(events)
    cells = tuple(sorted({c for c in real_cells + event_cells if c != (None, None)}, key=str))
    index = {c: i for i, c in enumerate(cells)}
    exposure = np.bincount([index[c] for c in real_cells if c in index], minlength=len(cells))
    cell = np.array([index.get(c, -1) for c in event_cells], dtype=np.int64)
    return Fleet(cells, cell, exposure, np.array(_column(events, "failure_label"), dtype=object),
                 rate)


@dataclass(frozen=True)
class Excess:
    """A cluster's failures at one place against what sim's own failure rate predicts."""

    place: Place
    name: str
    failures: int
    expected: float

    def __str__(self) -> str:
        return f"{self.name} ({self.failures} where sim predicts {self.expected:.1f})"


def excess(fleet: Fleet, rows: np.ndarray, look_alike: float, alpha: float) -> list[Excess]:
    """The places where events ``rows`` (of one cluster) are more than sim predicts.

    Per episode, sim predicts its rate of their symptoms (:meth:`Fleet.rate`) times
    ``look_alike``, the share of its own failures whose comparisons deviate like them:
    the rate of sim-like failures that do both. A place is hot when the Poisson chance
    of as many failures there is small: Benjamini-Hochberg at ``alpha`` over the places
    tested at its level (among a thousand robots, some twenty would pass ``alpha`` by
    chance). Robots are tested first, then each site on its failures beyond its hot
    robots, then the fleet beyond both: a site is not hot for a cause of one of its robots.

    Returns:
        The hot places, most failures first.
    """
    rows = rows[fleet.placed[rows]]
    if rows.size == 0:
        return []
    per_episode = fleet.rate(rows) * look_alike
    cell = fleet.cell[rows]
    counts = np.bincount(cell, minlength=len(fleet.cells))
    expected = fleet.exposure * per_episode
    robots = _hot(np.flatnonzero((counts > 0) & fleet.cell_robot), counts, expected, alpha)
    found = [_excess((ROBOT, *fleet.cells[i]), counts[i], expected[i]) for i in robots]
    cold = np.ones(len(fleet.cells), dtype=bool)
    cold[robots] = False
    site, n_sites = fleet.cell_site, len(fleet.sites)
    with_site = cold & (site >= 0)
    site_counts = np.bincount(site[with_site], weights=counts[with_site], minlength=n_sites)
    site_expected = np.bincount(site[with_site], weights=expected[with_site],
                                minlength=n_sites)
    sites = _hot(np.flatnonzero(site_counts > 0), site_counts, site_expected, alpha)
    found += [_excess((SITE, None, fleet.sites[i]), site_counts[i], site_expected[i])
              for i in sites]
    cold &= ~np.isin(site, sites)
    rest, rest_expected = counts[cold].sum(), expected[cold].sum()
    if rest and _hot(np.zeros(1, np.int64), np.array([rest]), np.array([rest_expected]),
                     alpha).size:
        found.append(_excess(_FLEET, rest, rest_expected))
    return sorted(found, key=lambda e: (-e.failures, e.name))


def _excess(place: Place, failures: float, expected: float) -> Excess:
    return Excess(place, Fleet.name(place), int(failures), float(expected))


def _hot(tested: np.ndarray, counts: np.ndarray, expected: np.ndarray,
         alpha: float) -> np.ndarray:
    """The entries of ``tested`` whose ``counts`` are significantly above ``expected``."""
    if tested.size == 0:
        return tested
    p = poisson.sf(counts[tested] - 1, expected[tested])
    significant: np.ndarray = false_discovery_control(p, method="bh") <= alpha
    return tested[significant]


def _cells(table: pa.Table) -> list[tuple[str | None, str | None]]:
    return list(zip(_column(table, "robot_id"), _column(table, "site"), strict=True))


def _column(table: pa.Table, name: str) -> list[str | None]:
    if name not in table.column_names:
        return [None] * table.num_rows
    return [None if v is None else str(v) for v in table[name].to_pylist()]

"""Where a cluster's failures concentrate decides which of its look-alikes belong to it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sim2real.cluster.density import FailureClusterer, FeatureSpace
from sim2real.cluster.location import FLEET, ROBOT, SITE, Fleet, Place, excess, fleet_of

_CHANNELS = 6
_ROBOTS = ("a1", "a2", "a3", "b1", "b2", "b3")  # a* at site_a, b* at site_b
_CELLS = tuple((r, f"site_{r[0]}") for r in _ROBOTS)
_EPISODES = 100  # real episodes per robot
_SIM_RATE = 0.02  # share of sim rollouts that fail with a "drop"


def _fleet(robots: list[str], symptom: str | None = "drop") -> Fleet:
    cell = np.array([_ROBOTS.index(r) for r in robots], dtype=np.int64)
    return Fleet(_CELLS, cell, np.full(len(_CELLS), _EPISODES),
                 np.array([symptom] * len(robots), dtype=object),
                 {None: _SIM_RATE, "drop": _SIM_RATE})


def _hot(robots: list[str], look_alike: float = 1.0) -> set[Place]:
    fleet = _fleet(robots)
    return {e.place for e in excess(fleet, np.arange(len(robots)), look_alike, alpha=0.02)}


def test_a_robot_is_hot_where_its_failures_exceed_sims_rate() -> None:
    # 12 drops on a1 where sim predicts 2; 1 on each of three others.
    assert _hot(["a1"] * 12 + ["a2", "b1", "b2"]) == {(ROBOT, "a1", "site_a")}


def test_a_site_is_hot_for_a_cause_thin_on_each_of_its_robots() -> None:
    # 5 drops on each b robot (2 predicted on each: not significant alone), 15 on site_b
    # where 6 are predicted; one drop on a1.
    assert _hot(["b1"] * 5 + ["b2"] * 5 + ["b3"] * 5 + ["a1"]) == {(SITE, None, "site_b")}


def test_the_fleet_is_hot_for_a_cause_thin_everywhere() -> None:
    # 3 on each robot where sim's look-alikes (its 2 % of drops, three in four of which
    # deviate like these) predict 1.5, 9 on each site (4.5 predicted): neither is
    # significant alone; 18 in the fleet where 9 are predicted is.
    assert _hot([r for r in _ROBOTS for _ in range(3)], look_alike=0.75) == {
        (FLEET, None, None)}


def test_a_site_is_not_hot_for_a_cause_of_one_of_its_robots() -> None:
    assert _hot(["a1"] * 12 + ["a2", "a3"]) == {(ROBOT, "a1", "site_a")}


def test_a_robot_id_at_two_sites_is_two_robots() -> None:
    cells = (("r1", "A"), ("r1", "B"))
    fleet = Fleet(cells, np.zeros(8, np.int64), np.array([100, 100]),
                  np.array(["drop"] * 8, dtype=object), {None: _SIM_RATE, "drop": _SIM_RATE})
    found = excess(fleet, np.arange(8), 1.0, alpha=0.02)
    assert [e.place for e in found] == [(ROBOT, "r1", "A")]
    assert fleet.at(frozenset({(ROBOT, "r1", "A")})).all()
    assert not fleet.at(frozenset({(ROBOT, "r1", "B")})).any()


def test_excess_says_how_many_failures_against_how_many_predicted() -> None:
    found = excess(_fleet(["a1"] * 12 + ["a2"]), np.arange(13), 1.0, alpha=0.02)
    assert [str(e) for e in found] == ["robot a1 (12 where sim predicts 2.0)"]


def _space(rng: np.random.Generator) -> tuple[FeatureSpace, list[str], np.ndarray]:
    """30 strong events along one direction on robot a1, 3 equally strong look-alikes on
    other robots (sim-like failures that happen to look like it), 6 faint ones on a1 and
    6 on other robots; a null of 300 no-gap comparisons, 6 of them ending at a sim drop,
    2 of those deviating like the cause."""
    direction = np.array([-1.0, -0.8, 0.5, 0.0, 0.0, 0.0])
    direction /= np.linalg.norm(direction)
    strong = 8.0 * direction + rng.normal(0.0, 0.7, (33, _CHANNELS))
    faint = 2.2 * direction + rng.normal(0.0, 0.2, (12, _CHANNELS))
    effects = np.vstack([strong, faint])
    groups = np.array(["dynamics_mismatch"] * 33 + ["unexplained"] * 12, dtype=object)
    columns = {"dynamics_mismatch": np.arange(3), "unexplained": np.arange(_CHANNELS)}
    values = np.where(np.abs(effects) > 3.0, effects, 0.0)
    null = rng.normal(0.0, 1.0, (300, _CHANNELS))
    null[:2] = 8.0 * direction  # two of sim's six drops deviate like the cause
    robots = ["a1"] * 30 + ["a2", "b1", "b2"] + ["a1"] * 6 + ["a2", "a3", "b1", "b2", "b3", "a2"]
    truth = np.array(["cause"] * 30 + ["look-alike"] * 3 + ["cause"] * 6 + ["faint"] * 6)
    bands = np.full((2, effects.shape[1]), 3.0)
    failed = np.arange(len(null)) < 6  # sim's 2 % of drops among its 300 comparisons
    space = FeatureSpace(values, groups, columns, ((), (), ()), effects, null, failed, bands,
                         np.zeros(0, dtype=int))
    return space, robots, truth


def test_look_alikes_elsewhere_leave_and_faint_events_at_the_hot_robot_join() -> None:
    space, robots, truth = _space(np.random.default_rng(0))
    fleet = _fleet(robots)
    labels = FailureClusterer(min_cluster_size=10, faint_tail=1e-9).fit(space, fleet).labels_
    cluster = labels[0]
    assert cluster >= 0
    assert np.all(labels[truth == "cause"] == cluster)
    assert np.all(labels[truth == "look-alike"] == -1)
    assert np.all(labels[truth == "faint"] == -1)
    # Without places, the look-alikes stay and the faint events at a1 stay out.
    blind = FailureClusterer(min_cluster_size=10, faint_tail=1e-9).fit(space).labels_
    assert np.all(blind[truth == "look-alike"] == blind[0])
    assert np.all(blind[30:39][truth[30:39] == "cause"] == -1)


def test_predict_applies_the_same_places() -> None:
    space, robots, _ = _space(np.random.default_rng(1))
    fleet = _fleet(robots)
    clusterer = FailureClusterer(min_cluster_size=10).fit(space, fleet)
    np.testing.assert_array_equal(clusterer.predict(space, fleet), clusterer.labels_)
    # Where the cluster is hot, as the report says it: a1 alone, far above sim's share.
    (hot,) = clusterer.hot_places(int(clusterer.labels_[0]))
    assert hot.name == "robot a1" and hot.failures >= 30 and hot.expected < 1.0


def test_events_without_a_place_are_left_as_they_are() -> None:
    space, robots, _ = _space(np.random.default_rng(2))
    clusterer = FailureClusterer(min_cluster_size=10).fit(space, _fleet(robots))
    nowhere = Fleet(_CELLS, np.full(len(robots), -1, np.int64), np.full(len(_CELLS), 100),
                    np.array(["drop"] * len(robots), dtype=object), {None: _SIM_RATE})
    np.testing.assert_array_equal(clusterer.predict(space, nowhere), clusterer.predict(space))


def test_places_carry_over_to_a_fleet_listed_otherwise() -> None:
    space, robots, _ = _space(np.random.default_rng(4))
    clusterer = FailureClusterer(min_cluster_size=10).fit(space, _fleet(robots))
    # The same events in a fleet whose cells come in another order, with one more robot.
    cells = (("c1", "site_c"), *reversed(_CELLS))
    fleet = Fleet(cells, np.array([cells.index((r, f"site_{r[0]}")) for r in robots]),
                  np.full(len(cells), _EPISODES), np.array(["drop"] * len(robots), dtype=object),
                  {None: _SIM_RATE, "drop": _SIM_RATE})
    np.testing.assert_array_equal(clusterer.predict(space, fleet), clusterer.labels_)


def test_a_cause_that_spreads_to_another_robot_stays_its_cluster() -> None:
    space, robots, _ = _space(np.random.default_rng(3))
    clusterer = FailureClusterer(min_cluster_size=10).fit(space, _fleet(robots))
    cluster = clusterer.labels_[0]
    # The same strong events, now on b1: 33 where sim predicts 2.
    moved = _fleet(["b1"] * 33 + robots[33:])
    labels = clusterer.predict(space, moved, clusterer.places(clusterer.predict(space), moved))
    assert np.all(labels[:33] == cluster)
    # Under the fitted places alone, b1 is no hot place of the cluster.
    assert np.all(clusterer.predict(space, moved)[:33] == -1)


def test_sims_rate_of_a_symptom() -> None:
    real = pa.table({"robot_id": ["r1", "r1", "r2", None], "site": ["s", "s", "s", "s"],
                     "outcome": ["failure", "success", "success", "failure"],
                     "failure_label": ["drop", None, None, "bump"]})
    # 3 of 6 rollouts fail; 2 are labelled, so each label carries half of the 0.5.
    sim = pa.table({"outcome": ["failure"] * 3 + ["success"] * 3,
                    "failure_label": ["drop", "slip", None, None, None, None]})
    events = real.filter(pc.equal(real["outcome"], "failure"))
    fleet = fleet_of(events, real, sim)
    assert fleet.cells == (("r1", "s"), ("r2", "s"), (None, "s"))
    assert fleet.exposure.tolist() == [2, 1, 1]
    assert fleet.cell.tolist() == [0, 2]
    assert fleet.sim_rate == {None: 0.5, "drop": 0.25, "slip": 0.25}
    assert fleet.rate(np.array([0])) == 0.25  # drop
    # bump: a label sim never used may be any of sim's failures; never above all of them.
    assert fleet.rate(np.array([0, 1])) == 0.5

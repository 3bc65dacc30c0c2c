"""The clustering space and its density clusters: a faint failure joins the cluster it
deviates along and sim-like noise does not; each channel loses its own no-gap band; a
channel that strays both ways is one cause, and so is one that spikes only sometimes;
symptoms tell sim-like failures apart; aligned clusters merge only where they strike the
same robots."""

from __future__ import annotations

import numpy as np

from sim2real.cluster.density import FailureClusterer, FeatureSpace, signature_features
from sim2real.cluster.location import Fleet
from sim2real.drift.compute import Signatures
from sim2real.drift.evidence import Novelty

_CHANNELS = 6


def _space(rng: np.random.Generator) -> tuple[FeatureSpace, np.ndarray]:
    """40 strong events along one direction (a perception group), 10 faint ones along it and
    10 sim-like ones (no family group), and a null of 300 no-gap comparisons."""
    direction = np.array([-1.0, -0.8, 0.5, 0.0, 0.0, 0.0])
    direction /= np.linalg.norm(direction)
    strong = 8.0 * direction + rng.normal(0.0, 0.7, (40, _CHANNELS))
    faint = 3.5 * direction + rng.normal(0.0, 0.7, (10, _CHANNELS))
    sim_like = rng.normal(0.0, 1.0, (10, _CHANNELS))
    effects = np.vstack([strong, faint, sim_like])
    groups = np.array(["perception_drift"] * 40 + ["unexplained"] * 20, dtype=object)
    columns = {"perception_drift": np.arange(3), "unexplained": np.arange(_CHANNELS)}
    values = np.where(np.abs(effects) > 3.0, effects, 0.0)  # the dead band of the features
    null = rng.normal(0.0, 1.0, (300, _CHANNELS))
    truth = np.array(["strong"] * 40 + ["faint"] * 10 + ["sim_like"] * 10)
    bands = np.full((2, _CHANNELS), 3.0)
    return FeatureSpace(values, groups, columns, ((), (), ()), effects, null,
                        np.zeros(len(null), dtype=bool), bands, np.zeros(0, dtype=int)), truth


def test_faint_events_join_the_cluster_they_deviate_along() -> None:
    space, truth = _space(np.random.default_rng(0))
    labels = FailureClusterer(min_cluster_size=10).fit(space).labels_
    cluster = np.bincount(labels[truth == "strong"] + 1).argmax() - 1
    assert cluster >= 0
    assert np.mean(labels[truth == "faint"] == cluster) >= 0.8
    assert np.mean(labels[truth == "sim_like"] == -1) >= 0.8


def test_predict_attaches_new_events_by_the_same_rule() -> None:
    space, _ = _space(np.random.default_rng(1))
    clusterer = FailureClusterer(min_cluster_size=10).fit(space)
    np.testing.assert_array_equal(clusterer.predict(space), clusterer.labels_)


def _signatures(z: np.ndarray, null_z: np.ndarray, dynamics: float = 0.0,
                rough: np.ndarray | None = None) -> Signatures:
    """Events with segment scores ``z`` ``(n, 4, 2)`` on a quiet and a spiky dynamics
    channel, the dynamics family scored ``dynamics`` (deviating from the first segment
    where that passes 2.5), the no-gap comparisons' scores ``null_z``, and the events'
    roughness scores ``rough`` ``(n, 2)`` (default none; the no-gap comparisons' are
    standard normal)."""
    n = len(z)
    rough = np.zeros((n, 2)) if rough is None else rough
    family = np.zeros((n, 5))
    family[:, 1] = dynamics
    return Signatures(
        episode_ids=tuple(f"e{i}" for i in range(n)), channels=("joint_pos", "contact_force"),
        channel_families=("dynamics", "dynamics"), z=z, rough=rough,
        effects=_strongest(z),
        family_scores=family, onset=np.full((n, 4), 4 if dynamics < 2.5 else 0),
        novelty=Novelty({}, [[] for _ in range(n)]), sys_values=[[] for _ in range(n)],
        sys_evidence=np.zeros(n), system_channels=np.zeros(n), drift_score=np.ones(n),
        nearest=[[] for _ in range(n)], null_effects=_strongest(null_z), null_z=null_z,
        null_rough=np.random.default_rng(9).normal(0.0, 1.0, (len(null_z), 2)),
        null_failed=np.zeros(len(null_z), dtype=bool))


def _strongest(z: np.ndarray) -> np.ndarray:
    pick = np.abs(z).argmax(axis=1)
    return np.take_along_axis(z, pick[:, None, :], axis=1)[:, 0, :]


def test_each_channel_loses_what_its_own_no_gap_comparisons_show() -> None:
    rng = np.random.default_rng(0)
    # Per segment, the quiet channel's no-gap scores are Gaussian, the contact force's
    # heavy-tailed (it spikes).
    null = np.stack([rng.normal(0.0, 1.0, (2000, 4)), rng.standard_t(2, (2000, 4))], axis=2)
    offset = np.zeros((2, 4, 2))
    offset[0, :, 0] = 3.5  # a steady 3.5 sigma offset of the quiet channel
    offset[1, 3, 1] = 3.5  # one 3.5 sigma spike of the contact force
    space = signature_features(_signatures(offset, null))
    level, size = space.values[:, :2], space.values[:, 2:4]
    assert level[0, 0] > 0.5 and size[0, 0] > 0.5  # counts, as a level and as a size
    assert level[1, 1] == 0.0 and size[1, 1] == 0.0  # a routine spike does not
    # Events placed later lose the bands of the space they are placed in, not their own.
    later = signature_features(_signatures(offset[:1], null[:5]), like=space)
    np.testing.assert_array_equal(later.values[0], space.values[0])


def test_a_channel_that_strays_both_ways_in_the_window_is_one_cause_not_two() -> None:
    rng = np.random.default_rng(3)
    null = rng.normal(0.0, 1.0, (500, 4, 2))
    # A noisy sensor: in each failure's window, two segments stray about 6 sigma up and two
    # down, in random order. The strongest segment's sign split such failures in two.
    signs = np.array([rng.permutation([1.0, 1.0, -1.0, -1.0]) for _ in range(60)])
    z = np.zeros((60, 4, 2))
    z[:, :, 0] = signs * rng.normal(6.0, 0.5, (60, 4))
    labels = FailureClusterer(min_cluster_size=10).fit(
        signature_features(_signatures(z, null, dynamics=6.0))).labels_
    assert labels.min() >= 0 and len(set(labels)) == 1


def test_failures_that_look_like_sims_own_are_told_apart_by_their_symptom() -> None:
    rng = np.random.default_rng(2)
    null = rng.normal(0.0, 1.0, (500, 4, 2))
    sig = _signatures(rng.normal(0.0, 1.0, (60, 4, 2)), null)
    symptoms = np.array(["missed_pick"] * 30 + ["dropped_object"] * 28 + [None] * 2, object)
    space = signature_features(sig, symptoms=symptoms)
    clusterer = FailureClusterer(min_cluster_size=10).fit(space)
    labels = clusterer.labels_
    assert len(set(labels[:30])) == 1 and len(set(labels[30:58])) == 1
    assert labels[0] >= 0 and labels[30] >= 0 and labels[0] != labels[30]
    assert np.all(labels[58:] == -1)  # no label: in no symptom's cluster
    # A symptom the fitted space never saw is placed like a missing one: in none either.
    later = signature_features(_signatures(np.zeros((1, 4, 2)), null),
                               like=space, symptoms=np.array(["tipped_over"], object))
    np.testing.assert_array_equal(later.values[0, 4:], space.values[58, 4:])
    assert clusterer.predict(later)[0] == -1


def test_a_cause_that_spikes_in_some_windows_and_not_in_others_is_one_cause() -> None:
    rng = np.random.default_rng(4)
    null = rng.normal(0.0, 1.0, (500, 4, 2))
    # A slipping grip: every failure's contact force 6 sigma off sim's; in half of the
    # windows the slip also spiked (roughness 20 sigma), in the other half it crept.
    z = np.zeros((60, 4, 2))
    z[:, :, 1] = rng.normal(6.0, 0.5, (60, 4))
    rough = np.zeros((60, 2))
    rough[:30, 1] = rng.normal(20.0, 2.0, 30)
    space = signature_features(_signatures(z, null, dynamics=6.0, rough=rough))
    assert space.values[:30, 5].min() > 0.5 and np.all(space.values[30:, 5] == 0.0)
    labels = FailureClusterer(min_cluster_size=10).fit(space).labels_
    assert labels.min() >= 0 and len(set(labels)) == 1


def _two_pushes(rng: np.random.Generator) -> FeatureSpace:
    """30 failures with the contact force 6 sigma off sim's, then 30 with it 6 sigma off and
    the joint pushed 3 sigma too: two dense clusters whose deviations point alike."""
    null = rng.normal(0.0, 1.0, (500, 4, 2))
    z = np.zeros((60, 4, 2))
    z[:, :, 1] = rng.normal(6.0, 0.3, (60, 4))
    z[30:, :, 0] = rng.normal(3.0, 0.3, (30, 4))
    return signature_features(_signatures(z, null, dynamics=6.0))


def _robots(cell: np.ndarray, symptom: np.ndarray | None = None) -> Fleet:
    cells = tuple((f"r{i}", "site_a") for i in range(4))
    symptom = np.full(len(cell), None, object) if symptom is None else symptom
    return Fleet(cells, cell, np.full(len(cells), 1000), symptom, {None: 0.001})


def test_aligned_clusters_merge_only_where_they_strike_the_same_robots() -> None:
    space = _two_pushes(np.random.default_rng(6))
    # Over the same four robots: one cause at two strengths.
    mixed = FailureClusterer(min_cluster_size=10).fit(space, _robots(np.arange(60) % 4))
    assert mixed.labels_.min() >= 0 and len(set(mixed.labels_)) == 1
    # The first 30 on robots r0 and r1, the others on r2 and r3: two causes.
    apart = FailureClusterer(min_cluster_size=10).fit(
        space, _robots(np.repeat([0, 1, 2, 3], 15)))
    labels = apart.labels_
    assert len(set(labels[:30])) == 1 and len(set(labels[30:])) == 1
    assert labels.min() >= 0 and labels[0] != labels[30]


def test_aligned_clusters_at_the_same_robots_that_end_differently_stay_apart() -> None:
    space = _two_pushes(np.random.default_rng(6))
    robots = np.arange(60) % 4
    # Over the same robots, ending the same way (labelled or not): one cause.
    for symptom in (None, np.full(60, "dropped_object", object)):
        one = FailureClusterer(min_cluster_size=10).fit(space, _robots(robots, symptom))
        assert one.labels_.min() >= 0 and len(set(one.labels_)) == 1
    # The first 30 drop the object, the others miss the pick: two causes.
    ends = np.array(["dropped_object"] * 30 + ["missed_pick"] * 30, object)
    labels = FailureClusterer(min_cluster_size=10).fit(space, _robots(robots, ends)).labels_
    assert len(set(labels[:30])) == 1 and len(set(labels[30:])) == 1
    assert labels.min() >= 0 and labels[0] != labels[30]


def test_one_density_region_at_disjoint_robots_is_split_into_its_causes() -> None:
    # A continuum from "torque far off, force less" (a heavy load) to "force far off,
    # torque less" (worn pads): one dense region, whichever robots it strikes.
    rng = np.random.default_rng(3)
    null = rng.normal(0.0, 1.0, (500, 4, 2))
    t = np.sort(rng.uniform(2.0, 6.0, 60))[::-1]
    z = np.zeros((60, 4, 2))
    z[:, :, 0] = t[:, None] + rng.normal(0.0, 0.2, (60, 4))
    z[:, :, 1] = (8.0 - t)[:, None] + rng.normal(0.0, 0.2, (60, 4))
    space = signature_features(_signatures(z, null, dynamics=6.0))
    for fleet in (None, _robots(np.arange(60) % 4)):
        labels = FailureClusterer(min_cluster_size=10).fit(space, fleet).labels_
        assert labels.min() >= 0 and len(set(labels)) == 1
    # The torque-heavy half at robots r0 and r1, the force-heavy half at r2 and r3: two
    # causes, told apart by where they strike.
    robots = np.concatenate([rng.integers(0, 2, 30), rng.integers(2, 4, 30)])
    labels = FailureClusterer(min_cluster_size=10).fit(space, _robots(robots)).labels_
    assert len(set(labels[:30])) == 1 and len(set(labels[30:])) == 1
    assert labels.min() >= 0 and labels[0] != labels[30]

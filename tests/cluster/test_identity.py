"""Stable cluster IDs across runs and lifecycle states."""

from __future__ import annotations

import numpy as np
import pytest

from sim2real.cluster.identity import lifecycle_of
from sim2real.demo.synthetic import generate_world, standard_world
from sim2real.pipeline import Diagnosis, diagnose
from sim2real.report.build import build_report


@pytest.fixture(scope="module")
def diagnosis(tmp_path_factory: pytest.TempPathFactory) -> Diagnosis:
    tmp = tmp_path_factory.mktemp("ident")
    generate_world(standard_world(), tmp, seed=0)
    return diagnose(tmp / "dataset")


def test_rerun_keeps_every_id(diagnosis: Diagnosis) -> None:
    first = build_report(diagnosis).model
    again = build_report(diagnosis, first).model
    assert [(c.cluster_id, c.events) for c in again.clusters] == \
        [(c.cluster_id, c.events) for c in first.clusters]
    assert all(c.lifecycle != "new" for c in again.clusters)


def test_dropped_cluster_gets_a_fresh_id(diagnosis: Diagnosis) -> None:
    first = build_report(diagnosis).model
    dropped = first.clusters[1]
    previous = first.model_copy(update={"clusters": [c for c in first.clusters
                                                     if c is not dropped]})
    again = build_report(diagnosis, previous).model
    top = max(int(c.cluster_id[1:]) for c in previous.clusters)
    by_events = {tuple(c.events): c for c in again.clusters}
    assert by_events[tuple(dropped.events)].cluster_id == f"C{top + 1}"
    assert by_events[tuple(dropped.events)].lifecycle == "new"
    for c in previous.clusters:
        assert by_events[tuple(c.events)].cluster_id == c.cluster_id


def test_renamed_ids_follow_the_clusters(diagnosis: Diagnosis) -> None:
    first = build_report(diagnosis).model
    renamed = [c.model_copy(update={"cluster_id": f"C{40 + i}"})
               for i, c in enumerate(first.clusters)]
    again = build_report(diagnosis, first.model_copy(update={"clusters": renamed})).model
    assert [c.cluster_id for c in again.clusters] == [c.cluster_id for c in renamed]


def test_fixed_cause_is_resolved(diagnosis: Diagnosis) -> None:
    model = build_report(diagnosis).model
    system = [c for c in model.clusters if c.taxonomy == "deployment_system_noise"]
    assert system and all(c.lifecycle == "resolved" for c in system)


def test_lifecycle_rules() -> None:
    deps = ["d1", "d2", "d3", "d4"]
    exposure = np.full(4, 100.0)
    assert lifecycle_of(deps, exposure, np.array([10, 10, 0, 0.0]), None, set()) == "resolved"
    assert lifecycle_of(deps, exposure, np.array([2, 2, 2, 20.0]), None, set()) == "escalating"
    # a first run (no earlier report): "new" only where the first failure is in the latest
    # deployment; failures since earlier deployments are ongoing
    assert lifecycle_of(deps, exposure, np.array([0, 1, 0, 0.0]), None, set()) == "ongoing"
    assert lifecycle_of(deps, exposure, np.array([5, 5, 5, 5.0]), None, set()) == "ongoing"
    assert lifecycle_of(deps, exposure, np.array([0, 0, 0, 1.0]), None, set()) == "new"
    # with an earlier report, a cluster it did not have is new, however old its failures
    assert lifecycle_of(deps, exposure, np.array([5, 5, 5, 5.0]), None, {"d1", "d2"}) == "new"

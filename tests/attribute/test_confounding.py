"""Stratified over-representation: a value counts for the cluster it marks, and only within
strata of deployment and site."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sim2real.attribute.confounding import mantel_haenszel, over_represented


def _fleet(rng: np.random.Generator) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """Two deployments at two sites. ``sys.policy=v2`` ships with deployment d2, where
    the cluster's cause (robot r3's stale config, ``sys.config=old``) also grows."""
    rows = []
    for dep in ("d1", "d2"):
        for site, robots in (("s1", ("r1", "r2")), ("s2", ("r3", "r4"))):
            for robot in robots:
                for _ in range(60):
                    rows.append((dep, site, robot, "v2" if dep == "d2" else "v1",
                                 "old" if robot == "r3" else "new"))
    dep, site, robot, policy, config = map(np.array, zip(*rows, strict=True))
    table = pa.table({"deployment": dep, "site": site, "robot_id": robot,
                      "sys.policy": policy, "sys.config": config})
    # the cluster: stale config on r3, more of it in d2; background failures everywhere
    p_cluster = np.where(config == "old", np.where(dep == "d2", 0.4, 0.2), 0.0)
    in_cluster = rng.random(len(rows)) < p_cluster
    failed = in_cluster | (rng.random(len(rows)) < 0.05)
    return table, in_cluster, failed


def test_a_value_rolled_out_with_the_growth_is_no_finding() -> None:
    table, in_cluster, failed = _fleet(np.random.default_rng(0))
    found = {f.value for f in over_represented(table, in_cluster, failed)}
    assert "sys.config=old" in found and "r3" in found
    assert not any(v.startswith("sys.policy") for v in found), found
    # Unstratified, the policy would look guilty: most of the cluster ran under v2.
    assert (table["sys.policy"].to_numpy(zero_copy_only=False)[in_cluster] == "v2").mean() > 0.6


def test_a_value_every_failure_carries_is_no_finding_for_one_cluster() -> None:
    rng = np.random.default_rng(1)
    n = 2000
    gripper = np.where(rng.random(n) < 0.5, "g1", "g2")
    dep = np.where(rng.random(n) < 0.5, "d1", "d2")
    # g1 doubles every kind of failure alike; the cluster is a third of them at random
    failed = rng.random(n) < np.where(gripper == "g1", 0.2, 0.1)
    in_cluster = failed & (rng.random(n) < 0.33)
    table = pa.table({"deployment": dep, "sys.gripper": gripper})
    assert mantel_haenszel(np.array([[[40, 160], [20, 180]]])).p_value < 0.01
    assert not over_represented(table, in_cluster, failed)


def test_mantel_haenszel_common_odds_ratio() -> None:
    # Two strata with the same odds ratio 4, different base rates.
    tables = np.array([[[20, 80], [5, 80]], [[40, 40], [10, 40]]])
    result = mantel_haenszel(tables)
    assert abs(result.odds_ratio - 4.0) < 1e-9
    assert result.ci_low < 4.0 < result.ci_high and result.p_value < 1e-4
    # Exposure constant within each stratum: nothing to compare.
    flat = mantel_haenszel(np.array([[[20, 80], [0, 0]], [[0, 0], [10, 40]]]))
    assert flat.p_value == 1.0

"""Which ``sys.*`` values, robots and sites a cluster's failures over-represent, within strata.

A value counts for a cluster only when, *within* each deployment and site (so a config
rolled out in the deployment where another cause began to grow, or a site that simply runs
more episodes, cannot stand in for it), episodes carrying it fail with this cluster's
signature more often than those that do not (Cochran-Mantel-Haenszel), and the cluster's
failures carry it more than the other failures do. A value that marks every kind of failure
alike is then no finding for any one cluster, so it never becomes another cluster's action.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sim2real._columns import strings
from sim2real._stratified import StratifiedTest, mantel_haenszel, strata, tables

if TYPE_CHECKING:
    from sim2real.pipeline import Diagnosis

__all__ = ["Confounder", "StratifiedTest", "cluster_confounders", "mantel_haenszel",
           "over_represented"]

_ALPHA = 0.01  # Bonferroni-corrected over the candidates of one cluster
_MIN_RATIO = 1.5  # common odds ratio a value needs against non-carriers
_SHARE = 0.2  # candidates: values carried by at least this share of the cluster


@dataclass(frozen=True)
class Confounder:
    """A value a cluster's failures over-represent within strata of deployment and site.

    Attributes:
        kind: ``sys``, ``robot`` or ``site``.
        value: ``sys.<column>=<value>``, a robot ID or a site.
        carried: ``(n_cluster,)`` whether each of the cluster's failures carries it.
        test: this cluster's failures against the episodes that did not fail.
        attributable: share of the cluster's failures the value accounts for, with its
            interval: carriers' share times ``(OR - 1) / OR``.
    """

    kind: str
    value: str
    carried: np.ndarray
    test: StratifiedTest
    attributable: tuple[float, float, float]


def over_represented(real: pa.Table, in_cluster: np.ndarray, failed: np.ndarray
                     ) -> list[Confounder]:
    """The ``sys.*`` values, robots and sites this cluster's failures over-represent.

    Args:
        real: the analysed real episodes (``deployment``, optional ``site``, ``robot_id``,
            ``sys.*``).
        in_cluster: ``(n,)`` the episode is one of the cluster's failures.
        failed: ``(n,)`` the episode failed (any cluster, or none).

    Returns:
        The values passing both tests (Bonferroni over the cluster's candidates), strongest
        first.
    """
    n_cluster = int(in_cluster.sum())
    if n_cluster == 0:
        return []
    deployment = strings(real, "deployment")
    site = strings(real, "site")
    by_place, by_deployment = strata(deployment, site), strata(deployment)
    candidates: list[tuple[str, str, np.ndarray, np.ndarray]] = []
    for column in [c for c in real.column_names if c.startswith("sys.")]:
        values = strings(real, column)
        for value in _common(values[in_cluster], n_cluster):
            candidates.append(("sys", f"{column}={value}", values == value, by_place))
    robots = strings(real, "robot_id")
    for robot in _common(robots[in_cluster], n_cluster):
        candidates.append(("robot", str(robot), robots == robot, by_place))
    for place in _common(site[in_cluster], n_cluster):
        candidates.append(("site", str(place), site == place, by_deployment))
    found = []
    for kind, value, carries, layers in candidates:
        against_ok = tables(layers, carries, in_cluster, ~failed | in_cluster)
        against_others = tables(layers, carries, in_cluster, failed)
        test = mantel_haenszel(against_ok)
        other = mantel_haenszel(against_others)
        # The cluster's failures carry it more than episodes that went well, and more than
        # the other failures do: a value that marks every failure is no finding for one.
        if (test.p_value * len(candidates) < _ALPHA and test.odds_ratio >= _MIN_RATIO
                and other.p_value < 0.05):
            carried = carries[in_cluster]
            share = float(carried.mean())
            found.append(Confounder(kind, value, carried, test, (
                share * _excess(test.odds_ratio), share * _excess(test.ci_low),
                share * _excess(test.ci_high))))
    return sorted(found, key=lambda f: (-f.attributable[0], f.value))


def cluster_confounders(diagnosis: Diagnosis, rows: np.ndarray) -> list[Confounder]:
    """:func:`over_represented` for the cluster of events ``rows``, against the real
    episodes of the deployments analysed."""
    episodes = diagnosis.dataset.episodes
    real = episodes.filter(pc.and_(
        pc.equal(episodes["source"], "real"),
        pc.is_in(episodes["deployment"], value_set=pa.array(list(diagnosis.deployments)))))
    ids = np.array(real["episode_id"].to_pylist(), dtype=object)
    mine = {diagnosis.signatures.episode_ids[i] for i in rows}
    in_cluster = np.array([e in mine for e in ids], dtype=bool)
    failed = np.array(pc.equal(real["outcome"], "failure").to_pylist(), dtype=bool)
    return over_represented(real, in_cluster, failed | in_cluster)


def _excess(odds: float) -> float:
    """Share of the carriers' outcomes the exposure accounts for, ``(OR - 1) / OR``."""
    return 0.0 if not odds > 1 else (1.0 if not np.isfinite(odds) else (odds - 1) / odds)


def _common(values: np.ndarray, n: int) -> list[str]:
    counts = Counter(v for v in values if v is not None)
    return [v for v, c in counts.most_common(3) if c >= _SHARE * n]

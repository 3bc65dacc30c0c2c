"""Suspicious sys.* values are judged within deployment and site, never fleet-wide alone."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sim2real.drift.evidence import sys_findings


def _episodes(config: np.ndarray, failed: np.ndarray, deployment: np.ndarray) -> pa.Table:
    n = len(config)
    return pa.table({"task": ["pick"] * n, "deployment": deployment.tolist(),
                     "site": ["s1"] * n, "outcome": np.where(failed, "failure", "success"),
                     "sys.config_hash": config.tolist()})


def test_a_release_that_coincides_with_more_failures_is_no_finding() -> None:
    # The second deployment fails three times as often for reasons of its own; its new
    # config is carried by every one of its episodes, so nothing tells the two apart.
    rng = np.random.default_rng(0)
    deployment = np.repeat(["d1", "d2"], 400)
    failed = rng.random(800) < np.where(deployment == "d1", 0.1, 0.3)
    config = np.where(deployment == "d1", "cfg-old", "cfg-new")
    assert sys_findings(_episodes(config, failed, deployment)) == []


def test_a_stale_config_within_a_deployment_is_found() -> None:
    rng = np.random.default_rng(1)
    deployment = np.repeat(["d1", "d2"], 400)
    stale = rng.random(800) < 0.2
    failed = rng.random(800) < np.where(stale, 0.5, 0.1)
    config = np.where(stale, "cfg-stale", "cfg-ok")
    found = sys_findings(_episodes(config, failed, deployment))
    assert [(f.column, f.value) for f in found] == [("sys.config_hash", "cfg-stale")]
    assert found[0].rate_ratio > 3

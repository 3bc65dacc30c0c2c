"""Local and Ray engines: the same report for the same data and seed, wherever it is stored."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import sim2real
from sim2real.dataset import Channel, load_dataset, write_dataset
from sim2real.drift.compute import QuerySet, compare
from sim2real.engine import LocalExecutor, make_executor
from sim2real.errors import UsageError
from sim2real.match.context import ContextTable
from sim2real.match.grid import SignalGrid, build_grid
from sim2real.match.index import PREFILTER_MIN_ROLLOUTS
from sim2real.match.matcher import RolloutBank, RolloutMatcher

from ..conftest import ObjectStore, World


def _square(offset: int, x: int) -> int:
    return x * x + offset


def test_local_executor_keeps_item_order() -> None:
    assert LocalExecutor(2).map_shared(_square, 1, list(range(10))) == [
        x * x + 1 for x in range(10)]


def test_unknown_engine_and_address_without_ray_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="unknown engine"):
        make_executor("spark")
    with pytest.raises(UsageError, match="--address"):
        make_executor("local", address="auto")


@pytest.fixture(scope="module")
def ray(s3: ObjectStore) -> Iterator[Any]:
    """One local Ray runtime for the module (each start costs seconds). It starts after the
    object store, so its workers inherit the store's credentials from the environment."""
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'sim2real[ray]'")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def _report_json(out: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    report["dataset"].pop("path")
    return report


def test_local_and_ray_engines_write_the_same_report(standard: World, ray: Any,
                                                     s3: ObjectStore, tmp_path: Path) -> None:
    sim2real.analyze(standard.dataset, tmp_path / "local", seed=3, engine="local")
    sim2real.analyze(standard.dataset, tmp_path / "ray", seed=3, engine="ray")
    uri = s3.upload(standard.dataset, "engines")
    sim2real.analyze(uri, tmp_path / "ray-s3", seed=3, engine="ray")
    expected = _report_json(tmp_path / "local")
    assert _report_json(tmp_path / "ray") == expected
    assert _report_json(tmp_path / "ray-s3") == expected


def _many_short_episodes(root: Path) -> Path:
    """2,500 sim rollouts in three sorted parts: enough for the sharded read."""
    ids = [f"s{i:05d}" for i in range(2500)]
    rng = np.random.default_rng(0)
    parts = []
    for chunk in np.array_split(np.arange(len(ids)), 3):
        n = rng.integers(3, 8, size=chunk.size)
        rows = np.repeat(chunk, n)
        t = np.concatenate([np.sort(rng.uniform(0, 1, k)) for k in n])
        parts.append(pa.table({"episode_id": [ids[r] for r in rows], "t": t,
                               "x": rng.normal(size=rows.size)}))
    episodes = pa.table({"episode_id": ids, "source": ["sim"] * len(ids),
                         "task": ["pick"] * len(ids)})
    return write_dataset(root, episodes, parts, channels=[Channel("x", "dynamics")])


def test_ray_tasks_read_signal_shards_from_s3(ray: Any, s3: ObjectStore,
                                              tmp_path: Path) -> None:
    local = load_dataset(_many_short_episodes(tmp_path / "ds"))
    remote = load_dataset(s3.upload(tmp_path / "ds", "shards"))
    ids = list(local.episodes["episode_id"].to_pylist())[::-1]
    expected = build_grid(local, ids, ["x"], 0.1, 1.0)
    grid = build_grid(remote, ids, ["x"], 0.1, 1.0, make_executor("ray"))
    np.testing.assert_array_equal(grid.values, expected.values)
    np.testing.assert_array_equal(grid.durations, expected.durations)


def test_prefiltered_matching_is_the_same_on_every_engine(ray: Any) -> None:
    """A bank large enough for the prefilter (its BLAS product must not depend on how many
    threads the engine gives it): the same matches and comparisons here, in local worker
    processes and in Ray tasks."""
    rng = np.random.default_rng(1)
    n = PREFILTER_MIN_ROLLOUTS + 500
    grid = SignalGrid(tuple(f"s{i}" for i in range(n)), ("a", "b", "c"), 0.1,
                      rng.normal(size=(n, 41, 3)).cumsum(axis=1).astype(np.float32),
                      np.full(n, 4.0))
    context = ContextTable(n, {"ctx.object": rng.choice(np.array(["box", "can"], dtype=object),
                                                        size=n)},
                           {"ctx.mass": rng.uniform(0.1, 2.0, size=n)})
    bank = RolloutBank(grid, np.full(n, "pick", dtype=object), rng.random(n) < 0.3,
                       np.where(rng.random(n) < 0.3, rng.uniform(1, 4, size=n), np.nan), context)
    matcher = RolloutMatcher().fit(bank)
    assert matcher.index_ is not None
    rows = rng.choice(n, size=300, replace=False)
    queries = QuerySet(grid, rows, bank.tasks[rows], rng.uniform(1.0, 4.0, size=300), 10.0,
                       context.take(rows), exclude_self=True)
    results = [compare(queries, [0, 1, 2], [], matcher, None, 4, executor)
               for executor in (None, LocalExecutor(2), make_executor("ray"))]
    for diffs, nearest in results[1:]:
        assert nearest == results[0][1]
        for d, e in zip(diffs, results[0][0], strict=True):
            np.testing.assert_array_equal(d.diff, e.diff)
            np.testing.assert_array_equal(d.spread, e.spread)

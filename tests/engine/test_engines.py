"""Local and Ray engines: the same report for the same data and seed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import sim2real
from sim2real.engine import LocalExecutor, make_executor
from sim2real.errors import UsageError


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


def _report_json(out: Path) -> dict[str, object]:
    report = json.loads((out / "report.json").read_text())
    report.pop("created_at", None)
    report.pop("generated_at", None)
    return report


def test_local_and_ray_engines_write_the_same_report(standard, tmp_path: Path) -> None:
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'sim2real[ray]'")
    sim2real.analyze(standard.dataset, tmp_path / "local", seed=3, engine="local")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        sim2real.analyze(standard.dataset, tmp_path / "ray", seed=3, engine="ray")
    finally:
        ray.shutdown()
    assert _report_json(tmp_path / "local") == _report_json(tmp_path / "ray")

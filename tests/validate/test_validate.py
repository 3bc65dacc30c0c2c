"""validate on worlds whose fixes are known: the fixed cause shrinks, nothing else moves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sim2real.cli import main
from sim2real.demo.synthetic import generate_world, standard_world, unchanged_world
from sim2real.errors import UsageError
from sim2real.validate import rate_comparison, validate


@pytest.fixture(scope="session")
def standard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("std")
    generate_world(standard_world(), tmp, seed=0)
    return tmp


@pytest.fixture(scope="session")
def unchanged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("unch")
    generate_world(unchanged_world(), tmp, seed=0)
    return tmp


def _split(key: dict, deployments: list[str]) -> tuple[list[str], list[str]]:
    fixed = next(c["fixed_in"] for c in key["causes"] if c["fixed_in"])
    i = deployments.index(fixed)
    return deployments[:i], deployments[i:]


def test_fixed_cause_shrank_and_nothing_else_falls(standard: Path, tmp_path: Path) -> None:
    key = json.loads((standard / "answer_key.json").read_text())
    deployments = [f"w{i:02d}" for i in range(1, 9)]
    baseline, candidate = _split(key, deployments)
    result = validate(standard / "dataset", baseline, candidate, out=tmp_path / "v")
    assert (tmp_path / "v" / "validation.json").exists()
    assert (tmp_path / "v" / "validation.html").exists()
    fixed = next(c["name"] for c in key["causes"] if c["fixed_in"])
    shrank = [c for c in result.model.clusters if c.verdict in ("shrank", "gone")]
    assert shrank, [c.verdict for c in result.model.clusters]
    assert all(c.taxonomy == "deployment_system_noise" for c in shrank)
    # Only a cause whose true rate rose may be called "grew".
    for c in result.model.clusters:
        if c.verdict == "grew":
            assert c.taxonomy == "perception_drift"  # dim_lighting ramps up over the weeks
        assert c.model_extra is not None and "note" in c.model_extra
    assert fixed == "stale_config"


def test_unchanged_world_is_unchanged_everywhere(unchanged: Path) -> None:
    deployments = [f"w{i:02d}" for i in range(1, 9)]
    result = validate(unchanged / "dataset", deployments[:6], deployments[6:])
    assert result.model.clusters
    assert {c.verdict for c in result.model.clusters} == {"unchanged"}


def test_a_handful_of_events_cannot_shrink() -> None:
    ratio, low, high, p = rate_comparison(3, 300.0, 0, 300.0)
    assert ratio == 0.0 and low == 0.0 and high is not None and high > 1
    assert p > 0.05


def test_usage_errors(standard: Path) -> None:
    with pytest.raises(UsageError):
        validate(standard / "dataset", ["w01"], ["w01"])
    with pytest.raises(UsageError):
        validate(standard / "dataset", ["w01"], ["nope"])
    # a target names a cluster of an earlier report (it said "targeted C9", exit 0, before)
    with pytest.raises(UsageError, match="--target C9: names clusters of an earlier report"):
        validate(standard / "dataset", ["w01"], ["w02"], targets=["C9"])


def test_cli(standard: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli"
    res = CliRunner().invoke(main, ["validate", str(standard / "dataset"), "--baseline",
                                    "w05,w06", "--candidate", "w07,w08", "-o", str(out),
                                    "--quiet"])
    assert res.exit_code == 0, res.output
    assert json.loads((out / "validation.json").read_text())["candidate"] == ["w07", "w08"]
    bad = CliRunner().invoke(main, ["validate", str(standard / "dataset"), "--baseline",
                                    "w05", "--candidate", "zz", "-o", str(out)])
    assert bad.exit_code == 2

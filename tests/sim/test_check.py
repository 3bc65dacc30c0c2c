"""The counterfactual check: the true cause's parameter reproduces, an unrelated one not."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from sim_fixtures import Demo

from sim2real.cli import main
from sim2real.sim.check import check, check_evidence


def test_true_cause_reproduces_and_unrelated_does_not(demo: Demo) -> None:
    events = demo.events_of("r08_worn_pads", 4)
    true = check(demo.dataset, {"param.friction": 0.15}, episodes=events, seeds=2, workers=2)
    other = check(demo.dataset, {"camera_noise": 1.5}, episodes=events, seeds=2, workers=2)
    assert true.reproduces and true.verdict.startswith("reproduces")
    assert true.failure_rate_after > true.failure_rate_before
    assert true.drift_after < true.drift_before and true.drift_fall > 0
    assert not other.reproduces and "does not explain" in other.verdict
    assert set(true.per_event) == set(events)


def test_dim_light_reproduces(demo: Demo) -> None:
    events = demo.events_of("site_b_dim_lighting", 4)
    light = check(demo.dataset, {"light_level": 0.33}, episodes=events, seeds=2, workers=2)
    friction = check(demo.dataset, {"friction": 0.35}, episodes=events, seeds=2, workers=2)
    assert light.reproduces and not friction.reproduces


def test_cli_writes_check_json_and_evidence(demo: Demo, tmp_path: Path) -> None:
    events = demo.events_of("r08_worn_pads", 3)
    out = tmp_path / "run" / "checks" / "friction"
    result = CliRunner().invoke(main, [
        "check", str(demo.dataset), "--episodes", ",".join(events), "--set",
        "param.friction=0.15", "--seeds", "2", "--workers", "2", "--quiet", "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "check.json").read_text())
    assert data["update"] == {"friction": 0.15} and data["baseline"] == {"friction": 0.9}
    # check_evidence keys by cluster; an explicit episode list has none, so add one
    data["cluster_id"] = "C2"
    (out / "check.json").write_text(json.dumps(data))
    assert check_evidence(tmp_path / "run" / "checks")["C2"].startswith("counterfactual check")


def test_cli_rejects_a_malformed_update(demo: Demo) -> None:
    result = CliRunner().invoke(main, ["check", str(demo.dataset), "--episodes", "x",
                                       "--set", "param.friction"])
    assert result.exit_code == 2 and "param.NAME=VALUE" in result.output

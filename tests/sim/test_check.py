"""The counterfactual check: the true cause's parameter reproduces, an unrelated one not."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from sim_fixtures import Demo
from toy import TRUE_GAIN, ToyAdapter, real_ids, toy_dataset

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


def test_saturated_failures_the_true_value_passes(tmp_path: Path) -> None:
    # Nominal sim already fails 4 of 5 replays; the true gain fails all 5, as reality did.
    # A required rise of the failure rate could never pass it (issue 19).
    dataset = toy_dataset(tmp_path / "toy")
    true = check(dataset, {"gain": TRUE_GAIN}, episodes=real_ids(), adapter=ToyAdapter(),
                 workers=1)
    assert (true.failures_before, true.failures_after, true.replays) == (4, 5, 5)
    assert true.seeds == 1  # deterministic: one replay per episode
    assert true.outcome_reproduced and true.drift_falls and true.reproduces
    assert true.failure_rate_after_high == 1.0 and true.failure_rate_after_low < 1.0
    assert true.failure_gain == 0.2 and true.drift_after < 0.01
    # Failing every time, but far too early: the outcome matches, the drift rises.
    early = check(dataset, {"gain": 4.0}, episodes=real_ids(), adapter=ToyAdapter(), workers=1)
    assert early.outcome_reproduced and not early.drift_falls and not early.reproduces
    assert "drift does not fall" in early.verdict
    # Succeeding where reality fell: the outcome test rejects it.
    soft = check(dataset, {"gain": 0.5}, episodes=real_ids(), adapter=ToyAdapter(), workers=1)
    assert soft.failures_after == 0 and not soft.outcome_reproduced and not soft.reproduces
    assert soft.outcome_p_value < 0.05


def test_adapter_options_reach_the_constructor(tmp_path: Path) -> None:
    dataset = toy_dataset(tmp_path / "toy")
    result = CliRunner().invoke(main, [
        "check", str(dataset), "--episodes", ",".join(real_ids()), "--set", "param.gain=1.5",
        "--adapter", "toy:ToyAdapter", "--adapter-option", "duration=0.2", "--workers", "1",
        "-o", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "c" / "check.json").read_text())
    assert data["failures_after"] == 0  # 0.2 s is too short for any ramp to reach 1
    bad = CliRunner().invoke(main, [
        "check", str(dataset), "--episodes", "real-000", "--set", "param.gain=1.5",
        "--adapter", "toy:ToyAdapter", "--adapter-option", "speed=2", "--workers", "1"])
    assert bad.exit_code == 2 and "speed" in bad.output

"""analyze --adapter: the loop calibrates and checks a cluster itself (issue 19 item 4)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from toy import TRUE_GAIN, ToyAdapter, real_ids, toy_dataset

from sim2real.cli import main
from sim2real.dataset import load_dataset
from sim2real.report.model import ReportModel
from sim2real.report.snapshot import Report
from sim2real.sim import CalibrationConfig
from sim2real.sim.loop import close_loop


def _report(taxonomy: str, actions: list[dict[str, object]]) -> Report:
    cluster = {"cluster_id": "C1", "taxonomy": taxonomy, "confidence": 0.8,
               "explanation": "ramps fall early", "size": 5, "events": real_ids(),
               "trend": {"per_deployment": [], "growth": 0.0, "p_value": 1.0},
               "top_channels": [], "actions": actions,
               "sim_params": [{"param": "gain", "sim_low": 0.8, "sim_high": 1.25,
                               "sim_nominal": 1.0, "estimate": 1.4, "shift": 0.9,
                               "outside_range": True}]}
    model = ReportModel.model_validate({
        "tool_version": "test", "events": [], "clusters": [cluster], "fastest_growing": None,
        "dataset": {"episodes_real": 5, "episodes_sim": 30, "failures": 5,
                    "deployments": ["w01"], "tasks": ["ramp"]}})
    return Report(model, pa.table({}), pa.table({}))


@pytest.mark.parametrize("named", [True, False])
def test_loop_puts_checked_evidence_on_the_action(tmp_path: Path, named: bool) -> None:
    ds = load_dataset(toy_dataset(tmp_path / "toy"))
    action = {"kind": "widen_randomization", "target": "param.gain" if named else "robot r1",
              "detail": "widen gain", "expected_reduction": 1.0, "evidence": "attribution"}
    out = close_loop(ds, _report("dynamics_mismatch", [action]), ToyAdapter(),
                     config=CalibrationConfig(budget=40), workers=1)
    (c,) = out.model.clusters
    assert c.sim_check is not None and c.sim_check.reproduces
    assert c.sim_check.fitted["gain"] == pytest.approx(TRUE_GAIN, rel=0.1)
    assert c.sim_check.candidates <= 40 and c.sim_check.failures_after == 5
    evidence = c.actions[0].evidence
    assert evidence is not None and evidence.startswith("attribution. Sim replay (toy")
    assert "replay reproduces the events: 5 of 5 replays fail, reality 5 of 5" in evidence


def test_loop_leaves_other_clusters_alone(tmp_path: Path) -> None:
    ds = load_dataset(toy_dataset(tmp_path / "toy"))
    action = {"kind": "fix_infrastructure", "target": "robot r1", "detail": "reboot",
              "expected_reduction": 1.0}
    report = _report("deployment_system_noise", [action])
    out = close_loop(ds, report, ToyAdapter(), config=CalibrationConfig(budget=40), workers=1)
    assert out.model == report.model


def test_analyze_refuses_a_bad_adapter_or_budget_before_any_work(tmp_path: Path) -> None:
    dataset = toy_dataset(tmp_path / "toy")
    out = tmp_path / "out"
    small = CliRunner().invoke(main, ["analyze", str(dataset), "-o", str(out), "--quiet",
                                      "--adapter", "toy:ToyAdapter", "--budget", "5"])
    assert small.exit_code == 2 and "--budget 5 is too small" in small.output
    unknown = CliRunner().invoke(main, ["analyze", str(dataset), "-o", str(out), "--quiet",
                                        "--adapter", "nope"])
    assert unknown.exit_code == 2 and "unknown simulator adapter 'nope'" in unknown.output
    assert not out.exists()

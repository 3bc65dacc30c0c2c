"""Calibration on the small demo: fits move toward the hidden truth, the discrepancy falls."""

from __future__ import annotations

import json
import math
from pathlib import Path

from click.testing import CliRunner
from sim_fixtures import Demo

from sim2real.cli import main
from sim2real.sim import CalibrationConfig, calibrate

_BUDGET = CalibrationConfig(popsize=6, generations=4, restarts=2, max_episodes=3, seeds=1)


def _closer(fitted: float, nominal: float, truth: float) -> bool:
    return abs(math.log(fitted / truth)) < abs(math.log(nominal / truth))


def test_recovers_dim_light_beyond_the_range(demo: Demo) -> None:
    events = demo.events_of("site_b_dim_lighting", 3)
    result = calibrate(demo.dataset, episodes=events, params=["light_level", "camera_noise"],
                       config=_BUDGET, workers=2)
    light = next(p for p in result.params if p.param == "light_level")
    assert _closer(light.fitted, light.sim_nominal, demo.truth("site_b_dim_lighting"))
    assert light.outside_range and light.fitted < light.sim_low
    assert light.search_low < light.sim_low / 2  # the search went beyond the range
    assert result.discrepancy_after < result.discrepancy_before
    assert light.std > 0 and len(light.fits) == 2
    assert result.rollouts == 3 * (2 * (4 * 6 + 2) + 1 + 2 * 2)


def test_cli_recovers_worn_pads(demo: Demo, tmp_path: Path) -> None:
    events = demo.events_of("r08_worn_pads", 3)
    out = tmp_path / "cal"
    result = CliRunner().invoke(main, [
        "calibrate", str(demo.dataset), "--episodes", ",".join(events), "--param",
        "param.friction", "--popsize", "6", "--generations", "4", "--max-episodes", "3",
        "--seeds", "1", "--workers", "2", "--quiet", "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "calibration.json").read_text())
    (fit,) = data["params"]
    assert _closer(fit["fitted"], fit["sim_nominal"], demo.truth("r08_worn_pads"))
    assert data["discrepancy_after"] < data["discrepancy_before"]


def test_cli_names_an_unknown_parameter(demo: Demo, tmp_path: Path) -> None:
    events = demo.events_of("r08_worn_pads", 1)
    result = CliRunner().invoke(main, [
        "calibrate", str(demo.dataset), "--episodes", events[0], "--param", "gravity",
        "--quiet", "-o", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "gravity" in result.output and not (tmp_path / "x").exists()

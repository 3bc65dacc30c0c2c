"""Calibration on the small demo: fits move toward the hidden truth, the discrepancy falls."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from sim_fixtures import Demo
from toy import GAIN, TRUE_GAIN, ToyAdapter, real_ids, toy_dataset

from sim2real.cli import main
from sim2real.dataset.schema import ParamRange
from sim2real.errors import UsageError
from sim2real.sim import CalibrationConfig, calibrate
from sim2real.sim._space import SearchSpace
from sim2real.sim.calibrate import _Fit, _fit, _param_fits, plan

_BUDGET = CalibrationConfig(budget=57, restarts=2, max_episodes=3, seeds=1)


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
    assert light.std is not None and light.std > 0 and len(light.fits) == 2
    # the budget bought 2 restarts x 4 generations x 6 + 2 x 2 offers + nominal + 4 probes
    assert result.plan == {"budget": 57, "screening": 0, "restarts": 2, "popsize": 6,
                           "generations": 4, "candidates": 57, "polish": 0}
    assert result.rollouts == 3 * 57


def test_cli_recovers_worn_pads(demo: Demo, tmp_path: Path) -> None:
    events = demo.events_of("r08_worn_pads", 3)
    out = tmp_path / "cal"
    result = CliRunner().invoke(main, [
        "calibrate", str(demo.dataset), "--episodes", ",".join(events), "--param",
        "param.friction", "--budget", "55", "--max-episodes", "3",
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


def test_plan_spends_the_budget_and_says_so() -> None:
    p = plan(200, 4)  # one fit of 23 generations: two of 11 would stop short
    assert p.candidates <= 200 and p.restarts == 1 and p.popsize == 8 and p.generations == 23
    p = plan(300, 4)
    assert p.candidates <= 300 and p.restarts == 2 and p.generations == 17
    assert p.candidates == p.restarts * (p.generations * p.popsize + 2) + 1 + 2 * 4
    assert plan(30, 1).restarts == 1
    with pytest.raises(UsageError, match="at least"):
        plan(10, 2)


def test_one_restart_and_a_narrow_box_are_said_plainly(tmp_path: Path) -> None:
    # The true gain (1.5) lies beyond a box only 1.1x wider than the range (0.73..1.38).
    dataset = toy_dataset(tmp_path / "toy")
    cfg = CalibrationConfig(budget=40, restarts=1, widen=1.1)
    result = calibrate(dataset, episodes=real_ids(), params=["gain"], adapter=ToyAdapter(),
                       config=cfg, workers=1)
    (gain,) = result.params
    assert result.seeds == 1 and result.objective == "summary" and result.plan["restarts"] == 1
    assert result.rollouts == 5 * result.plan["candidates"] <= 5 * 40
    assert gain.at_edge and gain.fitted == pytest.approx(1.375, rel=0.01)
    assert gain.note is not None and "widen the search (--widen 2.2)" in gain.note
    assert gain.std_between is None and gain.converged is None
    assert any("not estimated" in w for w in result.warnings)
    # Wide enough, two restarts: the truth, agreed on, with an uncertainty from both.
    wide = calibrate(dataset, episodes=real_ids(), params=["gain"], adapter=ToyAdapter(),
                     config=CalibrationConfig(budget=92), workers=1)
    (gain,) = wide.params
    assert gain.fitted == pytest.approx(TRUE_GAIN, rel=0.03) and not gain.at_edge
    assert gain.converged and gain.identifiable
    # this budget stops while the discrepancy still falls, and the result says so
    assert wide.converged or any("raise --budget" in w for w in wide.warnings)
    assert gain.std_between is not None and gain.std is not None


def test_disagreeing_fits_not_converged_unless_equally_good() -> None:
    space = SearchSpace((GAIN,), widen=4.0)
    per_ep = np.full(5, 1.0)
    probe = np.stack([per_ep + 0.5, per_ep + 0.5])  # the discrepancy curves up: not flat
    steps = np.array([0.35, 0.35])
    good = _Fit(np.array([0.5]), 1.0, per_ep, [2.0, 1.0])
    stuck = _Fit(np.array([-1.0]), 1.6, per_ep + 0.6, [2.0, 1.6])
    (fit,) = _param_fits(space, [good, stuck], good, probe, steps, 4.0, 0.06)
    assert fit.converged is False and fit.identifiable
    assert fit.note is not None and "raise --budget" in fit.note
    twin = _Fit(np.array([-1.0]), 1.0, per_ep, [2.0, 1.0])
    (fit,) = _param_fits(space, [good, twin], good, probe, steps, 4.0, 0.06)
    assert not fit.identifiable and fit.note is not None and "equally well" in fit.note


def test_unnamed_parameters_are_screened_within_the_budget(tmp_path: Path) -> None:
    dataset = toy_dataset(tmp_path / "toy")
    result = calibrate(dataset, episodes=real_ids(), adapter=ToyAdapter(),
                       config=CalibrationConfig(budget=40), workers=1)
    assert result.plan["screening"] == 5 and result.plan["candidates"] <= 40
    assert set(result.screened) == {"gain"} and result.screened["gain"] < result.discrepancy_before
    assert result.rollouts == 5 * result.plan["candidates"]


def _valley(xs: Sequence[np.ndarray]) -> np.ndarray:
    """Residuals of two parameters that trade against each other (two link masses): a
    narrow straight valley along a + b = 1, its floor rising 10,000x slower than its walls;
    the minimum 0 at (0.5, 0.5)."""
    return np.array([[10.0 * (x[0] + x[1] - 1.0), 0.1 * (x[0] - x[1])] for x in xs])


@pytest.mark.parametrize("seed", range(4))
def test_the_polish_follows_a_narrow_valley_that_cma_es_creeps_along(seed: int) -> None:
    ranges = (ParamRange("a", -1.0, 1.0, 0.0), ParamRange("b", -1.0, 1.0, 0.0))
    space = SearchSpace(ranges, widen=0.5)
    cfg = CalibrationConfig(seed=seed)

    def objective(xs: Sequence[np.ndarray]) -> np.ndarray:
        return (_valley(xs) ** 2).sum(axis=1)

    polished = plan(60, 2, restarts=1, polish=True)
    assert polished.polish == 3 * 6 and polished.candidates <= 60
    _, x, history = _fit(objective, space, polished, cfg, 0, _valley)
    assert float(objective([x])[0]) < 1e-8 and np.allclose(x, 0.5, atol=1e-3)
    assert history == sorted(history, reverse=True)
    # The same evaluations spent on CMA-ES generations alone stop part way along the floor.
    _, x, _ = _fit(objective, space, plan(60, 2, restarts=1), cfg, 0)
    assert float(objective([x])[0]) > 1e-4


def test_a_polish_is_bought_only_where_it_leaves_room_to_explore() -> None:
    p = plan(200, 4, polish=True)  # two polished fits beat one long unpolished fit
    assert p.restarts == 2 and p.polish == 5 * 6 and p.generations == 7
    assert p.candidates == p.restarts * (p.generations * p.popsize + p.polish + 2) + 1 + 2 * 4
    assert plan(57, 2, 2, polish=True).polish == 0  # fewer than 3 iterations: none

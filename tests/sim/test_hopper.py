"""The example adapter package (examples/hopper-adapter): registration, and the check on
the Hopper, where sim at the wrong masses already fails (issue 19)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest

from sim2real.sim import CalibrationConfig, calibrate, load_adapter
from sim2real.sim.adapter import ENTRY_POINT_GROUP, is_deterministic
from sim2real.sim.check import check

_PACKAGE = Path(__file__).resolve().parents[2] / "examples" / "hopper-adapter"
sys.path.insert(0, str(_PACKAGE / "src"))
from sim2real_hopper.synthetic import TRUTH, hopper_fleet  # noqa: E402


def test_the_entry_point_names_a_working_adapter() -> None:
    meta = tomllib.loads((_PACKAGE / "pyproject.toml").read_text())
    target = meta["project"]["entry-points"][ENTRY_POINT_GROUP]["hopper"]
    sim = load_adapter(target, {"healthy_z": 0.8})
    assert sim.name == "hopper" and is_deterministic(sim) and sim.healthy_z == 0.8  # type: ignore[attr-defined]


def test_installed_package_is_found_by_name(tmp_path: Path) -> None:
    pytest.importorskip("wheel")  # pip builds the package with the environment's setuptools
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--no-build-isolation", "--target", str(tmp_path), str(_PACKAGE)],
                   check=True)
    sys.path.insert(0, str(tmp_path))
    try:
        found = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
        assert found.get("hopper") == "sim2real_hopper.adapter:HopperAdapter"
    finally:
        sys.path.remove(str(tmp_path))


def test_check_accepts_the_true_masses_and_rejects_wrong_ones(tmp_path: Path) -> None:
    nominal = {"torso_mass": 4.8, "thigh_mass": 3.1, "leg_mass": 3.5, "foot_mass": 3.9}
    fleet = hopper_fleet(tmp_path / "hop", nominal, n_real=5, n_sim=12, seed=3)
    real = [f"real-{i:03d}" for i in range(5)]
    sim = load_adapter("sim2real_hopper.adapter:HopperAdapter")
    true = check(fleet, TRUTH, episodes=real, adapter=sim, workers=1)
    assert true.reproduces and true.drift_after < 0.01 and true.failures_after == 5
    heavy = check(fleet, {k: 1.8 * v for k, v in TRUTH.items()}, episodes=real, adapter=sim,
                  workers=1)
    assert not heavy.reproduces


def test_calibration_recovers_the_masses_where_they_trade_against_each_other(
        tmp_path: Path) -> None:
    # Run 5 of bench/hopper_bench.py: before the least-squares polish the fit settled in the
    # valley where thigh and leg mass trade off (squared mass error 2.98 at this budget).
    rng = np.random.default_rng(1005)
    nominal = {k: round(v * float(rng.uniform(0.5, 1.5)), 3) for k, v in TRUTH.items()}
    fleet = hopper_fleet(tmp_path / "hop", nominal, seed=5)
    real = [f"real-{i:03d}" for i in range(5)]
    result = calibrate(fleet, episodes=real, params=list(TRUTH),
                       adapter="sim2real_hopper.adapter:HopperAdapter", workers=2,
                       config=CalibrationConfig(budget=200, max_episodes=5, widen=1.6, seed=5))
    assert result.objective == "trajectory"  # auto: the adapter replays its commands
    assert result.plan["restarts"] == 2 and result.plan["polish"] > 0
    assert result.plan["candidates"] <= 200
    assert sum((result.fitted[k] - v) ** 2 for k, v in TRUTH.items()) < 0.05
    assert result.discrepancy_after < 0.01 * result.discrepancy_before

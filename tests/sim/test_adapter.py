"""Adapter discovery and the example adapter's open-loop replay."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sim2real.errors import UsageError
from sim2real.sim import RolloutRequest, SimulatorAdapter, available_adapters, load_adapter
from sim2real.sim._space import SearchSpace
from sim2real.sim.example_adapter import ARM_PARAMS, ArmAdapter


def test_adapters_load_by_name_and_path() -> None:
    assert "demo" in available_adapters()
    assert load_adapter("demo").name == "demo"
    arm = load_adapter("sim2real.sim.example_adapter:ArmAdapter")
    assert isinstance(arm, SimulatorAdapter) and arm.command_channels == ("tau1", "tau2")
    with pytest.raises(UsageError, match="unknown simulator adapter"):
        load_adapter("nope")
    with pytest.raises(UsageError, match="not a simulator adapter"):
        load_adapter("collections:OrderedDict")


def test_arm_replays_commands_deterministically() -> None:
    t = np.arange(50) / 50.0
    cmd = pa.table({"t": t, "tau1": np.sin(t), "tau2": np.cos(t)})
    req = RolloutRequest({"mass1": 1.3}, {}, {"q1": 0.1, "q2": 0.0}, 0, 50.0, cmd)
    a, b = ArmAdapter().rollout(req), ArmAdapter().rollout(req)
    assert a.telemetry.equals(b.telemetry) and a.telemetry.num_rows == 50
    heavier = ArmAdapter().rollout(req._replace(params={"mass1": 2.0}))
    assert not heavier.telemetry["q1"].equals(a.telemetry["q1"])


def test_search_space_reaches_beyond_the_range() -> None:
    space = SearchSpace(tuple(ARM_PARAMS.values()), widen=4.0)
    lo, hi = space.bounds()
    low = space.values(lo)
    assert low["mass1"] == pytest.approx(0.2) and space.values(hi)["damping"] == pytest.approx(0.32)
    x = space.coords({"mass1": 1.45, "mass2": 0.5, "damping": 0.12})
    assert space.values(x) == pytest.approx({"mass1": 1.45, "mass2": 0.5, "damping": 0.12})
    assert np.allclose(space.coords({k: p.nominal for k, p in ARM_PARAMS.items()}), 0.0)

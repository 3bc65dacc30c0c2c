"""Close the loop in simulation: the simulator adapter, calibration, counterfactual checks."""

from sim2real.sim.adapter import (
    RolloutRequest,
    RolloutResult,
    SimulatorAdapter,
    available_adapters,
    load_adapter,
)
from sim2real.sim.calibrate import Calibration, CalibrationConfig, ParamFit, calibrate

__all__ = [
    "Calibration",
    "CalibrationConfig",
    "ParamFit",
    "RolloutRequest",
    "RolloutResult",
    "SimulatorAdapter",
    "available_adapters",
    "calibrate",
    "load_adapter",
]

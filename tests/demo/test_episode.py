"""The episode loop's shortcuts: the crash-scan guard and the order of a telemetry row."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from sim2real.demo import InitState, SystemProfile, simulate_episode
from sim2real.demo.episode import _workspace
from sim2real.demo.world import BIN_CENTER, BIN_HALF, load_model


def _gripper_env_contacts(object_type: str, x: float, y: float, z: float) -> int:
    """Gripper-table/bin contacts with the gantry at joint positions (x, y, z)."""
    model = load_model(object_type)
    data = mujoco.MjData(model)
    ids = _workspace(object_type)[1]
    data.qpos[:3] = (x, y, z)
    data.qpos[ids.obj_qpos:ids.obj_qpos + 3] = (-0.25, -0.25, 0.1)  # out of the way
    mujoco.mj_forward(model, data)
    return sum(tuple(pair) in ids.crash_pairs for pair in data.contact.geom.tolist())


@pytest.mark.parametrize("object_type", ["box_m", "bottle"])
def test_no_crash_contact_above_the_guard(object_type: str) -> None:
    clear_z = _workspace(object_type)[1].clear_z
    wall_x = BIN_CENTER[0] + BIN_HALF  # over the bin's +x wall, its highest part
    xs = [*np.linspace(-0.3, 0.55, 18), wall_x]
    ys = np.linspace(-0.3, 0.3, 13)
    assert all(_gripper_env_contacts(object_type, x, y, clear_z + 1e-4) == 0
               for x in xs for y in ys)
    # The guard is tight: just below it the pads reach the wall.
    assert _gripper_env_contacts(object_type, wall_x, 0.0, clear_z - 2e-3) > 0


def test_a_row_lands_in_its_channels() -> None:
    episode = simulate_episode({}, {"object_type": "box_m"}, InitState((0.0, 0.0)), seed=3,
                               system=SystemProfile(drop_prob=0.05))
    assert episode.outcome == "success"
    table = episode.telemetry

    def col(name: str) -> np.ndarray:
        return np.asarray(table[name].to_numpy())

    # Each channel's own signature, so a row written in another order fails here.
    assert col("z_pos")[0] == 0.0  # the gantry starts at its home position
    assert col("x_pos")[-1] == pytest.approx(BIN_CENTER[0], abs=0.01)  # and ends over the bin
    assert set(np.unique(col("cmd_grip"))) == {0.0, 1.0}
    assert col("grip_force").min() == 0.0 and col("grip_force").max() == pytest.approx(10.0)
    assert col("grip_width")[0] == pytest.approx(0.1)  # fully open
    assert np.all(np.abs(np.column_stack([col("cmd_x"), col("cmd_y"), col("cmd_z")])) <= 0.4)
    assert np.all((col("det_confidence") > 0.5) & (col("det_confidence") < 1.0))
    assert np.all((col("pose_err_mm") > 0.0) & (col("pose_err_mm") < 20.0))
    assert col("img_brightness").mean() == pytest.approx(0.5, abs=0.02)
    assert col("img_contrast").mean() == pytest.approx(0.32, abs=0.02)
    assert np.all(col("loop_latency_ms") >= 30.0)  # the nominal actuator latency plus jitter
    dropped = col("dropped_msgs")
    assert np.all(np.diff(dropped) >= 0) and dropped[-1] > 0 and np.all(dropped % 1 == 0)

"""The adapter for sim2real's own MuJoCo demo world (``--adapter demo``).

The demo's policy is a closed-loop sequencer that perceives the object before it moves, so
a replay re-runs that policy from the recorded initial state rather than feeding back the
recorded commands (``command_channels`` is empty). The dataset does not store the
object's starting pose, so :meth:`DemoAdapter.initial_state` reads it off the telemetry:
the pads close on the object, so the pad position when the grip command first goes up is
where the object lay (up to the detector's few-millimetre bias).
"""

from __future__ import annotations

from collections.abc import Mapping

import mujoco
import numpy as np
import pyarrow as pa

from sim2real.demo import InitState, simulate_episode
from sim2real.sim.adapter import RolloutRequest, RolloutResult

__all__ = ["DemoAdapter"]

_CONTEXT_KEYS = ("object_type", "light_setting", "clutter")


class DemoAdapter:
    """Runs :func:`sim2real.demo.simulate_episode` as a simulation rollout (no system effects)."""

    name = "demo"
    command_channels: tuple[str, ...] = ()

    def initial_state(self, episode: Mapping[str, object], telemetry: pa.Table) -> dict[str, float]:
        """The object's starting ``x``/``y`` (metres) and ``yaw`` from a recorded episode.

        The yaw is not observable from the demo's channels; it is taken as 0, which the
        replays' sensor noise seeds average over no better than the real fleet did.
        """
        x = _column(telemetry, "x_pos")
        y = _column(telemetry, "y_pos")
        if x.size == 0:
            return {"object_x": 0.0, "object_y": 0.0, "object_yaw": 0.0}
        grip = _column(telemetry, "cmd_grip")
        closed = np.flatnonzero(grip > 0.5) if grip.size == x.size else np.array([], int)
        if closed.size:
            i = int(closed[0])
        else:
            # The grip never closed (the detector never got confident): the pads hovered
            # over the estimate, if they moved at all, so the lowest point is the best guess.
            z = _column(telemetry, "z_pos")
            i = int(np.nanargmin(z)) if z.size == x.size else x.size - 1
        return {"object_x": float(x[i]), "object_y": float(y[i]), "object_yaw": 0.0}

    def rollout(self, request: RolloutRequest) -> RolloutResult:
        """One closed-loop episode of the demo cell with the requested parameters."""
        context = {k: request.context[k] for k in _CONTEXT_KEYS if k in request.context}
        state = request.init_state
        init = InitState((float(state.get("object_x", 0.0)), float(state.get("object_y", 0.0))),
                         float(state.get("object_yaw", 0.0)))
        # The episode monitor reads MuJoCo's instability warnings itself; printed, they
        # would only scribble over the progress bar.
        mujoco.set_mju_user_warning(lambda _msg: None)
        result = simulate_episode(dict(request.params), context, init, request.seed,
                                  request.rate_hz)
        table = result.telemetry
        if "episode_id" in table.column_names:
            table = table.drop_columns(["episode_id"])
        return RolloutResult(table, result.outcome, result.failure_time)


def _column(table: pa.Table, name: str) -> np.ndarray:
    if name not in table.column_names:
        return np.array([], dtype=float)
    return np.asarray(table[name].to_numpy(zero_copy_only=False), dtype=float)

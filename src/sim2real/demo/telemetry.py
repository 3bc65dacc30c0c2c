"""The demo's telemetry channels and a recorder that turns ticks into an Arrow table.

Layout of the recorded table: one row per sample, ``t`` (seconds from episode start) then
one float64 column per channel, in :data:`CHANNELS` order; system channels only when the
episode ran on a real robot.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from sim2real.dataset.schema import Channel

__all__ = ["CHANNELS", "SYSTEM_CHANNELS", "Recorder"]

CHANNELS: tuple[Channel, ...] = (
    Channel("x_pos", "dynamics", "m"),
    Channel("y_pos", "dynamics", "m"),
    Channel("z_pos", "dynamics", "m"),
    Channel("x_vel", "dynamics", "m/s"),
    Channel("y_vel", "dynamics", "m/s"),
    Channel("z_vel", "dynamics", "m/s"),
    Channel("x_force", "dynamics", "N"),
    Channel("y_force", "dynamics", "N"),
    Channel("z_force", "dynamics", "N"),
    Channel("grip_width", "dynamics", "m"),
    Channel("grip_force", "dynamics", "N"),
    Channel("obj_slip", "dynamics", "m/s"),
    Channel("tracking_err", "dynamics", "m/s"),
    Channel("det_confidence", "perception", "1"),
    Channel("pose_err_mm", "perception", "mm"),
    Channel("img_brightness", "perception", "1"),
    Channel("img_contrast", "perception", "1"),
    Channel("cmd_x", "policy", "m/s"),
    Channel("cmd_y", "policy", "m/s"),
    Channel("cmd_z", "policy", "m/s"),
    Channel("cmd_grip", "policy", "1"),
    Channel("loop_latency_ms", "system", "ms"),
    Channel("dropped_msgs", "system", "count"),
)
SYSTEM_CHANNELS = tuple(c.name for c in CHANNELS if c.family == "system")


class Recorder:
    """Collects samples at ``rate_hz`` from a faster control loop.

    A tick is recorded when it is the first at or after the next sample time, so any rate
    up to the control rate works and sample times stay strictly increasing.
    """

    def __init__(self, rate_hz: float, with_system: bool) -> None:
        self.period = 1.0 / rate_hz
        self.names = [c.name for c in CHANNELS if with_system or c.family != "system"]
        self._next = 0.0
        self._t: list[float] = []
        # The rows packed one after the other as native float64: (n_samples * n_channels,).
        # Packing a row is the cheapest way from Python floats to a buffer numpy can read.
        self._row = struct.Struct(f"={len(self.names)}d")
        self._values = bytearray()

    def due(self, t: float) -> bool:
        """Whether the tick at time ``t`` should be recorded (advances the schedule)."""
        if t + 1e-9 < self._next:
            return False
        self._next += self.period
        return True

    def add(self, t: float, row: Sequence[float]) -> None:
        """Record one sample: ``row`` holds the recorded channels' values in ``names`` order.

        Raises:
            struct.error: ``row`` does not hold one number per recorded channel.
        """
        self._values += self._row.pack(*row)
        self._t.append(round(t, 6))

    def table(self, episode_id: str) -> pa.Table:
        """The samples as a signals table for ``episode_id``."""
        n = len(self._t)
        # (n_channels, n_samples): each channel's column is contiguous for Arrow.
        data = np.frombuffer(self._values, dtype=np.float64).reshape(n, len(self.names)).T.copy()
        cols: dict[str, pa.Array] = {
            "episode_id": pa.array([episode_id] * n, pa.string()),
            "t": pa.array(self._t, pa.float64()),
        }
        for name, column in zip(self.names, data, strict=True):
            cols[name] = pa.array(column, pa.float64())
        return pa.table(cols)

"""A simulated object detector whose error and confidence follow the light and the scene.

What the camera sees is summarised by image brightness and contrast, both driven by the
effective light level. The pose estimate carries a per-episode bias (calibration, shadows:
it does not average away) plus per-frame noise; both grow as the light dims, with clutter
(occlusion) and for objects the detector was never trained on.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = ["LIGHT_SETTINGS", "Detector", "Frame"]

# Requested light setting (a context the operator chooses) -> multiplier on the light level.
LIGHT_SETTINGS = {"standard": 1.0, "bright": 1.15, "eco": 0.9}

_BIAS_SIGMA = 0.0025  # metres, at light 1, camera noise 1, no clutter
_UNKNOWN_BIAS = 0.006  # extra bias for an object class the detector never saw


class Frame(NamedTuple):
    """One detector output: what the controller may use and what telemetry records."""

    confidence: float
    estimate_xy: tuple[float, float]
    error_m: float
    brightness: float
    contrast: float


class Detector:
    """Per-episode detector state: the light it sees and its systematic bias.

    Args:
        light: effective light level (1 = the lighting the detector was tuned for).
        camera_noise: sensor noise multiplier.
        clutter: number of other objects around (0-2), which occlude and distract.
        known: whether the object class is in the training catalogue.
        rng: the episode's random generator.
    """

    def __init__(
        self, light: float, camera_noise: float, clutter: int, known: bool,
        rng: np.random.Generator,
    ) -> None:
        self.light = max(light, 0.05)
        self.clutter = clutter
        self.known = known
        self.rng = rng
        sigma = _BIAS_SIGMA * camera_noise * (1.0 + 0.5 * clutter) / self.light**1.5
        if not known:
            sigma += _UNKNOWN_BIAS
        self.frame_sigma = 0.5 * sigma
        bias_x, bias_y = rng.normal(0.0, sigma, size=2).tolist()
        self.bias = (bias_x, bias_y)
        # Logit of the detector's confidence: high in good light, lower with clutter and
        # unknown classes; a dim scene pushes it under the controller's threshold.
        self.conf_logit = 7.0 * (self.light - 0.32) - 0.5 * clutter - (1.5 if not known else 0.0)

    def observe(self, x: float, y: float) -> Frame:
        """One camera frame of the object lying at (``x``, ``y``) (metres)."""
        # One call for the frame's five standard normals, in plain floats: this runs every
        # few control ticks. ``normal(0, s)`` is ``s`` times the next standard normal, so
        # these are the draws of separate ``normal`` calls, in the same order.
        z_x, z_y, z_logit, z_bright, z_contrast = self.rng.standard_normal(5).tolist()
        est_x = x + self.bias[0] + self.frame_sigma * z_x
        est_y = y + self.bias[1] + self.frame_sigma * z_y
        logit = self.conf_logit + 0.4 * z_logit
        light = self.light
        brightness = min(max(0.5 * light + 0.015 * z_bright, 0.0), 1.0)
        contrast = max(0.4 * light / (light + 0.25) + 0.01 * z_contrast, 0.0)
        return Frame(
            confidence=1.0 / (1.0 + math.exp(-logit)),
            estimate_xy=(est_x, est_y),
            # numpy's hypot, not math's: they differ in the last bit now and then.
            error_m=float(np.hypot(est_x - x, est_y - y)),
            brightness=brightness,
            contrast=contrast,
        )

"""The demo world: a MuJoCo pick-and-place fleet with known root causes.

``generate`` writes a dataset (simulation rollouts + real fleet episodes) and, beside it,
the answer key of what was injected; ``simulate_episode`` is the single-episode function
both simulation and "reality" run.
"""

from sim2real.demo.episode import EpisodeResult, InitState, SystemProfile, simulate_episode
from sim2real.demo.generate import GENERATOR_VERSION, DemoPaths, generate

__all__ = [
    "GENERATOR_VERSION",
    "DemoPaths",
    "EpisodeResult",
    "InitState",
    "SystemProfile",
    "generate",
    "simulate_episode",
]

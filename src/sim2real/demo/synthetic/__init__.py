"""Cheap, parametric synthetic fleets: a fast numpy stand-in for the MuJoCo demo world.

``generate_world(standard_world(), out)`` writes ``out/dataset/`` (the dataset format) and
``out/answer_key.json`` beside it, naming the true cause of every real failure. Presets give
worlds with other channel names, rates, tasks and cause mixes, one with no sim-to-real gap,
one whose causes never change, and one with a cause thin on every robot; benchmarks scale
them to hundreds of thousands of episodes, the signals streamed in parts.
"""

from sim2real.demo.synthetic.answer import fastest_growing
from sim2real.demo.synthetic.generate import WorldPaths, generate_world, scaled_counts
from sim2real.demo.synthetic.presets import (
    PRESETS,
    fleetwide_world,
    no_gap_world,
    renamed_world,
    standard_world,
    unchanged_world,
    widened,
)
from sim2real.demo.synthetic.spec import (
    FAILURE_MODES,
    KINDS,
    BackgroundSpec,
    CatalogueItem,
    CauseSpec,
    ChannelSpec,
    CtxCategorical,
    CtxNumeric,
    ParamSpec,
    TaskSpec,
    Taxonomy,
    WorldSpec,
)

__all__ = [
    "FAILURE_MODES",
    "KINDS",
    "PRESETS",
    "BackgroundSpec",
    "CatalogueItem",
    "CauseSpec",
    "ChannelSpec",
    "CtxCategorical",
    "CtxNumeric",
    "ParamSpec",
    "TaskSpec",
    "Taxonomy",
    "WorldPaths",
    "WorldSpec",
    "fastest_growing",
    "fleetwide_world",
    "generate_world",
    "no_gap_world",
    "renamed_world",
    "scaled_counts",
    "standard_world",
    "unchanged_world",
    "widened",
]

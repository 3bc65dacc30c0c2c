"""The world zoo: seeded random fleets that set the traps real fleets set, with answer keys.

``generate_world(seed, out_dir)`` draws a world (channel names, rates, tasks, fleet, layout,
2 to 6 causes from :data:`TRAP_CLASSES`), runs one time-stepped model for sim and real, and
writes ``out_dir/dataset/`` and ``out_dir/answer_key.json`` beside it. The analysis never
reads the key; :func:`sim2real.demo.scoring.score_world` compares a report with it.
"""

from sim2real.demo.zoo.generate import generate_world
from sim2real.demo.zoo.key import CauseKey, WorldKey
from sim2real.demo.zoo.world import TRAP_CLASSES, draw_world

__all__ = ["TRAP_CLASSES", "CauseKey", "WorldKey", "draw_world", "generate_world"]

"""Where the heavy stages run: on this machine (default) or as Ray tasks on a cluster.

Stage code receives an :class:`Executor` and calls :meth:`Executor.map_shared`; it never
imports Ray. ``make_executor("ray", address=...)`` is the only way Ray gets imported.
"""

from sim2real.engine._base import Executor, make_executor, run_shared
from sim2real.engine.local import LocalExecutor
from sim2real.engine.ray import RayExecutor

__all__ = ["Executor", "LocalExecutor", "RayExecutor", "make_executor", "run_shared"]

"""Ray tasks: the same calls as the local engine, spread over a cluster.

Ray is imported only when a :class:`RayExecutor` is created, so the demo and the local
engine never need it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sim2real._optional import require

__all__ = ["RayExecutor"]

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")


class RayExecutor:
    """Runs calls as Ray tasks; the shared object goes to the object store once.

    Args:
        address: cluster to join (``auto``, ``ray://head:10001``); ``None`` joins the
            runtime already started in this process or starts a local one.
        workers: at most this many tasks in flight; default the cluster's CPUs.

    Raises:
        MissingExtraError: Ray is not installed.
    """

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        self._ray: Any = require("ray", "ray")
        if not self._ray.is_initialized():
            self._ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        cpus = int(self._ray.cluster_resources().get("CPU", 1))
        self._workers = workers or max(1, cpus)
        self._remote = self._ray.remote(_call)

    @property
    def workers(self) -> int:
        return self._workers

    @property
    def remote(self) -> bool:
        return True

    def map_shared(self, fn: Callable[[S, T], R], shared: S, items: Sequence[T]) -> list[R]:
        """``[fn(shared, item) for item in items]`` as Ray tasks, in item order."""
        if not items:
            return []
        ref = self._ray.put(shared)
        futures = [self._remote.remote(fn, ref, item) for item in items]
        return list(self._ray.get(futures))


def _call(fn: Callable[[Any, Any], Any], shared: Any, item: Any) -> Any:
    # Ray resolves a top-level ObjectRef argument to its value before the call.
    return fn(shared, item)


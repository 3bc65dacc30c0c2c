"""The executor protocol and the name -> executor map."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from sim2real.errors import UsageError

__all__ = ["ENGINES", "Executor", "make_executor", "run_shared"]

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")

ENGINES = ("local", "ray")


class Executor(Protocol):
    """Runs one function over many items, each call also given one large shared object.

    ``shared`` (a rollout bank, a query set) is shipped to each worker once, not once per
    item; ``fn`` must be a module-level function so that it pickles by reference. Results
    come back in item order, so the outcome never depends on how work was split.
    """

    @property
    def workers(self) -> int:
        """How many calls may run at once."""
        ...

    @property
    def remote(self) -> bool:
        """Whether calls may run on other machines: then reading signal shards where they
        run pays off; on this machine shipping decoded blocks back costs more than it saves."""
        ...

    def map_shared(self, fn: Callable[[S, T], R], shared: S, items: Sequence[T]) -> list[R]:
        """``[fn(shared, item) for item in items]``, computed in parallel."""
        ...


def run_shared(executor: Executor | None, fn: Callable[[S, T], R], shared: S,
               items: Sequence[T]) -> list[R]:
    """``[fn(shared, item) for item in items]``: on ``executor`` where there is one and more
    than one item (a single item is not worth shipping ``shared`` for), else here."""
    if executor is None or len(items) <= 1:
        return [fn(shared, item) for item in items]
    return executor.map_shared(fn, shared, items)


def make_executor(engine: str | Executor = "local", *, address: str | None = None,
                  workers: int | None = None) -> Executor:
    """The executor called ``engine``.

    Args:
        engine: ``local`` (processes on this machine) or ``ray``; an :class:`Executor`
            is returned as it is.
        address: Ray cluster address (``auto``, ``ray://host:10001``); ``ray`` only.
        workers: parallel calls; default: the CPUs of this machine (local) or cluster (ray).

    Raises:
        UsageError: unknown engine, or an address given to the local engine.
        InputError: ``ray`` without Ray installed (the message names the extra).
    """
    if not isinstance(engine, str):
        return engine
    if engine == "local":
        if address is not None:
            raise UsageError("--address is for --engine ray; the local engine needs none")
        from sim2real.engine.local import LocalExecutor

        return LocalExecutor(workers)
    if engine == "ray":
        from sim2real.engine.ray import RayExecutor

        return RayExecutor(address=address, workers=workers)
    raise UsageError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")

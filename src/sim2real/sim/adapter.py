"""The simulator adapter: the small protocol a team implements to let sim2real run its sim.

An adapter turns one :class:`RolloutRequest` (parameter values, a context, an initial
state, a seed and optionally the real command sequence to replay) into one
:class:`RolloutResult` (telemetry as a signals table plus the outcome). Calibration and the
counterfactual check only ever talk to a simulator through it.

Adapters are found by name in the ``sim2real.adapters`` entry-point group (sim2real ships
``demo``), or given as ``module:Class`` (``--adapter my_pkg.sim:MyAdapter``).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping, Sequence
from importlib.metadata import entry_points
from typing import NamedTuple, Protocol, runtime_checkable

import pyarrow as pa

from sim2real.errors import SimulatorError, UsageError

__all__ = [
    "ENTRY_POINT_GROUP",
    "RolloutRequest",
    "RolloutResult",
    "SimulatorAdapter",
    "available_adapters",
    "is_deterministic",
    "load_adapter",
    "parse_options",
]

ENTRY_POINT_GROUP = "sim2real.adapters"
# Shipped adapters, known even where the package metadata is stale (an old editable install).
_BUILTIN = {"demo": "sim2real.sim.demo_adapter:DemoAdapter"}


class RolloutRequest(NamedTuple):
    """One rollout to run.

    Attributes:
        params: simulation parameter values by name (without ``param.``); a parameter the
            request leaves out takes the simulator's nominal value.
        context: the episode's ``ctx.*`` values by name (without ``ctx.``).
        init_state: the initial state, as :meth:`SimulatorAdapter.initial_state` read it.
        seed: seeds every random effect of the rollout (sensor noise...).
        rate_hz: telemetry sample rate wanted.
        commands: for open-loop replay, the real episode's ``t`` and command channels
            (:attr:`SimulatorAdapter.command_channels`); ``None`` runs the policy closed-loop.
    """

    params: Mapping[str, float]
    context: Mapping[str, object]
    init_state: Mapping[str, float]
    seed: int
    rate_hz: float = 50.0
    commands: pa.Table | None = None


class RolloutResult(NamedTuple):
    """What one rollout produced.

    Attributes:
        telemetry: a signals table: ``t`` (seconds from start, increasing) and one float
            column per channel, named as in the dataset.
        outcome: ``success`` or ``failure``.
        failure_time: seconds from start, or ``None``.
    """

    telemetry: pa.Table
    outcome: str
    failure_time: float | None = None


@runtime_checkable
class SimulatorAdapter(Protocol):
    """What sim2real needs from a simulator; see ``sim2real.sim.example_adapter``.

    Attributes:
        name: shown in outputs.
        command_channels: the channels that hold the commands an open-loop replay feeds
            back in; empty when the adapter only runs its policy closed-loop.

    Optional: a class attribute ``deterministic = True`` says a rollout does not depend on
    ``request.seed`` (no sensor noise, no random effects); each episode is then replayed
    once per candidate instead of once per seed. Constructor keyword arguments come from
    ``--adapter-option key=value`` (``adapter_options`` in the Python API).
    """

    name: str
    command_channels: tuple[str, ...]

    def initial_state(self, episode: Mapping[str, object], telemetry: pa.Table) -> dict[str, float]:
        """The initial state of a recorded episode, from its episodes row and its signals."""
        ...

    def rollout(self, request: RolloutRequest) -> RolloutResult:
        """Run one rollout; must be deterministic for a given request."""
        ...


def available_adapters() -> dict[str, str]:
    """Installed adapters: entry-point name -> ``module:Class``."""
    return _BUILTIN | {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def is_deterministic(adapter: SimulatorAdapter) -> bool:
    """Whether the adapter declares that its rollouts ignore the seed."""
    return getattr(adapter, "deterministic", False) is True


def parse_options(items: Sequence[str]) -> dict[str, object]:
    """``key=value`` strings as constructor keyword arguments.

    A value is read as JSON where it parses (``3``, ``0.5``, ``true``, ``[1, 2]``), else
    kept as a string (``model=/path/hopper.xml``).

    Raises:
        UsageError: an item without ``=`` or with an empty or non-identifier key.
    """
    out: dict[str, object] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            msg = f"expected an adapter option as key=value, got {item!r}"
            raise UsageError(msg)
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def load_adapter(spec: str | SimulatorAdapter = "demo",
                 options: Mapping[str, object] | None = None) -> SimulatorAdapter:
    """An adapter instance from an entry-point name or a ``module:Class`` path.

    Args:
        spec: an installed adapter's name (``demo``), ``module:Class``, or an adapter.
        options: keyword arguments for the adapter class' constructor.

    Raises:
        UsageError: no adapter of that name, the class does not implement the protocol,
            or options given with an adapter instance.
        SimulatorError: the adapter's module fails to import or the class to construct
            (an unknown option included).
    """
    if not isinstance(spec, str):
        if options:
            raise UsageError("adapter options need an adapter name, not an instance")
        return _checked(spec, repr(spec))
    target = spec if ":" in spec else available_adapters().get(spec)
    if target is None:
        known = ", ".join(sorted(available_adapters())) or "none installed"
        msg = (f"unknown simulator adapter {spec!r}: give an entry-point name ({known}) "
               "or module:Class")
        raise UsageError(msg)
    module_name, _, attr = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        msg = f"cannot load simulator adapter {target!r}: {err}"
        raise SimulatorError(msg) from err
    try:
        adapter = cls(**dict(options or {}))
    except TypeError as err:
        if not options:
            raise SimulatorError(f"simulator adapter {target!r} failed to start: {err}") from err
        msg = (f"simulator adapter {target!r} does not take the options "
               f"{', '.join(options)}: {err}")
        raise UsageError(msg) from err
    except Exception as err:  # a third-party constructor may raise anything
        msg = f"simulator adapter {target!r} failed to start: {err}"
        raise SimulatorError(msg) from err
    return _checked(adapter, target)


def _checked(adapter: object, where: str) -> SimulatorAdapter:
    if not isinstance(adapter, SimulatorAdapter):
        msg = (f"{where} is not a simulator adapter: it needs name, command_channels, "
               "initial_state() and rollout()")
        raise UsageError(msg)
    return adapter

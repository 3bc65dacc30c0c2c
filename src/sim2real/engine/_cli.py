"""The command-line options that choose the engine, shared by the commands that analyse."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from sim2real.engine._base import ENGINES

__all__ = ["engine_options"]

F = TypeVar("F", bound=Callable[..., object])


def engine_options(command: F) -> F:
    """Add ``--engine`` and ``--address`` (passed as ``engine`` and ``address``)."""
    command = click.option(
        "--address", default=None,
        help="Ray cluster to join (auto, ray://head:10001); default: a local Ray.")(command)
    return click.option(
        "--engine", type=click.Choice(list(ENGINES)), default="local", show_default=True,
        help="Where the heavy stages run: processes here, or Ray tasks "
             "(pip install 'sim2real[ray]').")(command)

"""The ``sim2real`` command line: parse, call the Python API, print, set the exit code.

Exit codes: 0 done; 2 bad input or usage (the message says what and where); 1 anything else.
"""

from __future__ import annotations

import sys

import click

from sim2real._version import __version__
from sim2real.errors import InputError, Sim2RealError


class _Group(click.Group):
    """Turns the library's errors into one line and the exit codes of the spec."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except InputError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(2)
        except Sim2RealError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="sim2real")
def main() -> None:
    """Find out why robots fail on the floor when their policies work in simulation.

    sim2real compares each real failure with its nearest simulation rollouts, computes a
    drift signature (which signals differ, by how much), clusters failures with similar
    signatures, names each cluster's cause family (perception drift, dynamics mismatch,
    task-scope overflow, deployment-system noise), and says which cluster grows fastest,
    which simulation parameters differ for it and what to change.

    \b
    Typical loop:
      sim2real demo                         try it on the built-in MuJoCo fleet
      sim2real analyze DATASET -o OUT       report.json + report.html
      sim2real validate DATASET --baseline w05,w06 --candidate w07 -o OUT
    """


# Commands live with the stage that owns them; this module only gathers them.
from sim2real.ingest._cli import export, ingest, init_mapping  # noqa: E402

main.add_command(ingest)
main.add_command(init_mapping)
main.add_command(export)

from sim2real.serve._cli import serve  # noqa: E402

main.add_command(serve)

from sim2real.demo._cli import demo  # noqa: E402

main.add_command(demo)

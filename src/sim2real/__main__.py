"""``python -m sim2real`` and the ``sim2real`` command.

The command line is imported here, inside the Ctrl-C guard: loading its libraries takes
seconds, and an interrupt then prints one line, not a traceback.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Run the command line; exit code 130 when interrupted."""
    try:
        from sim2real.cli import main as cli

        cli()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)


if __name__ == "__main__":
    main()

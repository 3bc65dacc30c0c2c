"""Write docs/cli.md from the commands' own --help, so the reference cannot drift.

    python tools/cli_reference.py           rewrite docs/cli.md
    python tools/cli_reference.py --check   exit 1 when docs/cli.md differs from --help

tests/test_cli_reference.py runs the check in the test suite.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from click.testing import CliRunner

from sim2real.cli import main

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
WIDTH = 88  # columns the help is wrapped at, whatever the terminal running this

HEADER = """# Command-line reference

Generated from each command's `--help` by `python tools/cli_reference.py` (or
`make docs`); a test fails when this file and `--help` disagree. Every example uses the
folder `sim2real demo` writes (`sim2real-demo/`), so they run as printed after it.
"""


def _paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name in sorted(group.commands):
        command = group.commands[name]
        out.append((*prefix, name))
        if isinstance(command, click.Group):
            out += _paths(command, (*prefix, name))
    return out


def _help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(main, [*path, "--help"], prog_name="sim2real",
                                terminal_width=WIDTH)
    if result.exit_code != 0:
        msg = f"sim2real {' '.join(path)} --help failed: {result.output}"
        raise RuntimeError(msg)
    return result.output.rstrip() + "\n"


def reference() -> str:
    """The whole reference: the top-level help, then each command's, in name order."""
    parts = [HEADER]
    for path in [(), *_paths(main)]:
        title = " ".join(("sim2real", *path))
        parts.append(f"\n## `{title}`\n\n```text\n{_help(path)}```\n")
    return "".join(parts)


if __name__ == "__main__":
    text = reference()
    if "--check" in sys.argv[1:]:
        if not DOC.exists() or DOC.read_text() != text:
            print(f"{DOC} is stale: run `python tools/cli_reference.py`", file=sys.stderr)
            sys.exit(1)
        sys.exit(0)
    DOC.write_text(text)
    print(f"wrote {DOC}")

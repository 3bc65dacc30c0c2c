"""docs/cli.md is the commands' own --help: regenerate it with tools/cli_reference.py."""

from __future__ import annotations

import runpy
from pathlib import Path

TOOL = Path(__file__).parents[1] / "tools" / "cli_reference.py"


def test_cli_reference_matches_help() -> None:
    tool = runpy.run_path(str(TOOL))  # as a module: __main__ does not run
    doc: Path = tool["DOC"]
    assert doc.read_text() == tool["reference"](), (
        "docs/cli.md differs from --help: run `python tools/cli_reference.py` (make docs)"
    )


def test_every_command_has_examples_and_exit_codes() -> None:
    text = (Path(__file__).parents[1] / "docs" / "cli.md").read_text()
    sections = text.split("\n## `")[1:]
    assert len(sections) >= 14
    for section in sections:
        name = section.split("`")[0]
        assert "Exit codes: 0 done; 2 bad input" in section, name
        if name not in ("sim2real", "sim2real ingest"):  # the groups list their commands
            assert "Example" in section, name

"""What ``sim2real demo`` does after generating: analyze the fleet, validate the fix."""

from __future__ import annotations

from sim2real.demo.generate import DemoPaths

__all__ = ["run_demo_analysis"]


def run_demo_analysis(paths: DemoPaths, quiet: bool) -> None:
    """Run ``analyze`` and ``validate`` on the generated demo and print what they found.

    Args:
        paths: the generated demo (dataset and answer key).
        quiet: print only the result paths.

    Raises:
        NotImplementedError: until the analysis stages land (the lead engineer wires them).
    """
    msg = "the demo's analysis step is not implemented yet: use --generate-only"
    raise NotImplementedError(msg)

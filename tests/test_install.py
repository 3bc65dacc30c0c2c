"""`pip install sim2real` alone: the core commands start without any extra, and a command
that needs one says which, in one line, with exit code 2."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# Every package an extra brings, and what the core no longer needs.
_EXTRAS = ["cma", "fastapi", "uvicorn", "starlette", "ray", "mcap", "mcap_ros2", "rosbags",
           "h5py", "PIL", "rerun", "playwright", "statsmodels", "plotly", "duckdb", "pandas"]


# What analyze, validate and demo import on their way (each imports its stage lazily).
_CORE_PATH = ["sim2real", "sim2real.pipeline", "sim2real.api", "sim2real.report.html",
              "sim2real.report.console", "sim2real.validate.compare", "sim2real.demo.run",
              "sim2real.demo.generate", "sim2real.engine"]


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    """``sim2real ARGS`` in a fresh interpreter where no extra can be imported."""
    code = textwrap.dedent(f"""
        import importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {_EXTRAS!r}:
                    raise ImportError(f"No module named {{name!r}} (blocked)")
        sys.meta_path.insert(0, Block())
        import importlib
        for module in {_CORE_PATH!r}:
            importlib.import_module(module)
        from sim2real.cli import main
        main({args!r}, prog_name="sim2real")
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)


def test_core_commands_start_without_extras() -> None:
    for args in (["--help"], ["analyze", "--help"], ["validate", "--help"], ["demo", "--help"]):
        result = _run(args)
        assert result.returncode == 0, (args, result.stderr[-2000:])
    loaded = _run(["--version"])
    assert loaded.returncode == 0 and "sim2real" in loaded.stdout


def test_missing_extra_is_one_line_naming_it(tmp_path: object) -> None:
    result = _run(["serve", str(tmp_path)])
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == ["error: 'uvicorn' is not installed; it comes with the 'serve' extra: "
                     "pip install 'sim2real[serve]'"]

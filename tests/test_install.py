"""`pip install sim2real` alone: the core commands start without any extra, and a command
that needs one says which, in one line, with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

# Every package an extra brings, and what the core no longer needs.
_EXTRAS = ["cma", "fastapi", "uvicorn", "starlette", "ray", "mcap", "mcap_ros2", "rosbags",
           "h5py", "PIL", "rerun", "playwright", "statsmodels", "plotly", "duckdb", "pandas"]
# What analyze, validate and demo import on their way (each imports its stage lazily).
_CORE_PATH = ["sim2real", "sim2real.pipeline", "sim2real.api", "sim2real.report.html",
              "sim2real.report.console", "sim2real.validate.compare", "sim2real.demo.run",
              "sim2real.demo.generate", "sim2real.engine"]


def test_core_runs_without_extras_and_a_missing_extra_names_itself(tmp_path: Path) -> None:
    """One fresh interpreter where no extra can be imported runs every check."""
    runs = [["--version"], ["--help"], ["analyze", "--help"], ["validate", "--help"],
            ["demo", "--help"], ["serve", str(tmp_path)]]
    code = textwrap.dedent(f"""
        import contextlib, importlib, importlib.abc, io, json, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {_EXTRAS!r}:
                    raise ImportError(f"No module named {{name!r}} (blocked)")
        sys.meta_path.insert(0, Block())
        for module in {_CORE_PATH!r}:
            importlib.import_module(module)
        from sim2real.cli import main
        results = []
        for args in {runs!r}:
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                try:
                    main(args, prog_name="sim2real")
                    code = 0
                except SystemExit as exit:
                    code = exit.code or 0
            results.append([code, err.getvalue()])
        print(json.dumps(results))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for args, (code, err) in zip(runs[:-1], results[:-1], strict=True):
        assert code == 0, (args, err)
    code, err = results[-1]
    assert code == 2
    assert err.strip().splitlines() == [
        "error: 'uvicorn' is not installed; it comes with the 'serve' extra: "
        "pip install 'sim2real[serve]'"]

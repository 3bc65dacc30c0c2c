"""Outputs appear whole or not at all: a run killed at any point leaves the old output whole
(or the new one whole), and the next run removes what the killed one left behind."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

import sim2real
from sim2real import _atomic
from sim2real._atomic import atomic_files, check_target
from sim2real.errors import UsageError
from sim2real.pipeline import AnalysisConfig
from sim2real.report.snapshot import check_output

# A file another command put in the run folder: it must survive every swap.
CHECK = "checks/friction/check.json"


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith("."))


@pytest.fixture(scope="module")
def runs(small_fleet: Path, tmp_path_factory: pytest.TempPathFactory
         ) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The old output folder (default settings) and the new one (a 5 s window), whole."""
    root = tmp_path_factory.mktemp("runs")
    old, new = root / "old", root / "new"
    sim2real.analyze(small_fleet, old)
    (old / CHECK).parent.mkdir(parents=True)
    (old / CHECK).write_text('{"cluster_id": "C9", "verdict": "confirmed"}\n')
    shutil.copytree(old, new)
    sim2real.analyze(small_fleet, new, config=AnalysisConfig(window_s=5.0))
    old_files, new_files = _contents(old), _contents(new)
    assert old_files.keys() == new_files.keys()
    assert all(old_files[f] != new_files[f] for f in ("report.json", "signatures.parquet"))
    return old_files, new_files


# Where the run is killed: in which function (module, class or None, name), before its
# call or right after it.
KILL_POINTS = {
    "analysing": ("sim2real.api", None, "build_report", False),
    "writing the staging folder": ("sim2real.report.snapshot", "Report", "to_html", False),
    "staged, before the swap": ("sim2real._atomic", None, "_swap", False),
    "right after the swap": ("sim2real._atomic", None, "_swap", True),
}

# What the killed process runs: the analysis with one function wrapped so that it says it
# got there (a file beside the output) and waits to be killed.
_CHILD = """
import importlib, os, time
import sim2real
from sim2real.pipeline import AnalysisConfig
from sim2real.report.snapshot import check_output
module, cls, name, after, dataset, out, flag = ARGS
holder = importlib.import_module(module)
holder = getattr(holder, cls) if cls else holder
original = getattr(holder, name)
def paused(*args, **kwargs):
    result = original(*args, **kwargs) if after else None
    open(flag, "w").close()
    time.sleep(60)
    return result
setattr(holder, name, paused)
sim2real.analyze(dataset, out, config=AnalysisConfig(window_s=5.0))
os._exit(3)
"""


@pytest.fixture(scope="module")
def forkserver() -> mp.context.BaseContext:
    """Processes forked from a server that imported sim2real once and never ran anything:
    each killed run starts in milliseconds, and forks before any OpenMP thread exists."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["sim2real.api", "sim2real.pipeline"])
    return ctx


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_killed_run_leaves_a_whole_output_and_the_next_run_cleans_up(
        small_fleet: Path, tmp_path: Path, runs: tuple[dict[str, bytes], dict[str, bytes]],
        forkserver: mp.context.BaseContext, point: str) -> None:
    old, new = runs
    out = tmp_path / "out"
    for name, data in old.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    flag = tmp_path / "reached"
    module, cls, name, after = KILL_POINTS[point]
    args = (module, cls, name, after, str(small_fleet), str(out), str(flag))
    child = forkserver.Process(target=exec, args=(_CHILD, {"ARGS": args}))
    child.start()
    try:
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert child.is_alive(), f"the run ended before {point}"
            assert time.monotonic() < deadline, f"the run never reached {point}"
            time.sleep(0.02)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join()
    found = _contents(out)
    assert found in (old, new), f"killed {point}: a mix of old and new files"
    assert found == (new if after else old)
    check_output(out)  # what the next run does first
    assert _leftovers(out) == [] and _contents(out) == found
    if after:
        sim2real.analyze(small_fleet, out, config=AnalysisConfig(window_s=5.0))
        assert _contents(out) == new and _leftovers(out) == []


def test_two_rename_fallback_puts_a_half_swapped_target_back(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    target = tmp_path / "out"
    with atomic_files(target) as stage:
        (stage / "a.json").write_text("old")
        (stage / "b.json").write_text("old")
    monkeypatch.setattr(_atomic, "_exchange", lambda a, b: False)
    with atomic_files(target) as stage:
        (stage / "a.json").write_text("new")
        (stage / "b.json").write_text("new")
    assert (target / "a.json").read_text() == "new" and _leftovers(target) == []
    # a kill between the two renames: the target under its hidden name, nothing in place
    target.rename(tmp_path / ".out.0123456789ab.old")
    check_target(target, frozenset({"a.json", "b.json"}))
    assert (target / "b.json").read_text() == "new" and _leftovers(target) == []


def test_a_failed_write_keeps_the_old_files_and_a_live_staging_folder_is_left_alone(
        tmp_path: Path) -> None:
    target = tmp_path / "out"
    with atomic_files(target) as stage:
        (stage / "a.json").write_text("old")
    with pytest.raises(KeyboardInterrupt), atomic_files(target) as stage:
        (stage / "a.json").write_text("new")
        # another run's staging folder, alive: never removed under it
        with atomic_files(target) as other:
            assert other.exists() and stage.exists()
        raise KeyboardInterrupt
    assert (target / "a.json").read_text() == "old" and _leftovers(target) == []


@pytest.mark.parametrize(("where", "message"), [
    ("file", "is a file"),
    ("file/out", "is under the file"),
    ("foreign", r"holds files sim2real did not write \(notes.txt\)"),
])
def test_output_folder_checked_before_any_work(tmp_path: Path, where: str,
                                               message: str) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match=message):
        check_target(tmp_path / where, frozenset({"report.json"}))


def test_a_linked_target_keeps_its_link(tmp_path: Path) -> None:
    with atomic_files(tmp_path / "w09") as stage:
        (stage / "a.json").write_text("old")
    (tmp_path / "latest").symlink_to(tmp_path / "w09", target_is_directory=True)
    check_target(tmp_path / "latest", frozenset({"a.json", "b.json"}))
    with atomic_files(tmp_path / "latest") as stage:
        (stage / "a.json").write_text("new")
        (stage / "b.json").write_text("new")
    assert (tmp_path / "latest").is_symlink()
    assert (tmp_path / "w09" / "b.json").read_text() == "new" and _leftovers(tmp_path / "w09") \
        == []


def test_ctrl_c_while_the_libraries_load_prints_one_line(tmp_path: Path) -> None:
    """The real signal, while the command line's libraries load (seconds): one line."""
    import subprocess
    import sys

    # The child says "ready" as the guarded import of the CLI begins and stays in it until
    # the signal comes (a warm import could otherwise finish first and fail on the folder).
    # It first takes Ctrl-C as a shell's command does (neither ignored nor blocked): both
    # are inherited, and a test runner's worker may hold either.
    start = f"""
import importlib.abc, signal, sys, time
signal.pthread_sigmask(signal.SIG_UNBLOCK, {{signal.SIGINT}})
signal.signal(signal.SIGINT, signal.default_int_handler)
from sim2real.__main__ import main
class Ready(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "sim2real.cli":
            print("ready", flush=True)
            time.sleep(60)
        return None
sys.meta_path.insert(0, Ready())
sys.argv = ["sim2real", "analyze", {str(tmp_path)!r}]
main()
"""
    child = subprocess.Popen([sys.executable, "-c", start], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 130 and err == "interrupted\n", err

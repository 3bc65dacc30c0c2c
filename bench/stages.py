"""One measured job per process, so each peak-memory figure is that job's alone.

``python -m bench.stages read|stream|analyze|validate|matching|clustering ...`` prints one
JSON object.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["PeakMemory"]


class PeakMemory:
    """Peak memory of this process and its forked workers.

    Two measures, the larger wins: this process's peak RSS (the kernel's high-water mark,
    exact, reset per stage through ``/proc/self/clear_refs``) and the proportional set size
    of the whole process tree sampled every 200 ms (PSS, not RSS, so that pages forked
    workers share with their parent count once). Sampling PSS costs the kernel a walk of
    every mapping; at 50 ms it took ~15 % of both cores and slowed what it measured.
    """

    def __init__(self) -> None:
        self.peak = 0
        self.overall = 0
        self.anon = 0  # the largest anonymous share seen (what page cache cannot hold)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.overall = max(self.overall, self.current_peak())

    def reset(self) -> None:
        """Start a new stage's peak (the overall peak keeps counting)."""
        self.overall = max(self.overall, self.current_peak())
        with contextlib.suppress(OSError):
            Path("/proc/self/clear_refs").write_text("5")
        self.peak = _pss_tree()

    def current_peak(self) -> int:
        """The peak since the last :meth:`reset`."""
        self.peak = max(self.peak, _own_peak_rss())
        return self.peak

    def _run(self) -> None:
        while not self._stop.is_set():
            now, anon = _pss_tree(with_anon=True)
            self.peak, self.overall = max(self.peak, now), max(self.overall, now)
            self.anon = max(self.anon, anon)
            self._stop.wait(0.2)


def _own_peak_rss() -> int:
    """This process's peak resident set size (``VmHWM``), bytes; 0 where unknown."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _pss_tree(with_anon: bool = False) -> Any:
    """PSS of this process and its children, bytes; with ``with_anon``, also their
    anonymous PSS (``Pss_Anon``: heap and private arrays, not file-backed pages such as a
    memory-mapped grid, which the kernel can write out and drop)."""
    import psutil

    me = psutil.Process()
    total = anon = 0
    for proc in [me, *me.children(recursive=True)]:
        with contextlib.suppress(OSError, psutil.Error):
            for line in Path(f"/proc/{proc.pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                elif line.startswith("Pss_Anon:"):
                    anon += int(line.split()[1]) * 1024
    return (total, anon) if with_anon else total


def read(dataset: Path) -> dict[str, Any]:
    """One full pyarrow read of ``signals`` into a table: the yardstick of the end-to-end
    ratio (as the issue words it)."""
    import pyarrow.parquet as pq

    with PeakMemory() as mem:
        start = time.perf_counter()
        table = pq.read_table(dataset / "signals")
        seconds = time.perf_counter() - start
        peak = mem.current_peak()
    return {"read_s": seconds, "rows": table.num_rows, "decoded_bytes": table.nbytes,
            "peak_bytes": peak}


def stream(dataset: Path) -> dict[str, Any]:
    """One full pyarrow read of ``signals``, batch by batch, nothing kept: the fastest way
    to decode every value once, and the one that fits in memory at any size."""
    import pyarrow.dataset as pads

    with PeakMemory() as mem:
        start = time.perf_counter()
        rows = decoded = 0
        for batch in pads.dataset(dataset / "signals", format="parquet").to_batches():
            rows += batch.num_rows
            decoded += batch.nbytes
        seconds = time.perf_counter() - start
        peak = mem.current_peak()
    return {"read_s": seconds, "rows": rows, "decoded_bytes": decoded, "peak_bytes": peak}


def analyze(dataset: Path, engine: str, with_report: bool = True) -> dict[str, Any]:
    """What :func:`sim2real.analyze` does, stage by stage, with time and peak memory each.

    ``with_report=False`` stops after the diagnosis (match, score, cluster), leaving out
    the report's parameter attribution and rendering.
    """
    from sim2real._progress import Stages
    from sim2real._scratch import scratch_folder
    from sim2real.dataset import load_dataset
    from sim2real.engine import make_executor
    from sim2real.pipeline import AnalysisConfig, diagnose
    from sim2real.report.build import build_report

    stages: dict[str, dict[str, float]] = {}

    with PeakMemory() as mem:

        @contextlib.contextmanager
        def timed(name: str) -> Iterator[None]:
            mem.reset()
            start = time.perf_counter()
            yield
            stages[name] = {"s": time.perf_counter() - start, "peak_bytes": mem.current_peak()}
            print(f"{name}: {stages[name]['s']:.1f} s", file=sys.stderr, flush=True)

        class Timed(Stages):
            @contextlib.contextmanager
            def stage(self, name: str, total: int) -> Iterator[None]:
                with timed(name):
                    yield

        start = time.perf_counter()
        executor = make_executor(engine)
        with timed("load + validate"):
            ds = load_dataset(dataset)
        digest = ""
        with scratch_folder(beside=dataset) as scratch:
            diagnosis = diagnose(ds, AnalysisConfig(), stages=Timed(enabled=False),
                                 executor=executor, scratch=scratch)
            if with_report:
                with timed("report (build + save)"):
                    report = build_report(diagnosis, None, executor)
                    with tempfile.TemporaryDirectory() as out:
                        report.save(out)
                digest = _digest(report.to_json(), dataset)
        total = time.perf_counter() - start
    accounted = sum(s["s"] for s in stages.values())
    stages["between stages (matcher fit, signatures)"] = {
        "s": total - accounted, "peak_bytes": float("nan")}
    return {"total_s": total, "peak_bytes": mem.overall, "anon_bytes": mem.anon,
            "stages": stages, "failures": int(diagnosis.events.num_rows),
            "sim": int(diagnosis.matcher.bank_.grid.values.shape[0]), "report": with_report,
            "digest": digest}


def validate(dataset: Path, engine: str = "local") -> dict[str, Any]:
    """``sim2real validate`` end to end (load, the baseline's diagnosis, the candidate's
    failures, the verdicts, the files) on ``engine``: the last deployment against the ones
    before."""
    from sim2real.dataset import load_dataset
    from sim2real.validate.compare import validate as run_validate

    with PeakMemory() as mem:
        start = time.perf_counter()
        ds = load_dataset(dataset)
        deployments = list(ds.deployments)
        with tempfile.TemporaryDirectory() as out:
            result = run_validate(ds, deployments[:-1], deployments[-1:], out=out,
                                  engine=engine)
        seconds = time.perf_counter() - start
    return {"total_s": seconds, "peak_bytes": mem.overall, "anon_bytes": mem.anon,
            "digest": _digest(result.to_json(), dataset)}


def _digest(text: str, dataset: Path) -> str:
    """SHA-256 of a result's JSON, the dataset's own folder name left out (layouts differ
    in where they lie, not in what they hold)."""
    import hashlib

    from sim2real.dataset import Location

    return hashlib.sha256(text.replace(Location.parse(dataset).canonical(), "<dataset>")
                          .encode()).hexdigest()[:12]


if __name__ == "__main__":
    job = sys.argv[1]
    if job == "read":
        result = read(Path(sys.argv[2]))
    elif job == "stream":
        result = stream(Path(sys.argv[2]))
    elif job == "validate":
        result = validate(Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "local")
    elif job == "analyze":
        result = analyze(Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "local",
                         with_report="--no-report" not in sys.argv)
    elif job == "matching":
        from bench.matching import matching

        result = matching(Path(sys.argv[2]))
    elif job == "clustering":
        from bench.clustering import clustering

        result = clustering([int(n) for n in sys.argv[2].split(",")])
    else:
        raise SystemExit(f"unknown job {job!r}")
    print(json.dumps(result, default=lambda o: float(o) if isinstance(o, np.floating) else str(o)))

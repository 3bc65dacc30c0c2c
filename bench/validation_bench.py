"""What validating a dataset costs, against one full read of its signals in the same process.

``python -m bench.validation_bench [SIZE]`` (default ``s``; the fleet of ``bench.fleet``,
generated once). Measures CPU seconds (this process and Arrow's threads), best of 5
alternating repetitions after a warm-up read, so that a busy shared machine disturbs the
figures less than wall time:

- ``load_dataset`` (every rule of the format: footers, ``episode_id``/``t`` pages, value
  ranges from the row-group statistics, the failures' samples);
- one full read of every signals part (``pyarrow.parquet.ParquetFile.read``), without and
  with page-checksum verification (what every read of the analysis now does).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

from bench.fleet import generate_fleet
from sim2real.dataset import load_dataset


def _cpu(job: Callable[[], object]) -> float:
    start = time.process_time()
    job()
    return time.process_time() - start


def _read_all(parts: list[Path], verify: bool) -> None:
    for part in parts:
        pq.ParquetFile(part, page_checksum_verification=verify,
                       read_dictionary=["episode_id"]).read()


def main(size: str = "s") -> None:
    dataset = generate_fleet(size)
    parts = sorted((dataset / "signals").glob("*.parquet"))
    jobs: dict[str, Callable[[], object]] = {
        "full read": lambda: _read_all(parts, verify=False),
        "full read, page checksums verified": lambda: _read_all(parts, verify=True),
        "load_dataset (validation)": lambda: load_dataset(dataset),
    }
    for job in jobs.values():
        job()  # warm: page cache, imports, compiled kernels
    times: dict[str, list[float]] = {name: [] for name in jobs}
    for _ in range(5):
        for name, job in jobs.items():
            times[name].append(_cpu(job))
    best = {name: min(seconds) for name, seconds in times.items()}
    base = best["full read"]
    print(f"| `{size}` | CPU s (best of 5) | / full read |")
    print("|---|---|---|")
    for name, seconds in best.items():
        print(f"| {name} | {seconds:.3f} | {seconds / base:.2f} |")


if __name__ == "__main__":
    main(*sys.argv[1:])

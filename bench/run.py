"""``make bench``: generate the fleets, measure every stage, print the tables of README.md.

Usage: ``python -m bench.run [--sizes s,m] [--engine local] [--no-matching]
[--no-clustering] [--no-report] [--out bench/results/RESULTS.md]``. Each measurement
runs in its own process (``bench.stages``) so that peak memory is that job's alone.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from bench.fleet import (
    SIZES,
    decoded_estimate,
    disk_bytes,
    disk_estimate,
    generate_fleet,
    signal_rows,
)

GIB = 1024**3


def _job(*args: str) -> dict[str, Any]:
    """Run ``python -m bench.stages ARGS`` and return its JSON line."""
    done = subprocess.run([sys.executable, "-m", "bench.stages", *args], check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def measure_size(name: str, engine: str, with_report: bool) -> list[str]:
    """Generate (once) and measure fleet ``name``; the Markdown lines of its table."""
    size = SIZES[name]
    start = time.perf_counter()
    dataset = generate_fleet(name)
    gen_s = time.perf_counter() - start
    _job("stream", str(dataset))  # warm-up: every job below reads from the page cache
    stream = _job("stream", str(dataset))
    # read_table holds the whole decoded table: skipped where it would not fit in memory.
    fits = decoded_estimate(dataset) < 0.5 * psutil.virtual_memory().total
    read = _job("read", str(dataset)) if fits else None
    run = _job("analyze", str(dataset), engine, *([] if with_report else ["--no-report"]))
    lines = [
        f"### `{name}`: {size.n_real:,} real episodes, {size.n_sim:,} sim rollouts, "
        f"{size.n_samples} samples x {size.n_channels} channels",
        "",
        f"{run['failures']:,} failures; {signal_rows(dataset):,} signal rows, "
        f"{disk_bytes(dataset) / GIB:.2f} GiB on disk (generating it checks for "
        f"{disk_estimate(size) / GIB:.1f} GiB free), "
        f"{stream['decoded_bytes'] / GIB:.2f} GiB decoded; generated in {gen_s:.0f} s "
        "(0 s = already there). Engine: " + engine + ".",
        "",
        "| stage | time (s) | peak memory (GiB) |",
        "|---|---|---|",
    ]
    for stage, figures in run["stages"].items():
        peak = figures["peak_bytes"]
        peak_txt = "-" if peak != peak else f"{peak / GIB:.2f}"
        lines.append(f"| {stage} | {figures['s']:.1f} | {peak_txt} |")
    lines.append(f"| **analyze, end to end** | **{run['total_s']:.1f}** | "
                 f"**{run['peak_bytes'] / GIB:.2f}** |")
    if read is not None:
        lines.append(f"| one full `pyarrow.parquet.read_table(signals)` | {read['read_s']:.1f} "
                     f"| {read['peak_bytes'] / GIB:.2f} |")
    lines += [
        f"| one full streamed read (`pyarrow.dataset(signals).to_batches()`) | "
        f"{stream['read_s']:.1f} | {stream['peak_bytes'] / GIB:.2f} |",
        "",
    ]
    ratios = []
    if read is not None:
        ratios.append(f"analyze / read_table **{run['total_s'] / read['read_s']:.1f}**")
    else:
        ratios.append("read_table not run (the decoded table would not fit in memory)")
    ratios.append(f"analyze / streamed read **{run['total_s'] / stream['read_s']:.1f}**")
    return [*lines, "End to end ratio (target <= 3): " + "; ".join(ratios) + ".", ""]


def measure_matching(name: str) -> list[str]:
    """Recall and speed of the matching fast path on fleet ``name``'s rollouts."""
    m = _job("matching", str(generate_fleet(name)))
    return [
        f"### Matching (fleet `{name}`)",
        "",
        f"Bank: {m['bank']:,} sim rollouts x 32 points x {m['channels']} channels; "
        f"{m['queries']} real failures as queries; numba: {m['numba']}.",
        "",
        "| brute-force DTW (s) | prefilter + DTW (s) | speed-up | recall@10 |",
        "|---|---|---|---|",
        f"| {m['brute_s']:.1f} | {m['fast_s']:.2f} (+{m['index_build_s']:.2f} index build) | "
        f"{m['speedup']:.0f}x | {m['recall_at_10']:.3f} |",
        "",
    ]


def measure_clustering(sizes: str) -> list[str]:
    """The sampled clustering path against scikit-learn's HDBSCAN."""
    c = _job("clustering", sizes)
    lines = ["### Clustering (16-dim signature-like points, bench/clustering.py)", "",
             "| points | sklearn HDBSCAN (s) | sim2real (s) | speed-up | ARI vs sklearn |",
             "|---|---|---|---|---|"]
    for n, row in c.items():
        sk = f"{row['sklearn_s']:.1f}" if "sklearn_s" in row else "not run"
        sp = f"{row['speedup']:.0f}x" if "speedup" in row else "-"
        ari = f"{row['ari']:.3f}" if "ari" in row else "-"
        lines.append(f"| {int(n):,} | {sk} | {row['ours_s']:.1f} | {sp} | {ari} |")
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="s,m")
    parser.add_argument("--engine", default="local")
    parser.add_argument("--no-matching", action="store_true")
    parser.add_argument("--no-clustering", action="store_true")
    parser.add_argument("--clustering-sizes", default="100000,1000000")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--no-report", action="store_true",
                        help="stop analyze after the diagnosis (leave out the report's "
                             "parameter attribution and rendering)")
    args = parser.parse_args()
    stamp = time.strftime("%Y-%m-%d %H:%M")
    lines = [f"## Fleet scale, {stamp}, Python {platform.python_version()}, "
             f"{platform.machine()}", "", f"`{' '.join(sys.argv)}`", ""]
    for name in args.sizes.split(","):
        block = measure_size(name, args.engine, not args.no_report)
        lines += block
        print("\n".join(block), flush=True)
    if not args.no_matching:
        lines += measure_matching(args.sizes.split(",")[0])
    if not args.no_clustering:
        lines += measure_clustering(args.clustering_sizes)
    text = "\n".join(lines)
    print(text)
    out = args.out or Path(__file__).parent / "results" / f"scale-{time.strftime('%Y%m%d-%H%M')}.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text + "\n")


if __name__ == "__main__":
    main()

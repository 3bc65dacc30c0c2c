"""``make bench``: generate the fleets, measure every stage, print the tables of README.md.

Usage: ``python -m bench.run [--sizes s,m | --size l] [--layouts sorted|all|time,...]
[--engine local|ray] [--no-validate] [--no-matching] [--no-clustering] [--no-report]
[--out bench/results/RESULTS.md]``. Each measurement
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
from bench.layouts import LAYOUTS, write_layout

GIB = 1024**3


def _job(*args: str) -> dict[str, Any]:
    """Run ``python -m bench.stages ARGS`` and return its JSON line."""
    done = subprocess.run([sys.executable, "-m", "bench.stages", *args], check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def measure_size(name: str, engine: str, with_report: bool, layouts: list[str],
                 with_validate: bool = True) -> list[str]:
    """Generate (once) and measure fleet ``name`` in each of ``layouts``; the Markdown lines
    of its tables."""
    size = SIZES[name]
    start = time.perf_counter()
    dataset = generate_fleet(name)
    gen_s = time.perf_counter() - start
    runs: dict[str, dict[str, Any]] = {}
    for layout in layouts:
        start = time.perf_counter()
        folder = write_layout(dataset, layout)
        print(f"{name}/{layout}: written in {time.perf_counter() - start:.0f} s",
              file=sys.stderr, flush=True)
        _job("stream", str(folder))  # warm-up: every job below reads from the page cache
        run = {"stream": _job("stream", str(folder))}
        # read_table holds the whole decoded table: skipped where it would not fit.
        if decoded_estimate(folder) < 0.5 * psutil.virtual_memory().total:
            run["read"] = _job("read", str(folder))
        run["analyze"] = _job("analyze", str(folder), engine,
                              *([] if with_report else ["--no-report"]))
        if with_validate:
            run["validate"] = _job("validate", str(folder), engine)
        runs[layout] = run
        print(f"{name}/{layout}: {json.dumps(run)}", file=sys.stderr, flush=True)
    first = runs[layouts[0]]
    lines = [
        f"### `{name}`: {size.n_real:,} real episodes, {size.n_sim:,} sim rollouts, "
        f"{size.n_samples} samples x {size.n_channels} channels",
        "",
        f"{first['analyze']['failures']:,} failures; {signal_rows(dataset):,} signal rows, "
        f"{disk_bytes(dataset) / GIB:.2f} GiB on disk (generating it checks for "
        f"{disk_estimate(size) / GIB:.1f} GiB free), "
        f"{first['stream']['decoded_bytes'] / GIB:.2f} GiB decoded; generated in {gen_s:.0f} s "
        "(0 s = already there). Engine: " + engine + ". Layouts: `bench/layouts.py`.",
        "",
        "| layout | full read (s) | analyze (s) | **analyze / read** | validate (s) | "
        "**validate / read** | peak GiB (anonymous) | report | validation |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for layout, run in runs.items():
        # The yardstick: read_table where it fits in memory, else the streamed read.
        read = run.get("read", {}).get("read_s") or run["stream"]["read_s"]
        what = "" if "read" in run else " (streamed)"
        a, v = run["analyze"], run.get("validate")
        v_cells = (f"{v['total_s']:.1f} | **{v['total_s'] / read:.1f}**" if v else "- | -")
        lines.append(
            f"| {layout} | {read:.1f}{what} | {a['total_s']:.1f} | **{a['total_s'] / read:.1f}**"
            f" | {v_cells} | {a['peak_bytes'] / GIB:.2f} ({a['anon_bytes'] / GIB:.2f}) | "
            f"`{a['digest']}` | `{v['digest'] if v else '-'}` |")
    lines += ["", "| stage (s / peak GiB) | " + " | ".join(runs) + " |",
              "|---|" + "---|" * len(runs)]
    stages = list(dict.fromkeys(st for run in runs.values() for st in run["analyze"]["stages"]))
    for stage in stages:
        cells = []
        for run in runs.values():
            figures = run["analyze"]["stages"].get(stage)
            if figures is None:
                cells.append("-")
                continue
            peak = figures["peak_bytes"]
            cells.append(f"{figures['s']:.1f}" + ("" if peak != peak else f" / {peak / GIB:.2f}"))
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    lines.append("| one streamed read (`pyarrow.dataset(signals).to_batches()`) | "
                 + " | ".join(f"{r['stream']['read_s']:.1f}" for r in runs.values()) + " |")
    return [*lines, ""]


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
    parser.add_argument("--size", default=None, help="one size (same as --sizes NAME)")
    parser.add_argument("--engine", default="local")
    parser.add_argument("--no-matching", action="store_true")
    parser.add_argument("--no-clustering", action="store_true")
    parser.add_argument("--clustering-sizes", default="100000,1000000")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--layouts", default="sorted",
                        help="comma-separated, of " + ", ".join(LAYOUTS) + "; or all")
    parser.add_argument("--no-validate", action="store_true",
                        help="leave out the sim2real validate run of each layout")
    parser.add_argument("--no-report", action="store_true",
                        help="stop analyze after the diagnosis (leave out the report's "
                             "parameter attribution and rendering)")
    args = parser.parse_args()
    stamp = time.strftime("%Y-%m-%d %H:%M")
    lines = [f"## Fleet scale, {stamp}, Python {platform.python_version()}, "
             f"{platform.machine()}", "", f"`{' '.join(sys.argv)}`", ""]
    layouts = list(LAYOUTS) if args.layouts == "all" else args.layouts.split(",")
    unknown = sorted(set(layouts) - set(LAYOUTS))
    if unknown:
        parser.error(f"unknown layout(s) {', '.join(unknown)}; known: {', '.join(LAYOUTS)}")
    for name in (args.size or args.sizes).split(","):
        block = measure_size(name, args.engine, not args.no_report, layouts,
                             not args.no_validate)
        lines += block
        print("\n".join(block), flush=True)
    if not args.no_matching:
        lines += measure_matching((args.size or args.sizes).split(",")[0])
    if not args.no_clustering:
        lines += measure_clustering(args.clustering_sizes)
    text = "\n".join(lines)
    print(text)
    out = args.out or Path(__file__).parent / "results" / f"scale-{time.strftime('%Y%m%d-%H%M')}.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text + "\n")


if __name__ == "__main__":
    main()

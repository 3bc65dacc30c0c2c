"""The analysis' matching prefilter against its exact scan, on a bench fleet's real failures.

``python -m bench.prefilter [--size s] [--queries 1500]``. Diagnoses the fleet (local
engine), then matches a spread of its real failures twice with the fitted matcher: through
the descriptor prefilter (:class:`sim2real.match.index.DescriptorIndex`, what ``analyze``
runs on tasks with many rollouts) and by the exact scan of every rollout of the task.
Prints the recall of the exact nearest rollouts and both times (measured in the same
process, one after the other).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np

__all__ = ["prefilter_recall"]


def prefilter_recall(size: str = "s", n_queries: int = 1500) -> dict[str, float]:
    """Recall@1 and @5 of the prefilter against the exact scan, and the two times (s)."""
    from bench.fleet import generate_fleet
    from sim2real.drift.compute import QuerySet, compare
    from sim2real.engine import make_executor
    from sim2real.match.context import context_table
    from sim2real.pipeline import AnalysisConfig, diagnose

    config = AnalysisConfig()
    executor = make_executor("local")
    diagnosis = diagnose(generate_fleet(size), config, executor=executor)
    events, yardstick = diagnosis.events, diagnosis.yardstick
    picked = np.unique(np.linspace(0, events.num_rows - 1, n_queries).astype(np.int64))
    chosen = events.take(picked)
    queries = QuerySet(diagnosis.real_grid, picked,
                       chosen["task"].to_numpy(zero_copy_only=False),
                       diagnosis.ends[picked], config.window_s, context_table(chosen))
    channels = len(yardstick.channels)
    sim, ref = list(range(yardstick.sim_channels)), list(range(yardstick.sim_channels, channels))
    matcher = yardstick.matcher
    start = time.perf_counter()
    _, fast = compare(queries, sim, ref, matcher, yardstick.reference, config.n_segments,
                      executor)
    fast_s = time.perf_counter() - start
    index, matcher.index_ = matcher.index_, None
    start = time.perf_counter()
    _, exact = compare(queries, sim, ref, matcher, yardstick.reference, config.n_segments,
                       executor)
    exact_s = time.perf_counter() - start
    matcher.index_ = index
    return {
        "queries": float(len(picked)),
        "recall@1": float(np.mean([a[:1] == b[:1] for a, b in zip(fast, exact, strict=True)])),
        "recall@5": float(np.mean([len(set(a) & set(b)) / max(1, len(b))
                                   for a, b in zip(fast, exact, strict=True)])),
        "prefilter_s": fast_s,
        "exact_s": exact_s,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.prefilter", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="s", help="bench fleet (xs, s, m, l)")
    parser.add_argument("--queries", type=int, default=1500, help="real failures matched")
    args = parser.parse_args(argv)
    r = prefilter_recall(args.size, args.queries)
    print(f"{int(r['queries'])} real failures of fleet {args.size}: recall@1 "
          f"{r['recall@1']:.3f}, recall@5 {r['recall@5']:.3f}; prefilter {r['prefilter_s']:.1f} s, "
          f"exact scan {r['exact_s']:.1f} s ({r['exact_s'] / r['prefilter_s']:.0f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The world zoo: how right is the diagnosis on many random worlds, per trap class?

``python -m bench.zoo --seeds 0-39 --seeds 1000-1039 --workers 16 [--size 1.0] [--json out.json]
[--readme]`` generates each world (:mod:`sim2real.demo.zoo`), analyses it on one core (and
validates the fix its key names), scores it (:func:`sim2real.demo.scoring.generate_and_score`)
and prints, per seed range, the means and the hit rates per trap class. ``--readme`` writes
the tables into ``bench/README.md`` between the zoo markers, with the command.

Seeds 0-39 are the ones rules may be tuned on; 1000-1039 are held back: nobody looks at
them while tuning, and a gap between the two tables means a rule is overfitted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import traceback
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from sim2real.demo.scoring import WorldScore, generate_and_score
from sim2real.demo.zoo import TRAP_CLASSES

README = Path(__file__).with_name("README.md")
BEGIN, END = "<!-- zoo:begin -->", "<!-- zoo:end -->"
_HELD_BACK = 1000  # seeds from here on are never looked at while tuning


def seed_range(text: str) -> list[int]:
    """``"0-39"`` or ``"3,5,8"`` or ``"0-3,1000-1003"`` as a list of seeds."""
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        seeds += list(range(int(low), int(high or low) + 1))
    return seeds


def _limit_threads() -> None:
    """One core per world: the pool is the parallelism."""
    import pyarrow as pa
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    pa.set_cpu_count(1)


def _one(seed: int, size: float) -> WorldScore | str:
    try:
        return generate_and_score(seed, size=size)
    except Exception:  # a crash on a world is a finding: report it, keep the others
        return f"seed {seed}: " + traceback.format_exc(limit=3)


def run(seeds: Sequence[int], workers: int, size: float) -> dict[int, WorldScore | str]:
    """Score every seed's world, ``workers`` at a time (one pool for all, so that one
    range's slowest worlds do not hold the next range up): seed -> score or crash."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    out: dict[int, WorldScore | str] = {}
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn"),
                             initializer=_limit_threads) as pool:
        futures = {pool.submit(_one, seed, size): seed for seed in seeds}
        for future in as_completed(futures):
            seed, result = futures[future], future.result()
            out[seed] = result
            print(result if isinstance(result, str) else f"seed {seed}: {_line(result)}",
                  file=sys.stderr, flush=True)
    return out


def _line(s: WorldScore) -> str:
    if s.no_gap:
        return f"no gap, {'silent' if s.silent else 'NOT silent'} ({s.seconds:.0f} s)"
    right = sum(c.taxonomy_right for c in s.causes)
    return (f"ARI {s.ari:.2f} (yardstick {s.yardstick_ari:.2f}), taxonomy "
            f"{right}/{len(s.causes)}, traps {', '.join(s.traps)} "
            f"({s.seconds:.0f} s)")


def _rate(values: Iterable[bool | None]) -> tuple[int, int]:
    known = [v for v in values if v is not None]
    return sum(known), len(known)


def _pct(hits: tuple[int, int]) -> str:
    return "–" if hits[1] == 0 else f"{100 * hits[0] / hits[1]:.0f} % ({hits[0]}/{hits[1]})"


def table(scores: Sequence[WorldScore], errors: int, title: str) -> str:
    """Markdown: the means, then one row per trap class."""
    gap = [s for s in scores if not s.no_gap]
    causes = [c for s in scores for c in s.causes]
    ari = [s.ari for s in gap if s.ari is not None]
    yard = [s.yardstick_ari for s in gap if s.yardstick_ari is not None]
    errs = [abs(c.reduction_error) for c in causes if c.reduction_error is not None]
    lines = [
        f"**{title}**: {len(scores)} worlds ({len(gap)} with a gap, {errors} crashed), "
        f"{len(causes)} causes scored, {np.mean([s.seconds for s in scores]):.0f} s per world "
        "on one core.", "",
        "| measure | value |", "|---|---|",
        f"| mean ARI (worlds with a gap) | {np.mean(ari):.2f} (min {np.min(ari):.2f}) |"
        if ari else "| mean ARI | – |",
        f"| yardstick: KMeans on per-failure summaries, true k | {np.mean(yard):.2f} |"
        if yard else "| yardstick | – |",
        f"| taxonomy | {_pct(_rate(c.taxonomy_right for c in causes))} |",
        f"| top-1 parameter | {_pct(_rate(c.param_right for c in causes))} |",
        f"| outside_range | {_pct(_rate(c.outside_range_right for c in causes))} |",
        f"| first action | {_pct(_rate(c.action_right for c in causes))} |",
        f"| mean abs expected_reduction error | {np.mean(errs):.2f} |" if errs else
        "| mean abs expected_reduction error | – |",
        f"| fastest growing | {_pct(_rate(s.fastest_growing_right for s in gap))} |",
        f"| validate verdicts | {_pct(_rate(v for s in scores for v in s.validate.values()))} |",
        f"| no-gap worlds silent | {_pct(_rate(s.silent for s in scores if s.no_gap))} |",
        f"| confident clusters of background failures | "
        f"{sum(len(s.confident_wrong) for s in scores)} |",
        "",
        "| trap class | causes | taxonomy | top-1 parameter | outside_range | first action | "
        "validate / silent |",
        "|---|---|---|---|---|---|---|",
    ]
    weakest, low = None, 2.0
    for trap in TRAP_CLASSES:
        mine = [c for c in causes if c.trap == trap]
        if trap == "no_gap":
            extra = _pct(_rate(s.silent for s in scores if s.no_gap))
        elif trap == "validate":
            extra = _pct(_rate(v for s in scores for v in s.validate.values()))
        else:
            extra = ""
        rates = [_rate(c.taxonomy_right for c in mine), _rate(c.param_right for c in mine),
                 _rate(c.outside_range_right for c in mine), _rate(c.action_right for c in mine)]
        lines.append(f"| {trap} | {len(mine)} | " + " | ".join(_pct(r) for r in rates)
                     + f" | {extra} |")
        shares = [h / n for h, n in rates if n]
        if shares and float(np.mean(shares)) < low:
            weakest, low = trap, float(np.mean(shares))
    if weakest is not None:
        lines += ["", f"Weakest class: **{weakest}** (mean of its hit rates "
                      f"{100 * low:.0f} %)."]
    return "\n".join(lines)


def _write_readme(body: str) -> None:
    text = README.read_text()
    if BEGIN not in text:
        text = text.rstrip("\n") + f"\n\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{BEGIN}\n{body}\n{END}{tail}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.zoo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", action="append", type=seed_range,
                        help="seed range, e.g. 0-39 (repeat for a held-back range, 1000-1039)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--size", type=float, default=1.0,
                        help="multiplies each world's episodes (default 1)")
    parser.add_argument("--json", type=Path, help="write every world's score here")
    parser.add_argument("--readme", action="store_true",
                        help="write the tables into bench/README.md between the zoo markers")
    args = parser.parse_args(argv)
    ranges = args.seeds or [seed_range("0-39"), seed_range("1000-1039")]
    start = time.perf_counter()
    done = run([s for seeds in ranges for s in seeds], args.workers, args.size)
    results = []
    for seeds in ranges:
        kind = "held back" if min(seeds) >= _HELD_BACK else "tuned on"
        title = f"Seeds {seeds[0]}-{seeds[-1]} ({kind})"
        results.append((title, [r for s in seeds if not isinstance(r := done[s], str)],
                        [r for s in seeds if isinstance(r := done[s], str)]))
    command = "python -m bench.zoo " + " ".join(
        f"--seeds {s[0]}-{s[-1]}" for s in ranges) + f" --workers {args.workers}" + (
        f" --size {args.size:g}" if args.size != 1.0 else "")
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    body = "\n\n".join([f"### {stamp}, {time.perf_counter() - start:.0f} s wall\n\n`{command}`",
                        *(table(sc, len(er), title) for title, sc, er in results)])
    print(body)
    if args.json is not None:
        args.json.write_text(json.dumps(
            [{"range": title, "worlds": [dataclasses.asdict(s) for s in sc], "errors": er}
             for title, sc, er in results], indent=1, default=str) + "\n")
    if args.readme:
        _write_readme(body)
    return 1 if any(er for _, _, er in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Diagnosis parity: the same fleet analysed from Parquet and from each recording format.

Generates a world (the standard synthetic fleet, real and sim at ``--rate`` Hz), analyses
its Parquet dataset, then records it in each format (:mod:`sim2real.demo.recorded`: two
rates, topics microseconds apart, perception stamped at capture plus latency, real-only
system topics, facts where each format keeps them), ingests it with the mapping written
beside it, analyses that, and scores both reports against the answer key (ARI, causes
whose taxonomy is right). The issue's bar: ARI within 0.05 of Parquet, the same taxonomy.

Run: ``.venv/bin/python -m bench.ingest_parity [--scale 0.5] [--rate 20] [--seeds 0,1]
[--formats mcap-json,mcap-ros2,rosbag2,ros1,lerobot,robomimic] [--no-readme]``
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path

from bench.ingest_bench import append_readme

SECTION = "## Ingest parity"


def _score(dataset: Path, key: dict[str, object], ids: dict[str, str] | None = None) -> str:
    import sim2real
    from sim2real.demo.scoring import score_report

    report = sim2real.analyze(dataset)
    if ids is not None:
        events: dict[str, str] = key["events"]  # type: ignore[assignment]
        key = {**key, "events": {ids[e]: c for e, c in events.items()}}
    card = score_report(report.model, key)
    return f"{card.ari:.2f} | {sum(card.taxonomy_right.values())}/{len(card.taxonomy_right)}"


def run(scale: float, rate: float, seeds: list[int], formats: list[str]) -> str:
    """The Markdown table: one row per seed and format, Parquet first."""
    from sim2real.demo.recorded import ingest_recorded, record_world
    from sim2real.demo.scoring import load_answer_key
    from sim2real.demo.synthetic import generate_world, standard_world

    lines = ["| seed | format | files | record (s) | ingest (s) | ARI | taxonomy right |",
             "|---|---|---|---|---|---|---|"]
    spec = dataclasses.replace(standard_world(), real_rate_hz=rate, sim_rate_hz=rate)
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            root = Path(tmp) / f"seed{seed}"
            world = generate_world(spec, root / "world", seed=seed, scale=scale)
            key = load_answer_key(world.answer_key)
            lines.append(f"| {seed} | Parquet (as generated) | - | - | - | "
                         f"{_score(world.dataset, key)} |")
            print(lines[-1], flush=True)
            for fmt in formats:
                start = time.perf_counter()
                rec = record_world(world.dataset, root / fmt, fmt)
                recorded = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # video-free LeRobot, NaN-free worlds
                    ingest_recorded(rec, root / f"{fmt}-ds")
                ingested = time.perf_counter()
                lines.append(f"| {seed} | {fmt} | {len(rec.paths)} | {recorded - start:.0f} | "
                             f"{ingested - recorded:.0f} | "
                             f"{_score(root / f'{fmt}-ds', key, rec.ids)} |")
                print(lines[-1], flush=True)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.5)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--formats",
                        default="mcap-json,mcap-ros2,rosbag2,ros1,lerobot,robomimic")
    parser.add_argument("--no-readme", action="store_true")
    args = parser.parse_args(argv)
    text = run(args.scale, args.rate, [int(s) for s in args.seeds.split(",")],
               args.formats.split(","))
    if not args.no_readme:
        command = ".venv/bin/python -m bench.ingest_parity " + " ".join(
            argv if argv is not None else sys.argv[1:])
        append_readme(text, command.strip(), section=SECTION, about=__doc__.splitlines()[0])
    print(f"Python {platform.python_version()}")


if __name__ == "__main__":
    main()

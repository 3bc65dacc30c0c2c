"""Mode resolution (issue 22): sim2real's clusters against a plain KMeans yardstick.

For every world, the adjusted Rand index of ``analyze``'s clusters against the true causes
(failures in no cluster count as one more group), beside that of
:func:`sim2real.demo.yardstick.yardstick_labels` (KMeans on per-episode mean, std, min,
max and last value of every channel, z-scored against the reference, k by silhouette) on
the same failures. Worlds: the five UCI Robot Execution Failures problems (real,
tests/fixtures), the synthetic presets and zoo worlds that set the same-place-modes trap
(failure modes of one family at the same place and time), at the seeds asked for.

    python -m bench.modes --real                     # five real problems, ~30 s
    python -m bench.modes --synthetic standard,renamed,fleetwide --seeds 0 --scale 0.5
    python -m bench.modes --zoo --seeds 0,1,2 --scale 0.5
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from sklearn.metrics import adjusted_rand_score

import sim2real
from sim2real.demo.robot_failures import write_problem
from sim2real.demo.synthetic import PRESETS, generate_world
from sim2real.demo.yardstick import yardstick_labels
from sim2real.demo.zoo import generate_world as generate_zoo_world

__all__ = ["score"]

_FIXTURES = Path(__file__).parent.parent / "tests" / "fixtures" / "robot_execution_failures"


def score(dataset: Path, truth: dict[str, str]) -> dict[str, float]:
    """ARI of sim2real and of the yardstick against ``truth`` (failure -> cause)."""
    start = time.perf_counter()
    report = sim2real.analyze(dataset)
    seconds = time.perf_counter() - start
    ours = {e.episode_id: e.cluster_id or "-" for e in report.model.events}
    plain = yardstick_labels(dataset)
    ids = sorted(truth)
    causes = [truth[e] for e in ids]
    return {"failures": len(ids), "causes": len(set(causes)),
            "ari": adjusted_rand_score(causes, [ours.get(e, "-") for e in ids]),
            "clusters": len(report.model.clusters),
            "yardstick_ari": adjusted_rand_score(causes, [plain[e] for e in ids]),
            "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", action="store_true", help="the five UCI problems")
    parser.add_argument("--synthetic", default="", help="comma-separated presets")
    parser.add_argument("--zoo", action="store_true", help="zoo worlds: same-place modes")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds")
    parser.add_argument("--scale", type=float, default=1.0, help="synthetic and zoo size")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.real:
            for problem in ("lp1", "lp2", "lp3", "lp4", "lp5"):
                root = Path(tmp) / problem
                truth = write_problem(_FIXTURES / f"{problem}.data", root)
                rows.append({"world": f"UCI {problem}", **score(root, truth)})
        for name in filter(None, args.synthetic.split(",")):
            for seed in map(int, args.seeds.split(",")):
                paths = generate_world(PRESETS[name](), Path(tmp) / f"{name}-{seed}",
                                       seed=seed, scale=args.scale)
                truth = json.loads(paths.answer_key.read_text())["events"]
                rows.append({"world": f"{name} seed {seed} @{args.scale:g}",
                             **score(paths.dataset, truth)})
        if args.zoo:
            for seed in map(int, args.seeds.split(",")):
                key = generate_zoo_world(seed, Path(tmp) / f"zoo-{seed}", size=args.scale,
                                         traps=["same_place_modes"])
                rows.append({"world": f"zoo same_place_modes seed {seed} @{args.scale:g}",
                             **score(key.dataset, dict(key.events))})
    print("| world | failures | causes | sim2real ARI (clusters) | yardstick ARI | analyze s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['world']} | {r['failures']} | {r['causes']} | {r['ari']:.2f} "
              f"({r['clusters']}) | {r['yardstick_ari']:.2f} | {r['seconds']:.1f} |")


if __name__ == "__main__":
    main()

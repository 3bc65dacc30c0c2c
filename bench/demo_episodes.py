"""Cost of one MuJoCo demo episode: CPU time of a fixed set of episodes, tree against tree.

    .venv/bin/python -m bench.demo_episodes [--n 100] [--rounds 3] [--against OTHER/src]

The episodes are the first 60 % of ``n`` of the small seed-0 simulation plan and the first
40 % of its real plan (with system effects, sampled at 50 Hz), as ``sim2real demo --size
small`` runs them. Each measurement runs in a fresh process; with ``--against`` the rounds
alternate between this checkout's ``src`` and the other one, so both see the same load on
a shared machine. CPU time (not wall time) per episode is the figure to compare; the
digest of outcomes and telemetry says whether both trees produce the same episodes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

_SRC = Path(__file__).resolve().parents[1] / "src"


def measure(n: int) -> dict[str, object]:
    """Run the ``n`` fixed episodes in this process: CPU and wall ms per episode, digest."""
    import mujoco

    from sim2real.demo.plan import SIZES, plan_real, plan_sim, run_spec

    mujoco.set_mju_user_warning(lambda _msg: None)
    size = SIZES["small"]
    specs = plan_sim(size, 0)[:n * 6 // 10] + [e.spec for e in plan_real(size, 0)[:n * 4 // 10]]
    run_spec(specs[0])  # compiles the model outside the timed loop
    digest = hashlib.sha256()
    cpu, wall = time.process_time(), time.perf_counter()
    results = [run_spec(s) for s in specs]
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    for res in results:
        digest.update(repr((res.outcome, res.failure_time, res.failure_label)).encode())
        for column in res.telemetry.columns[1:]:
            digest.update(column.to_numpy().tobytes())
    return {"cpu_ms": 1000.0 * cpu / len(specs), "wall_ms": 1000.0 * wall / len(specs),
            "digest": digest.hexdigest()[:16]}


def _measure_in(src: Path, n: int) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-m", "bench.demo_episodes", "--one", "--n", str(n)],
                         env=env, cwd=Path(__file__).resolve().parents[1], check=True,
                         capture_output=True, text=True).stdout
    return dict(json.loads(out.splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", type=Path, help="another checkout's src folder")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.n)))
        return
    trees = [_SRC] + ([args.against.resolve()] if args.against else [])
    runs: dict[Path, list[dict[str, object]]] = {t: [] for t in trees}
    for r in range(args.rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            runs[tree].append(_measure_in(tree, args.n))
            print(tree, runs[tree][-1], flush=True)
    print(f"\n{args.n} episodes, {args.rounds} rounds: best CPU ms/episode (median)")
    for tree, found in runs.items():
        cpu = sorted(float(str(f["cpu_ms"])) for f in found)
        digests = {str(f["digest"]) for f in found}
        print(f"{tree}: {cpu[0]:.1f} ({cpu[len(cpu) // 2]:.1f}), digest {', '.join(digests)}")


if __name__ == "__main__":
    main()

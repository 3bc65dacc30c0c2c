"""Calibration benchmarks: parameter recovery on the demo world and on a two-link arm.

    .venv/bin/python bench/calibration_bench.py demo   [--out /tmp/s2r-bench]
    .venv/bin/python bench/calibration_bench.py arm

``demo``: for each parameter cause of the demo fleet, calibrate on the real failures the
answer key blames on it and report the error against the hidden value. ``arm``: the
style of the published recovery benchmarks: a MuJoCo two-link arm whose link masses and
joint damping are hidden (two of three outside the randomisation range), a few "real"
trajectories under known torque sequences, replayed open-loop on a fixed rollout budget.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa

from sim2real.dataset.schema import Channel
from sim2real.dataset.write import write_dataset
from sim2real.demo import generate
from sim2real.sim import CalibrationConfig, calibrate
from sim2real.sim.adapter import RolloutRequest
from sim2real.sim.example_adapter import ARM_PARAMS, ArmAdapter

_ARM_TRUTH = {"mass1": 1.45, "mass2": 0.52, "damping": 0.12}
_RATE = 50.0


def bench_demo(out: Path, budget: CalibrationConfig) -> list[dict[str, object]]:
    """Recover each demo cause's key parameter from its real failures."""
    paths = generate(out / "demo", size="small", seed=0, progress=False)
    key = json.loads(paths.answer_key.read_text())
    rows = []
    for cause in key["causes"]:
        if cause["key_param"] is None:
            continue
        events = sorted((e for e, c in key["events"].items() if c == cause["name"]),
                        reverse=True)  # latest first: the cause's final hidden value
        other = "camera_noise" if cause["key_param"] != "camera_noise" else "friction"
        res = calibrate(paths.dataset, episodes=events[:budget.max_episodes],
                        params=[cause["key_param"], other], config=budget, progress=True)
        fit = next(p for p in res.params if p.param == cause["key_param"])
        rows.append({"cause": cause["name"], "param": fit.param, "truth": cause["true_value"],
                     "nominal": fit.sim_nominal, "fitted": fit.fitted, "std": fit.std,
                     "error": round(abs(fit.fitted - cause["true_value"]), 4),
                     "d_before": res.discrepancy_before, "d_after": res.discrepancy_after,
                     "rollouts": res.rollouts, "wall_s": res.wall_s, "note": fit.note})
    return rows


def _torques(rng: np.random.Generator, n: int) -> np.ndarray:
    """``(n, 2)`` a sum of three random sinusoids per joint (a rich excitation)."""
    t = np.arange(n) / _RATE
    out = np.zeros((n, 2))
    for j, amp in enumerate((2.5, 0.9)):
        for _ in range(3):
            f, ph = rng.uniform(0.3, 2.0), rng.uniform(0, 2 * np.pi)
            out[:, j] += amp / 3 * np.sin(2 * np.pi * f * t + ph)
    return out


def _arm_dataset(root: Path, n_sim: int, n_real: int, seed: int) -> tuple[Path, list[str]]:
    rng = np.random.default_rng(seed)
    arm = ArmAdapter()
    n = round(2.0 * _RATE)
    episodes: list[dict[str, object]] = []
    signals: list[pa.Table] = []
    for i in range(n_sim + n_real):
        real = i >= n_sim
        params = (_ARM_TRUTH if real else
                  {k: float(rng.uniform(p.low, p.high)) for k, p in ARM_PARAMS.items()})
        tau = _torques(rng, n)
        cmd = pa.table({"t": np.arange(n) / _RATE, "tau1": tau[:, 0], "tau2": tau[:, 1]})
        init = {"q1": float(rng.uniform(-0.3, 0.3)), "q2": float(rng.uniform(-0.3, 0.3))}
        res = arm.rollout(RolloutRequest(params, {}, init, i, _RATE, cmd))
        eid = f"{'real' if real else 'sim'}-{i:04d}"
        signals.append(pa.table({"episode_id": [eid] * res.telemetry.num_rows,
                                 **{c: res.telemetry[c] for c in res.telemetry.column_names}}))
        episodes.append({"episode_id": eid, "source": "real" if real else "sim",
                         "task": "swing", "outcome": "failure" if real else "success",
                         "deployment": "w01" if real else None,
                         "started_at": datetime(2024, 1, 1, tzinfo=UTC) if real else None,
                         **{f"param.{k}": (None if real else v) for k, v in params.items()}})
    channels = [Channel(c, "dynamics", u) for c, u in
                (("q1", "rad"), ("q2", "rad"), ("dq1", "rad/s"), ("dq2", "rad/s"))]
    channels += [Channel("tau1", "policy", "N m"), Channel("tau2", "policy", "N m")]
    table = pa.Table.from_pylist(episodes).cast(pa.schema([
        ("episode_id", pa.string()), ("source", pa.string()), ("task", pa.string()),
        ("outcome", pa.string()), ("deployment", pa.string()),
        ("started_at", pa.timestamp("us", tz="UTC")),
        *[(f"param.{k}", pa.float64()) for k in ARM_PARAMS]]))
    write_dataset(root, table, signals, channels=channels, params=list(ARM_PARAMS.values()))
    return root, [str(e["episode_id"]) for e in episodes if e["source"] == "real"]


def bench_arm(out: Path, budget: CalibrationConfig) -> list[dict[str, object]]:
    """Recover the arm's hidden masses and damping from open-loop torque replays."""
    dataset, real = _arm_dataset(out / "arm", n_sim=60, n_real=budget.max_episodes, seed=0)
    start = time.perf_counter()
    res = calibrate(dataset, episodes=real, params=list(ARM_PARAMS), adapter=ArmAdapter(),
                    config=budget, progress=True)
    wall = time.perf_counter() - start
    return [{"param": p.param, "truth": _ARM_TRUTH[p.param], "nominal": p.sim_nominal,
             "fitted": p.fitted, "std": p.std,
             "rel_error": round(abs(p.fitted - _ARM_TRUTH[p.param]) / _ARM_TRUTH[p.param], 4),
             "d_before": res.discrepancy_before, "d_after": res.discrepancy_after,
             "rollouts": res.rollouts, "wall_s": round(wall, 2), "note": p.note}
            for p in res.params]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", choices=["demo", "arm"])
    parser.add_argument("--out", type=Path, default=Path("/tmp/s2r-calibration-bench"))
    parser.add_argument("--budget", type=int, default=137, help="candidate evaluations")
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    budget = CalibrationConfig(budget=args.budget, restarts=2, max_episodes=args.episodes,
                               seeds=args.seeds if args.which == "demo" else 1)
    rows = (bench_demo if args.which == "demo" else bench_arm)(args.out, budget)
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    main()

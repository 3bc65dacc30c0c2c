"""Hopper mass recovery: sim2real calibrate against plain CMA-ES, at 200 evaluations.

    PYTHONPATH=src:examples/hopper-adapter/src .venv/bin/python bench/hopper_bench.py \
        --runs 10 [--budget 200] [--workers 2] [--out /tmp/s2r-hopper-bench]

The protocol of the published sim-to-real parameter-recovery benchmarks (DROPO reports a
summed squared mass error of 0.438 on Hopper at 200 evaluations): five "real" falls of
a MuJoCo hopper at the classic link masses (example adapter ``sim2real_hopper``), 100 sim
rollouts around a wrong nominal (each mass 0.5x to 1.5x the truth, drawn per run), a
search box of 0.5x to 2x the nominal. Per run:

- ``calibrate``: sim2real's calibration, ``--budget`` candidate evaluations;
- ``cma``: plain CMA-ES (pycma) from the nominal on the time-aligned trajectory error,
  the same number of evaluations, its best candidate;
- ``check``: the counterfactual check on the true masses (must reproduce), the wrong
  nominal (must not), and the calibrated fit.

Reports each run's summed squared mass error (kg^2) and wall time, then the median and
range over runs. About 40 s a run on two busy cores (the fleet and the checks included).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples/hopper-adapter/src"))
from sim2real_hopper.adapter import STATE, HopperAdapter
from sim2real_hopper.synthetic import TRUTH, hopper_fleet

from sim2real.dataset import Dataset, load_dataset
from sim2real.sim import CalibrationConfig, RolloutRequest, calibrate
from sim2real.sim.check import check

DROPO = 0.438
_BOX = (0.5, 2.0)  # search box, in units of the nominal
_WIDEN = 1.6  # the sim range is 0.8x..1.25x nominal; 1.6x beyond it is 0.5x..2x


def _sq_error(fitted: Mapping[str, float]) -> float:
    return float(sum((fitted[k] - v) ** 2 for k, v in TRUTH.items()))


def _real(ds: Dataset) -> list[str]:
    eps = ds.episodes.filter(pc.equal(ds.episodes["source"], "real"))
    return sorted(eps["episode_id"].to_pylist())


def plain_cma(ds: Dataset, real: list[str], nominal: Mapping[str, float], budget: int,
              seed: int) -> dict[str, float]:
    """CMA-ES on the mean squared, per-channel standardised trajectory error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import cma
    sim = HopperAdapter()
    signals = ds.read_signals(real)
    scale = {c: float(np.nanstd(signals[c].to_numpy(zero_copy_only=False))) or 1.0
             for c in STATE}
    episodes = []
    for e in real:
        table = signals.filter(pc.equal(signals["episode_id"], e)).sort_by("t")
        episodes.append((table, sim.initial_state({}, table)))
    names = list(nominal)

    def error(x: np.ndarray) -> float:
        params = {k: nominal[k] * float(np.exp(xi)) for k, xi in zip(names, x, strict=True)}
        total = 0.0
        for table, state in episodes:
            t = table["t"].to_numpy()
            res = sim.rollout(RolloutRequest(params, {}, state, 0, 125.0, table))
            rt = res.telemetry["t"].to_numpy()
            for c in STATE:
                a = np.interp(t, rt, res.telemetry[c].to_numpy())
                total += float(np.mean(((a - table[c].to_numpy()) / scale[c]) ** 2))
        return total / len(episodes)

    lo, hi = np.log(_BOX[0]), np.log(_BOX[1])
    es = cma.CMAEvolutionStrategy([0.0] * len(names), 0.25 * (hi - lo),
                                  {"bounds": [lo, hi], "seed": seed + 1, "verbose": -9,
                                   "maxfevals": budget})
    best, f_best, spent = np.zeros(len(names)), error(np.zeros(len(names))), 1
    while spent + es.popsize <= budget:
        xs = es.ask()
        fs = [error(np.asarray(x)) for x in xs]
        es.tell(xs, fs)
        spent += len(xs)
        if min(fs) < f_best:
            best, f_best = np.asarray(xs[int(np.argmin(fs))]), min(fs)
    return {k: nominal[k] * float(np.exp(xi)) for k, xi in zip(names, best, strict=True)}


def run(out: Path, seed: int, budget: int, workers: int) -> dict[str, object]:
    rng = np.random.default_rng(1000 + seed)
    nominal = {k: round(v * float(rng.uniform(0.5, 1.5)), 3) for k, v in TRUTH.items()}
    ds = load_dataset(hopper_fleet(out / f"run{seed}", nominal, seed=seed))
    real = _real(ds)
    sim = HopperAdapter()
    start = time.perf_counter()
    cal = calibrate(ds, episodes=real, params=list(TRUTH), adapter=sim, workers=workers,
                    config=CalibrationConfig(budget=budget, max_episodes=len(real),
                                             widen=_WIDEN, seed=seed))
    cal_s = time.perf_counter() - start
    start = time.perf_counter()
    baseline = plain_cma(ds, real, nominal, budget, seed)
    cma_s = time.perf_counter() - start
    verdicts = {name: check(ds, update, episodes=real, adapter=sim, workers=workers)
                for name, update in (("truth", TRUTH), ("nominal", nominal),
                                     ("fit", cal.fitted))}
    return {"seed": seed, "nominal": nominal, "calibrate_fit": cal.fitted,
            "calibrate_sq_error": round(_sq_error(cal.fitted), 4),
            "calibrate_candidates": cal.plan["candidates"], "calibrate_wall_s": round(cal_s, 1),
            "calibrate_converged": cal.converged,
            "cma_fit": {k: round(v, 4) for k, v in baseline.items()},
            "cma_sq_error": round(_sq_error(baseline), 4), "cma_wall_s": round(cma_s, 1),
            **{f"check_{k}": v.reproduces for k, v in verdicts.items()},
            "real_failures_at_nominal": f"{verdicts['truth'].failures_before} of "
                                        f"{verdicts['truth'].replays}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="seeds (about 40 s each)")
    parser.add_argument("--first", type=int, default=0, help="first seed")
    parser.add_argument("--budget", type=int, default=200, help="evaluations per method")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("/tmp/s2r-hopper-bench"))
    args = parser.parse_args()
    rows = []
    for seed in range(args.first, args.first + args.runs):
        rows.append(run(args.out, seed, args.budget, args.workers))
        print(json.dumps(rows[-1]), flush=True)
    for method in ("calibrate", "cma"):
        errs = [float(r[f"{method}_sq_error"]) for r in rows]  # type: ignore[arg-type]
        walls = [float(r[f"{method}_wall_s"]) for r in rows]  # type: ignore[arg-type]
        print(json.dumps({"method": method, "runs": len(rows),
                          "median_sq_error": round(statistics.median(errs), 4),
                          "min": min(errs), "max": max(errs),
                          "runs_above_1": sum(e > 1.0 for e in errs),
                          "median_wall_s": round(statistics.median(walls), 1),
                          "dropo_reference": DROPO}))
    for k in ("truth", "nominal", "fit"):
        print(json.dumps({"check": k, "reproduces": sum(bool(r[f"check_{k}"]) for r in rows),
                          "of": len(rows)}))


if __name__ == "__main__":
    main()

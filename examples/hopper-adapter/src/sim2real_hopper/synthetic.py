"""A hopper fleet to try the adapter on: real falls at true masses, sim at wrong ones.

    python -m sim2real_hopper.synthetic OUT [--seed 0]

"Real" episodes run the hopper at the true link masses under smooth random motor commands
until it falls; the simulation rollouts run it at masses drawn around a wrong nominal
(``params.csv`` records that randomisation range). Calibration should find the truth.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

from sim2real.dataset.schema import Channel, ParamRange
from sim2real.dataset.write import write_dataset
from sim2real.sim import RolloutRequest
from sim2real_hopper.adapter import COMMANDS, MASSES, STATE, HopperAdapter

__all__ = ["RATE_HZ", "TRUTH", "hopper_fleet"]

RATE_HZ = 125.0  # 4 physics steps of 2 ms per sample
TRUTH = {name: mass for name, (_, mass) in MASSES.items()}
_SECONDS = 2.0


def _commands(rng: np.random.Generator) -> np.ndarray:
    """``(n + 1, 3)`` smooth random motor commands: three sinusoids per joint, clipped."""
    t = np.arange(round(_SECONDS * RATE_HZ) + 1) / RATE_HZ
    out = np.zeros((t.size, 3))
    for j in range(3):
        for _ in range(3):
            amp, f, ph = rng.uniform(0.05, 0.15), rng.uniform(0.5, 3.0), rng.uniform(0, 2 * np.pi)
            out[:, j] += amp * np.sin(2 * np.pi * f * t + ph)
    return np.clip(out, -1.0, 1.0)


def _start(rng: np.random.Generator) -> dict[str, float]:
    """A standing start with a little noise on every position and velocity."""
    state = {k: float(rng.uniform(-0.005, 0.005)) for k in STATE}
    state["z"] += 1.25
    return state


def hopper_fleet(root: Path, nominal: Mapping[str, float], *, n_real: int = 5,
                 n_sim: int = 100, seed: int = 0, truth: Mapping[str, float] = TRUTH) -> Path:
    """Write a dataset: ``n_real`` falls at ``truth``, ``n_sim`` rollouts around ``nominal``.

    The sim randomisation range of each mass is 0.8x to 1.25x its nominal.
    """
    rng = np.random.default_rng(seed)
    sim = HopperAdapter()
    ranges = [ParamRange(k, 0.8 * v, 1.25 * v, v) for k, v in nominal.items()]
    rows: list[dict[str, object]] = []
    signals: list[pa.Table] = []
    start = datetime(2026, 1, 5, tzinfo=UTC)

    def record(params: Mapping[str, float], real: bool, i: int) -> bool:
        cmd = _commands(rng)
        request = RolloutRequest(dict(params), {}, _start(rng), 0, RATE_HZ,
                                 pa.table({"t": np.arange(len(cmd)) / RATE_HZ,
                                           **{c: cmd[:, j] for j, c in enumerate(COMMANDS)}}))
        res = sim.rollout(request)
        if real and res.outcome != "failure":
            return False  # the real fleet's record holds falls: draw again
        eid = f"{'real' if real else 'sim'}-{i:03d}"
        signals.append(pa.table({"episode_id": [eid] * res.telemetry.num_rows,
                                 **{c: res.telemetry[c] for c in res.telemetry.column_names}}))
        rows.append({"episode_id": eid, "source": "real" if real else "sim", "task": "hop",
                     "outcome": res.outcome, "failure_time": res.failure_time,
                     "deployment": "w01" if real else None,
                     "started_at": start + timedelta(minutes=i) if real else None,
                     **{f"param.{k}": None if real else float(v) for k, v in params.items()}})
        return True

    made = 0
    while made < n_real:
        made += record(truth, True, made)
    for i in range(n_sim):
        record({r.name: float(r.nominal * np.exp(rng.uniform(np.log(0.8), np.log(1.25))))
                for r in ranges}, False, i)
    episodes = pa.Table.from_pylist(rows).cast(pa.schema([
        ("episode_id", pa.string()), ("source", pa.string()), ("task", pa.string()),
        ("outcome", pa.string()), ("failure_time", pa.float64()), ("deployment", pa.string()),
        ("started_at", pa.timestamp("us", tz="UTC")),
        *[(f"param.{k}", pa.float64()) for k in nominal]]))
    channels = [Channel(c, "dynamics", "") for c in STATE]
    channels += [Channel(c, "policy", "") for c in COMMANDS]
    return write_dataset(root, episodes, signals, channels=channels, params=ranges)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    nominal = {k: round(v * float(rng.uniform(0.5, 1.5)), 3) for k, v in TRUTH.items()}
    print(hopper_fleet(args.out, nominal, seed=args.seed))


if __name__ == "__main__":
    main()

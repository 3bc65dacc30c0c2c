"""A toy deterministic simulator whose failures saturate: a ramp that 'falls' at 1.

``y(t) = a * gain * t`` from a recorded slope ``a``; the rollout fails (and ends) once
``y`` reaches 1 within two seconds. With the true gain of 1.5 every real episode below
fails; at the nominal 1.0 four of five replays already fail, so no update can raise the
failure rate by much: the case where a check must judge by reproduction, not by gain.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa

from sim2real.dataset.schema import Channel, ParamRange
from sim2real.dataset.write import write_dataset
from sim2real.sim import RolloutRequest, RolloutResult

GAIN = ParamRange("gain", 0.8, 1.25, 1.0)
TRUE_GAIN = 1.5
REAL_SLOPES = (0.6, 0.7, 0.8, 0.9, 0.4)  # the last one fails only above gain 1.25


class ToyAdapter:
    name = "toy"
    command_channels: tuple[str, ...] = ()
    deterministic = True

    def __init__(self, duration: float = 2.0) -> None:
        self.duration = duration

    def initial_state(self, episode: Mapping[str, object], telemetry: pa.Table) -> dict[str, float]:
        return {"a": float(telemetry["slope"][0].as_py())}

    def rollout(self, request: RolloutRequest) -> RolloutResult:
        gain = float(request.params.get("gain", GAIN.nominal))
        a = request.init_state["a"]
        t = np.arange(0.0, self.duration, 1.0 / request.rate_hz)
        y = a * gain * t
        fell = np.flatnonzero(y >= 1.0)
        end = int(fell[0]) + 1 if fell.size else t.size
        table = pa.table({"t": t[:end], "y": y[:end], "slope": np.full(end, a)})
        if fell.size:
            return RolloutResult(table, "failure", float(t[end - 1]))
        return RolloutResult(table, "success", None)


def toy_dataset(root: Path, n_sim: int = 30) -> Path:
    """Five real falls at the true gain and ``n_sim`` randomised sim rollouts."""
    rng = np.random.default_rng(0)
    sim = ToyAdapter()
    rows, signals = [], []
    runs = [(TRUE_GAIN, a, True) for a in REAL_SLOPES]
    runs += [(float(rng.uniform(GAIN.low, GAIN.high)), float(rng.uniform(0.2, 0.9)), False)
             for _ in range(n_sim)]
    for i, (gain, a, real) in enumerate(runs):
        table = pa.table({"t": [0.0], "y": [0.0], "slope": [a]})
        state = sim.initial_state({}, table)
        res = sim.rollout(RolloutRequest({"gain": gain}, {}, state, 0, 50.0))
        eid = f"{'real' if real else 'sim'}-{i:03d}"
        signals.append(pa.table({"episode_id": [eid] * res.telemetry.num_rows,
                                 **{c: res.telemetry[c] for c in res.telemetry.column_names}}))
        rows.append({"episode_id": eid, "source": "real" if real else "sim", "task": "ramp",
                     "outcome": res.outcome, "deployment": "w01" if real else None,
                     "started_at": datetime(2024, 1, 1, tzinfo=UTC) if real else None,
                     "param.gain": None if real else gain})
    episodes = pa.Table.from_pylist(rows).cast(pa.schema([
        ("episode_id", pa.string()), ("source", pa.string()), ("task", pa.string()),
        ("outcome", pa.string()), ("deployment", pa.string()),
        ("started_at", pa.timestamp("us", tz="UTC")), ("param.gain", pa.float64())]))
    return write_dataset(root, episodes, signals,
                         channels=[Channel("y", "dynamics", "m"), Channel("slope", "dynamics", "")],
                         params=[GAIN])


def real_ids() -> list[str]:
    return [f"real-{i:03d}" for i in range(len(REAL_SLOPES))]

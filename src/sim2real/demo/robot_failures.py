"""Real labelled telemetry: the UCI "Robot Execution Failures" data as a sim2real dataset.

Each learning problem (``lp1.data`` ... ``lp5.data``) holds force/torque recordings of an
industrial arm, 15 samples over 315 ms after a failure was detected, labelled ``normal``
(or ``ok``) or with a failure mode (a collision, an obstruction, a part moved or lost).
No simulator exists for that arm, so the normal runs are the reference: every other one
is written as ``source = reference`` (normal operation standing in for sim rollouts), the
rest as real successes. The failures are real failures spread in a seeded random order
over three deployments of one robot at one site; their modes are returned beside the dataset, never
written into it (``failure_label`` is a symptom, not the answer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

from sim2real.dataset import write_dataset
from sim2real.dataset.schema import Channel

__all__ = ["CHANNELS", "NORMAL", "Recording", "read_problem", "write_problem"]

CHANNELS = ("Fx", "Fy", "Fz", "Tx", "Ty", "Tz")
UNITS = ("N", "N", "N", "N*m", "N*m", "N*m")
# The labels of normal executions (LP3 calls them "ok").
NORMAL = ("normal", "ok")
_SAMPLES = 15
_PERIOD_S = 0.315 / _SAMPLES
_DEPLOYMENTS = 3


@dataclass(frozen=True)
class Recording:
    """One labelled execution: its label and ``(15, 6)`` force/torque samples."""

    label: str
    samples: np.ndarray


def read_problem(path: str | Path) -> list[Recording]:
    """Read one ``lpN.data`` file: a label line, then 15 lines of six integers, per
    execution.

    Raises:
        ValueError: a record is not a label followed by 15 rows of six numbers.
    """
    records: list[Recording] = []
    label: str | None = None
    rows: list[list[float]] = []
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        if not line[0].isspace():
            if label is not None:
                records.append(_record(path, label, rows))
            label, rows = line.strip(), []
            continue
        values = re.split(r"\s+", line.strip())
        if label is None or len(values) != len(CHANNELS):
            raise ValueError(f"{path}:{number}: expected a label line or six numbers")
        rows.append([float(v) for v in values])
    if label is not None:
        records.append(_record(path, label, rows))
    return records


def _record(path: str | Path, label: str, rows: list[list[float]]) -> Recording:
    if len(rows) != _SAMPLES:
        raise ValueError(f"{path}: execution {label!r} has {len(rows)} samples, not {_SAMPLES}")
    return Recording(label, np.array(rows))


def write_problem(path: str | Path, out: str | Path, task: str | None = None,
                  seed: int = 0) -> dict[str, str]:
    """Write one learning problem as a dataset folder ``out``; ``seed`` orders the failures
    over the deployments.

    Returns:
        Every failure's episode ID -> its labelled mode (the answer key).
    """
    records = read_problem(path)
    task = task or Path(path).stem
    start = datetime(2024, 1, 1, tzinfo=UTC)
    normal = [r for r in records if r.label in NORMAL]
    failed = [r for r in records if r.label not in NORMAL]
    # The files list the modes one after another: shuffled (seeded), so that no mode
    # belongs to one deployment, as it would if the order of the file were time.
    failed = [failed[i] for i in np.random.default_rng(seed).permutation(len(failed))]
    episodes: list[dict[str, object]] = []
    signals: list[pa.Table] = []
    truth: dict[str, str] = {}
    t = np.arange(_SAMPLES) * _PERIOD_S

    def add(episode_id: str, source: str, outcome: str, i: int, n: int,
            record: Recording) -> None:
        real = source == "real"
        order = i * _DEPLOYMENTS // max(n, 1)
        episodes.append({
            "episode_id": episode_id, "source": source, "task": task, "outcome": outcome,
            "deployment": f"d{order + 1}" if real else None,
            "started_at": start + timedelta(days=order, minutes=i) if real else None,
            "robot_id": "arm-1" if real else None, "site": "cell-1" if real else None,
        })
        columns = {"episode_id": [episode_id] * _SAMPLES, "t": t}
        columns.update({c: record.samples[:, j] for j, c in enumerate(CHANNELS)})
        signals.append(pa.table(columns))

    reference, successes = normal[::2], normal[1::2]
    for i, r in enumerate(reference):
        add(f"ref-{i:03d}", "reference", "success", i, len(reference), r)
    for i, r in enumerate(successes):
        add(f"ok-{i:03d}", "real", "success", i, len(successes), r)
    for i, r in enumerate(failed):
        episode_id = f"fail-{i:03d}"
        add(episode_id, "real", "failure", i, len(failed), r)
        truth[episode_id] = r.label
    table = pa.Table.from_pylist(episodes, schema=pa.schema([
        ("episode_id", pa.string()), ("source", pa.string()), ("task", pa.string()),
        ("outcome", pa.string()), ("deployment", pa.string()),
        ("started_at", pa.timestamp("us", tz="UTC")), ("robot_id", pa.string()),
        ("site", pa.string())]))
    write_dataset(out, table, pa.concat_tables(signals),
                  channels=[Channel(c, "dynamics", u) for c, u in zip(CHANNELS, UNITS,
                                                                      strict=True)])
    return truth

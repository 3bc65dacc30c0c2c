"""Episode rows and signal tables in the dataset format, shared by every ingest source."""

from __future__ import annotations

import csv
import datetime as dt
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from sim2real.dataset import FAMILIES, Channel
from sim2real.errors import IngestError

__all__ = ["EpisodeDefaults", "episodes_table", "long_table", "read_families",
           "read_sidecar", "signals_table", "to_timestamp", "warn_nonfinite"]

_FIXED = ("episode_id", "source", "task", "outcome", "failure_time", "failure_label",
          "deployment", "started_at", "robot_id", "site")


def to_timestamp(value: Any, where: str) -> dt.datetime:
    """A UTC datetime from ns since the epoch, an ISO string, or a datetime.

    Raises:
        IngestError: the value is none of those.
    """
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, int | np.integer):
        return dt.datetime.fromtimestamp(int(value) / 1e9, tz=dt.UTC)
    try:
        parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError as err:
        msg = f"{where}: started_at {value!r} is not an ISO timestamp (2026-03-01T08:00:00Z)"
        raise IngestError(msg) from err
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _column(name: str, values: list[Any]) -> pa.Array:
    if name == "started_at":
        return pa.array(values, type=pa.timestamp("us", tz="UTC"))
    if name == "failure_time" or name.startswith("param."):
        return pa.array([None if v is None else float(v) for v in values], type=pa.float64())
    present = [v for v in values if v is not None]
    if any(isinstance(v, str) for v in present) or not present:
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())
    if all(isinstance(v, bool) for v in present):
        return pa.array(values, type=pa.bool_())
    return pa.array([None if v is None else float(v) for v in values], type=pa.float64())


def episodes_table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    """One table from episode dicts; columns in the spec's order, then ctx/param/sys sorted.

    Raises:
        IngestError: two episodes share an ID.
    """
    seen: set[str] = set()
    for row in rows:
        if row["episode_id"] in seen:
            msg = (f"episode_id {row['episode_id']!r} comes out twice; "
                   "change the mapping's episodes.id template")
            raise IngestError(msg)
        seen.add(row["episode_id"])
    names = [n for n in _FIXED if any(n in r for r in rows)]
    names += sorted({k for r in rows for k in r} - set(_FIXED))
    return pa.table({n: _column(n, [r.get(n) for r in rows]) for n in names})


def signals_table(episode_id: str, t: np.ndarray, columns: dict[str, np.ndarray]) -> pa.Table:
    """Signals of one episode (wide); NaN or inf marks "no sample of this channel at this
    time" (null)."""
    data: dict[str, pa.Array] = {
        "episode_id": pa.array(np.full(len(t), episode_id, dtype=object), type=pa.string()),
        "t": pa.array(t, type=pa.float64()),
    }
    for name, values in columns.items():
        data[name] = pa.array(values, type=pa.float64(), mask=~np.isfinite(values))
    return pa.table(data)


def warn_nonfinite(where: str, parts: list[dict[str, np.ndarray]]) -> None:
    """Warn once for the samples of ``parts`` (each episode's columns) that are NaN or inf:
    they are left out of the signals (``signals_table`` makes them null)."""
    counts: dict[str, int] = {}
    for columns in parts:
        for name, values in columns.items():
            bad = int((~np.isfinite(values)).sum())
            if bad:
                counts[name] = counts.get(name, 0) + bad
    if counts:
        listed = ", ".join(f"{k} ({v})" for k, v in sorted(counts.items()))
        warnings.warn(f"{where}: {sum(counts.values())} sample(s) were NaN or inf and were left "
                      f"out: {listed}", UserWarning, stacklevel=3)


def long_table(episode_id: str, series: dict[str, tuple[np.ndarray, np.ndarray]]) -> pa.Table:
    """Signals of one episode in the long layout, every channel with its own times:
    ``{channel: (t seconds, values)}`` -> rows ordered by channel name, then ``t``."""
    names = sorted(n for n, (t, _) in series.items() if t.size)
    counts = [series[n][0].size for n in names]
    total = int(sum(counts))
    codes = np.repeat(np.arange(len(names), dtype=np.int32), counts)
    channel = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()),
                                             pa.array(names, pa.string())).cast(pa.string())
    return pa.table({
        "episode_id": pa.array(np.full(total, episode_id, dtype=object), type=pa.string()),
        "t": pa.array(np.concatenate([series[n][0] for n in names]) if names else [],
                      type=pa.float64()),
        "channel": channel,
        "value": pa.array(np.concatenate([series[n][1] for n in names]) if names else [],
                          type=pa.float64()),
    })


def read_sidecar(path: Path, key: str) -> dict[str, dict[str, str]]:
    """Rows of a sidecar CSV by their ``key`` column.

    Raises:
        IngestError: the file is missing or has no ``key`` column.
    """
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            if key not in (reader.fieldnames or []):
                msg = f"{path}: sidecar has no column {key!r}; columns: {reader.fieldnames}"
                raise IngestError(msg)
            return {row[key]: row for row in reader}
    except OSError as err:
        raise IngestError(f"{path}: cannot read the sidecar CSV ({err.strerror})") from err


def read_families(path: Path) -> list[Channel]:
    """``channel,family[,unit]`` rows of a CSV (the dataset's ``channels.csv`` format).

    Raises:
        IngestError: the file is missing, lacks a column, or names an unknown family.
    """
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            for column in ("channel", "family"):
                if column not in (reader.fieldnames or []):
                    raise IngestError(f"{path}: no column {column!r}; expected channel,family,unit")
            out = []
            for row_number, row in enumerate(reader):
                family = (row["family"] or "").strip()
                if family not in FAMILIES:
                    msg = (f"{path}: row {row_number}, column 'family': unknown family "
                           f"{family!r}; expected one of {', '.join(FAMILIES)}")
                    raise IngestError(msg)
                out.append(Channel(row["channel"].strip(), family,
                                   (row.get("unit") or "").strip()))
            return out
    except OSError as err:
        raise IngestError(f"{path}: cannot read the families CSV ({err.strerror})") from err
    except UnicodeDecodeError as err:
        raise IngestError(f"{path}: not a text CSV ({err.reason})") from err


@dataclass(frozen=True)
class EpisodeDefaults:
    """Episode fields a tabular source (LeRobot, robomimic) does not record itself."""

    source: str | None = None
    task: str | None = None
    deployment: str | None = None
    outcome: str | None = None
    started_at: dt.datetime | None = None
    sidecar: Path | None = None

    def check(self) -> None:
        """Raise :class:`IngestError` for a source or outcome outside the spec's vocabulary."""
        if self.source not in (None, "real", "sim"):
            raise IngestError(f"--source {self.source!r}: expected real or sim")
        if self.outcome not in (None, "success", "failure"):
            raise IngestError(f"--outcome {self.outcome!r}: expected success or failure")

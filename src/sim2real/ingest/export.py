"""``export``: a real failure and its nearest sim rollouts as one MCAP or Rerun recording.

Channels become time series under ``/real/<channel>`` and ``/sim/<episode_id>/<channel>``,
all starting at the same instant so they play side by side; the failure becomes a
``foxglove.Event`` on ``/events`` (its episode, symptom, cluster, taxonomy and drift score
as metadata: it shows on Foxglove's timeline) and a ``foxglove.Log`` on ``/real/failure``
in MCAP, a ``TextLog`` in Rerun. The file gets the user's normal file mode.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.dataset as pds
import pyarrow.parquet as pq

from sim2real._optional import require
from sim2real.dataset.layout import to_wide
from sim2real.errors import IngestError

__all__ = ["ExportPlan", "export_event", "plan_export"]

Format = Literal["mcap", "rerun"]
_SCALAR_SCHEMA = {"type": "object", "title": "sim2real.Scalar", "properties": {
    "timestamp": {"type": "object", "properties": {"sec": {"type": "integer"},
                                                   "nsec": {"type": "integer"}}},
    "value": {"type": "number"}}}
_TIME = {"type": "object", "title": "time", "properties": {
    "sec": {"type": "integer", "minimum": 0},
    "nsec": {"type": "integer", "minimum": 0, "maximum": 999999999}}}
# foxglove.Event as the Foxglove SDK generates it: Foxglove recognises the exact name.
_EVENT_SCHEMA = {"type": "object", "title": "foxglove.Event",
                 "description": "A discrete event that occurred over a time range",
                 "properties": {
                     "start_time": _TIME, "end_time": _TIME,
                     "metadata": {"type": "array", "items": {
                         "title": "foxglove.KeyValuePair", "type": "object",
                         "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
                         "required": ["key", "value"]}}},
                 "required": ["start_time", "end_time"]}
_LOG_SCHEMA = {"type": "object", "title": "foxglove.Log", "properties": {
    "timestamp": {"type": "object"}, "level": {"type": "integer"}, "message": {"type": "string"},
    "name": {"type": "string"}, "file": {"type": "string"}, "line": {"type": "integer"}}}


@dataclass(frozen=True)
class ExportPlan:
    """What to export: the real episode, its sim neighbours and their signals."""

    event_id: str
    real_id: str
    sim_ids: list[str]
    signals: pa.Table
    failure_time: float | None
    failure_label: str | None
    start_ns: int
    report_event: dict[str, Any]
    """The event's entry in report.json (cluster, drift score...)."""


def _report(run: Path) -> dict[str, Any]:
    path = run / "report.json" if run.is_dir() else run
    try:
        return dict(json.loads(path.read_text()))
    except OSError as err:
        msg = f"{path}: no report; run `sim2real analyze DATASET -o OUT` first"
        raise IngestError(msg) from err
    except json.JSONDecodeError as err:
        raise IngestError(f"{path}: not valid JSON ({err})") from err


def _table(root: Path, stem: str) -> pa.Table | pds.Dataset:
    if (root / f"{stem}.parquet").exists():
        return pds.dataset(root / f"{stem}.parquet")
    if (root / stem).is_dir():
        return pds.dataset(root / stem, format="parquet")
    if (root / f"{stem}.csv").exists():
        return pcsv.read_csv(root / f"{stem}.csv")
    raise IngestError(f"{root}: no {stem}.parquet, {stem}/ or {stem}.csv; is it a dataset?")


def _rows(source: pa.Table | pds.Dataset, ids: list[str]) -> pa.Table:
    if isinstance(source, pa.Table):
        return source.filter(pc.is_in(source["episode_id"], value_set=pa.array(ids)))
    return source.to_table(filter=pds.field("episode_id").isin(ids))


def plan_export(event_id: str, run: Path, dataset: Path | None = None,
                max_sim: int = 5) -> ExportPlan:
    """Find the event in ``run``'s report and read the signals of it and its sim neighbours.

    Raises:
        IngestError: no report, no such event, or the dataset lacks the episodes.
    """
    report = _report(run)
    events = {e.get("episode_id"): e for e in report.get("events", [])}
    if event_id not in events:
        shown = ", ".join(list(events)[:5]) or "none"
        raise IngestError(f"{run}: event {event_id!r} is not in the report; events: {shown}...")
    sims = [str(s) for s in events[event_id].get("nearest_sim", [])][:max_sim]
    root = dataset or Path(str(report.get("dataset", {}).get("path") or ""))
    if not str(root) or not root.exists():
        raise IngestError(f"{run}: the report names no dataset path; pass --dataset DATASET")
    episodes = _rows(pq.read_table(root / "episodes.parquet") if (
        root / "episodes.parquet").exists() else _table(root, "episodes"), [event_id])
    if episodes.num_rows == 0:
        raise IngestError(f"{root}: episode {event_id!r} is not in the dataset")
    row = episodes.to_pylist()[0]
    started = row.get("started_at")
    start_ns = int(started.timestamp() * 1e9) if hasattr(started, "timestamp") else 0
    signals = _rows(_table(root, "signals"), [event_id, *sims])
    if "channel" in signals.column_names:  # the long layout: one column per channel here
        names = sorted(set(signals["channel"].cast(pa.string()).to_pylist()) - {None})
        signals = to_wide(signals, names)
    event = dict(events[event_id])
    clusters = {c.get("cluster_id"): c for c in report.get("clusters", []) if isinstance(c, dict)}
    if event.get("cluster_id") in clusters:
        event["taxonomy"] = clusters[event["cluster_id"]].get("taxonomy")
    return ExportPlan(event_id, event_id, sims, signals, row.get("failure_time"),
                      row.get("failure_label"), start_ns, event)


def _series(plan: ExportPlan) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``(entity path, t seconds, values)`` of every non-empty channel of every episode."""
    out = []
    channels = [c for c in plan.signals.column_names if c not in ("episode_id", "t")]
    for episode_id in [plan.real_id, *plan.sim_ids]:
        rows = plan.signals.filter(pc.equal(plan.signals["episode_id"], episode_id))
        rows = rows.sort_by("t")
        base = "/real" if episode_id == plan.real_id else f"/sim/{episode_id}"
        t = rows["t"].to_numpy().astype(np.float64)
        for name in channels:
            values = rows[name].cast(pa.float64()).to_numpy(zero_copy_only=False)
            keep = ~np.isnan(values)
            if keep.any():
                out.append((f"{base}/{name}", t[keep], values[keep]))
    return out


def _stamp(ns: int) -> dict[str, int]:
    return {"sec": ns // 1_000_000_000, "nsec": ns % 1_000_000_000}


def _write_mcap(plan: ExportPlan, path: Path) -> None:
    writer_mod = require("mcap.writer", "ingest")
    with path.open("wb") as f:
        writer = writer_mod.Writer(f)
        writer.start(profile="", library="sim2real export")
        scalar = writer.register_schema("sim2real.Scalar", "jsonschema",
                                        json.dumps(_SCALAR_SCHEMA).encode())
        for topic, t, values in _series(plan):
            channel = writer.register_channel(topic, "json", scalar)
            stamps = plan.start_ns + np.rint(t * 1e9).astype(np.int64)
            for ns_, vi in zip(stamps.tolist(), values.tolist(), strict=True):
                ns = int(ns_)
                data = json.dumps({"timestamp": _stamp(ns), "value": vi}).encode()
                writer.add_message(channel, log_time=ns, data=data, publish_time=ns)
        if plan.failure_time is not None:
            _write_failure(writer, plan)
        writer.add_metadata("sim2real.export", {"event_id": plan.event_id,
                                                "nearest_sim": ",".join(plan.sim_ids)})
        writer.finish()


def _write_failure(writer: Any, plan: ExportPlan) -> None:
    assert plan.failure_time is not None
    ns = plan.start_ns + round(float(plan.failure_time) * 1e9)
    label = plan.failure_label or "failure"
    event = writer.register_schema("foxglove.Event", "jsonschema",
                                   json.dumps(_EVENT_SCHEMA).encode())
    log = writer.register_schema("foxglove.Log", "jsonschema", json.dumps(_LOG_SCHEMA).encode())
    facts = {"episode_id": plan.event_id, "label": label}
    for key in ("cluster_id", "taxonomy", "drift_score"):
        if plan.report_event.get(key) is not None:
            facts[key] = str(plan.report_event[key])
    body = {"start_time": _stamp(ns), "end_time": _stamp(ns),
            "metadata": [{"key": k, "value": v} for k, v in facts.items()]}
    writer.add_message(writer.register_channel("/events", "json", event), log_time=ns,
                       data=json.dumps(body).encode(), publish_time=ns)
    text = {"timestamp": _stamp(ns), "level": 4, "message": f"{plan.event_id}: {label}",
            "name": "sim2real", "file": "", "line": 0}
    writer.add_message(writer.register_channel("/real/failure", "json", log), log_time=ns,
                       data=json.dumps(text).encode(), publish_time=ns)


def _write_rerun(plan: ExportPlan, path: Path) -> None:
    rr = require("rerun", extra="rerun")
    rec = rr.RecordingStream("sim2real", recording_id=plan.event_id)
    rec.save(str(path))
    for entity, t, values in _series(plan):
        rec.send_columns(entity, indexes=[rr.TimeColumn("time", duration=t)],
                         columns=rr.Scalars.columns(scalars=values))
    if plan.failure_time is not None:
        text = f"{plan.event_id}: {plan.failure_label or 'failure'}"
        rec.send_columns("/events", indexes=[rr.TimeColumn("time", duration=[plan.failure_time])],
                         columns=rr.TextLog.columns(text=[text], level=["ERROR"]))
    rec.flush()
    rec.disconnect()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_WRITERS: dict[str, Callable[[ExportPlan, Path], None]] = {"mcap": _write_mcap,
                                                           "rerun": _write_rerun}


def export_event(event_id: str, out: str | Path, *, run: str | Path = ".",
                 dataset: str | Path | None = None, fmt: Format = "mcap") -> Path:
    """Write the event's real episode and nearest sim rollouts to ``out`` (atomically).

    Raises:
        IngestError: the report, event or dataset cannot be found, or the format's
            package is missing (``sim2real[ingest]`` for MCAP, ``sim2real[rerun]``).
    """
    plan = plan_export(event_id, Path(run), Path(dataset) if dataset else None)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    try:
        _WRITERS[fmt](plan, Path(tmp))
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; exports are shared
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out

"""Episode facts (task, outcome, failure time, ctx.*...) from wherever a team keeps them.

One resolver for every format: a constant, the file name or whole path (labels kept in
folder names), a sidecar CSV row, an MCAP metadata record or rosbag2's ``custom_data``, an
HDF5 attribute, a LeRobot frame column, or a message on a topic. Values come out typed:
empty strings are missing, numbers stay numbers, ``ctx.*``/``param.*`` strings that read
as numbers become numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from sim2real.errors import IngestError
from sim2real.ingest._tables import EpisodeDefaults, episodes_table, read_sidecar, to_timestamp
from sim2real.ingest.fields import FieldPathError, get_field, parse_field
from sim2real.ingest.mapping import Mapping as IngestMapping
from sim2real.ingest.mapping import ValueSource, matches

__all__ = ["FACT_KEYS", "Facts", "apply_facts", "apply_sidecar", "finish_rows", "outcome_of",
           "resolve"]

FACT_KEYS = ("source", "task", "deployment", "robot_id", "site", "started_at", "outcome",
             "failure_time", "failure_label")
_OUTCOMES = {"success": "success", "succeeded": "success", "true": "success", "1": "success",
             "ok": "success", "1.0": "success", "failure": "failure", "failed": "failure",
             "fail": "failure", "false": "failure", "0": "failure", "0.0": "failure"}


@dataclass(frozen=True)
class Facts:
    """Where one episode's values may come from.

    Attributes:
        where: how messages name the episode (``file: episode 'x'``).
        path: the recording (file or folder).
        sidecar: the episode's sidecar row (empty when none).
        metadata: metadata records, name -> key -> text (MCAP records, rosbag2
            ``custom_data``).
        attr: an HDF5 attribute by name (the demo's, else the file's), ``None`` if absent.
        frames: a LeRobot episode's frames.
        events: messages of value topics, ``(time ns, message)``, per topic.
        window: ``(start, end)`` ns of the episode, the end including the grace.
    """

    where: str
    path: Path
    sidecar: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    attr: Callable[[str], Any] | None = None
    frames: pa.Table | None = None
    events: Mapping[str, list[tuple[int, Any]]] = field(default_factory=dict)
    window: tuple[int, int] = (0, 0)


def _plain(value: Any) -> Any:
    """NumPy scalars and bytes as Python values; an empty or blank string as missing."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    if isinstance(value, str) and not value.strip():
        return None
    return value


def _pick(values: list[Any], pick: str) -> Any:
    if not values:
        return None
    if pick == "any":  # a success flagged on any frame (next.success is set where it happens)
        return any(bool(v) for v in values if v is not None)
    return values[0] if pick == "first" else values[-1]


def _from_topic(src: ValueSource, facts: Facts, what: str) -> Any:
    assert src.topic is not None
    start, end = facts.window
    hits = [(t, m) for t, m in facts.events.get(src.topic, [])
            if start <= t <= end and matches(m, src.where)]
    if not hits:
        return None
    if src.field is None:
        stamp = _pick([t for t, _ in hits], "last" if src.pick == "last" else "first")
        return (stamp - start) / 1e9 if what == "failure_time" else "present"
    values = []
    for _, message in hits:
        try:
            values.append(_plain(get_field(message, parse_field(src.field))))
        except FieldPathError as err:
            if src.optional:
                continue
            raise IngestError(f"{facts.where}: topic {src.topic!r}: {what} field "
                              f"{src.field!r}: {err}") from err
    return _pick(values, src.pick)


def _from_frames(src: ValueSource, facts: Facts, what: str) -> Any:
    assert src.feature is not None
    if facts.frames is None or src.feature not in facts.frames.column_names:
        if src.optional or facts.frames is None:
            return None
        msg = (f"{facts.where}: {what}: no frame column {src.feature!r}; columns: "
               f"{', '.join(facts.frames.column_names)}")
        raise IngestError(msg)
    values = [_plain(v) for v in facts.frames[src.feature].to_pylist()]
    values = [v[0] if isinstance(v, list) and len(v) == 1 else v for v in values]
    return _pick(values, src.pick)


def _raw(src: ValueSource, facts: Facts, what: str) -> Any:
    if src.value is not None:
        return src.value
    for pattern, text in ((src.filename, facts.path.name), (src.path, facts.path.as_posix())):
        if pattern is not None:
            found = re.search(pattern, text)
            if found is None:
                return None
            return found.group(1) if found.groups() else found.group(0)
    if src.csv is not None:
        return facts.sidecar.get(src.csv)
    if src.metadata is not None:
        return facts.metadata.get(src.metadata, {}).get(src.key or "")
    if src.attr is not None:
        return None if facts.attr is None else facts.attr(src.attr)
    if src.feature is not None:
        return _from_frames(src, facts, what)
    return _from_topic(src, facts, what)


def resolve(src: ValueSource | None, facts: Facts, what: str) -> Any:
    """The value ``src`` gives for the episode of ``facts`` (``None``: none), typed.

    Raises:
        IngestError: a field path that does not exist, a value that is not the type asked.
    """
    if src is None:
        return None
    raw = _plain(_raw(src, facts, what))
    if src.topic is not None and src.field is None and what != "failure_time":
        raw = raw or "absent"
    if src.map is not None and raw is not None:
        raw = src.map.get(str(raw), src.map.get(str(raw).lower(), raw))
    return _typed(raw, src.type, what, facts.where)


def _typed(value: Any, kind: str | None, what: str, where: str) -> Any:
    wants_number = kind == "number" or (kind is None and (
        what == "failure_time" or what.startswith(("ctx.", "param."))))
    if value is None or isinstance(value, bool) or not wants_number:
        return str(value) if kind == "string" and value is not None else value
    try:
        return float(value)
    except (TypeError, ValueError) as err:
        if kind is None and what.startswith("ctx."):
            return value  # a categorical context value
        msg = f"{where}: {what} {value!r} is not a number"
        raise IngestError(msg) from err


def outcome_of(value: Any, where: str) -> str | None:
    """``success``/``failure`` from the usual spellings (``true``, ``1``, ``succeeded``...).

    Raises:
        IngestError: anything else.
    """
    if value is None:
        return None
    found = _OUTCOMES.get(str(value).strip().lower())
    if found is None:
        msg = f"{where}: outcome {value!r} is neither success nor failure; add a map: to it"
        raise IngestError(msg)
    return found


def _column_value(name: str, value: Any, where: str) -> Any:
    """A value as its episodes column holds it."""
    if name == "outcome":
        return outcome_of(value, where)
    if name == "started_at":
        return to_timestamp(value, where)
    if name in FACT_KEYS and name != "failure_time":
        return str(value)
    return _typed(value, None, name, where)


def apply_facts(row: dict[str, Any], mapping: IngestMapping, facts: Facts) -> dict[str, Any]:
    """``row`` with every value the mapping gives (values it does not give are kept).

    Raises:
        IngestError: a value cannot be read or typed; names the episode and the key.
    """
    for name in FACT_KEYS:
        if name not in mapping.model_fields_set and row.get(name) is not None:
            continue  # a default of the mapping (source: real) never overrides the source
        value = resolve(getattr(mapping, name), facts, name)
        if value is not None:
            row[name] = _column_value(name, value, facts.where)
    for prefix, specs in (("ctx.", mapping.ctx), ("sys.", mapping.sys), ("param.", mapping.param)):
        for name, spec in specs.items():
            value = resolve(spec, facts, prefix + name)
            if value is not None or prefix + name not in row:
                row[prefix + name] = value
    return row


def _own_key(name: Any) -> str:
    """A recording's own episode name as a sidecar key: ``000005`` and ``5`` meet."""
    text = str(name).strip()
    return str(int(text)) if text.isdigit() else text


def apply_sidecar(rows: list[dict[str, Any]], path: Path, key: str = "episode_id") -> None:
    """Overwrite episode fields with a sidecar's non-empty cells, typed.

    A sidecar row matches an episode by its ID or by the recording's own name for it
    (``_name``: a LeRobot episode index, a robomimic demo); columns named like episode
    columns (``outcome``, ``ctx.object``...) land there.
    """
    table = read_sidecar(path, key)
    by_name = {_own_key(k): v for k, v in table.items()}
    for row in rows:
        extra = table.get(str(row["episode_id"])) or by_name.get(_own_key(row.get("_name", "")))
        for name, cell in (extra or {}).items():
            value = _plain(cell)
            if name != key and value is not None:
                row[name] = _column_value(name, value, f"{path}: {key} {row['episode_id']!r}")


def finish_rows(rows: list[dict[str, Any]], defaults: EpisodeDefaults,
                mapping: IngestMapping | None = None,
                facts: list[Facts] | None = None) -> pa.Table:
    """The episodes table of a tabular source: what it said, then what the ``mapping``
    finds in ``facts`` (one per row), then the given defaults, then the sidecar."""
    defaults.check()
    for row, found in zip(rows, facts or [], strict=False):
        if mapping is not None:
            apply_facts(row, mapping, found)
    for row in rows:
        for name in ("source", "task", "deployment", "outcome", "started_at"):
            if getattr(defaults, name) is not None:
                row[name] = getattr(defaults, name)
    if defaults.sidecar is not None:
        apply_sidecar(rows, defaults.sidecar)
    for row in rows:
        row.pop("_name", None)
    return episodes_table(rows)

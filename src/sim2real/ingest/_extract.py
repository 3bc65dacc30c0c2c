"""One pass over a recording: the numbers, frame statistics and markers a mapping asks for."""

from __future__ import annotations

import gc
import math
import numbers
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sim2real.errors import IngestError
from sim2real.ingest._source import RecordingReader, TopicInfo
from sim2real.ingest.fields import FieldPathError, Step, get_field, parse_field
from sim2real.ingest.images import STATS, decode_image, frame_stats, is_image_type
from sim2real.ingest.mapping import Mapping

__all__ = ["Extracted", "Series", "extract"]

Progress = Callable[[int], None]


@dataclass
class Series:
    """Samples of one topic: ``times`` ``(n,)`` int64 ns, ``values`` ``(n, k)`` float64."""

    columns: list[str]
    times: np.ndarray
    values: np.ndarray
    hists: np.ndarray | None = None
    """Image topics: ``(n, bins)`` colour histograms, for the distance to the first frame."""


@dataclass
class Extracted:
    """What a recording gave: numeric series per topic, and raw messages of value topics."""

    series: dict[str, Series] = field(default_factory=dict)
    events: dict[str, list[tuple[int, Any]]] = field(default_factory=dict)
    messages: int = 0


_Group = tuple[Callable[[Any], Any], list[tuple[int, int | None]], list[Any]]
"""A field getter, the ``(column, index)`` pairs it feeds, and its values per message."""


@dataclass
class _Topic:
    """How to turn one topic's messages into a row of floats."""

    columns: list[str]
    paths: list[tuple[Step, ...]]
    sources: list[str]
    times: list[int] = field(default_factory=list)
    fast: list[_Group] | None = None


def _header_ns(message: Any, log_time: int) -> int:
    """Stamp of a ROS ``header.stamp`` or a Foxglove ``timestamp`` in ns, else the log time.

    Messages without a stamp (``std_msgs/String`` markers) keep their log time.
    """
    for path in (("header", "stamp"), ("timestamp",)):
        try:
            stamp = get_field(message, path)
        except FieldPathError:
            continue
        sec = get_field(stamp, ("sec",))
        nsec = get_field(stamp, ("nanosec",)) if _has(stamp, "nanosec") else get_field(
            stamp, ("nsec",))
        return int(sec) * 1_000_000_000 + int(nsec)
    return log_time


def _has(obj: Any, name: str) -> bool:
    return name in obj if isinstance(obj, dict) else hasattr(obj, name)


def _value_topics(mapping: Mapping) -> set[str]:
    sources = [mapping.task, mapping.source, mapping.deployment, mapping.robot_id, mapping.site,
               mapping.started_at, mapping.outcome, mapping.failure_time, mapping.failure_label,
               *mapping.ctx.values(), *mapping.sys.values(), *mapping.param.values()]
    topics = {s.topic for s in sources if s is not None and s.topic}
    for cond in (mapping.episodes.start, mapping.episodes.end):
        if cond is not None:
            topics.add(cond.topic)
    return topics


def _plan(mapping: Mapping, topics: dict[str, TopicInfo], where: str) -> dict[str, _Topic]:
    """Check every mapped topic exists; group channels by topic."""
    plan: dict[str, _Topic] = {}
    for i, spec in enumerate(mapping.channels):
        _require_topic(spec.topic, topics, where, f"channels[{i}]")
        entry = plan.setdefault(spec.topic, _Topic([], [], []))
        entry.columns.append(spec.name)
        entry.paths.append(spec.steps)
        entry.sources.append(spec.source)
    for i, image in enumerate(mapping.images):
        _require_topic(image.topic, topics, where, f"images[{i}]")
        if not is_image_type(topics[image.topic].msgtype):
            msg = (f"{where}: topic {image.topic!r} (images[{i}]) carries "
                   f"{topics[image.topic].msgtype!r}; expected sensor_msgs/Image, "
                   "CompressedImage, foxglove.RawImage or foxglove.CompressedImage")
            raise IngestError(msg)
    for cond, key in ((mapping.episodes.start, "episodes.start"),
                      (mapping.episodes.end, "episodes.end")):
        if cond is not None:
            _require_topic(cond.topic, topics, where, key)
    return plan


def _require_topic(topic: str, topics: dict[str, TopicInfo], where: str, key: str) -> None:
    if topic not in topics:
        found = ", ".join(sorted(topics)) or "none"
        msg = f"{where}: topic {topic!r} (mapping {key}) is not in the recording; topics: {found}"
        raise IngestError(msg)


def _number(value: Any, where: str, topic: str, source: str) -> float:
    if isinstance(value, numbers.Real):
        return float(value)
    msg = (f"{where}: topic {topic!r} field {source!r} holds {type(value).__name__} "
           f"{str(value)[:40]!r}; expected a number")
    raise IngestError(msg)


def _row(entry: _Topic, message: Any, where: str, topic: str, strict: bool) -> list[float]:
    row: list[float] = []
    for path, source in zip(entry.paths, entry.sources, strict=True):
        try:
            row.append(_number(get_field(message, path), where, topic, source))
        except FieldPathError as err:
            if strict:  # the first message decides whether the path exists at all
                msg = f"{where}: topic {topic!r}: field path {source!r} does not exist: {err}"
                raise IngestError(msg) from err
            row.append(math.nan)  # e.g. an empty velocity array in one message
    return row


def _getter(steps: tuple[Step, ...], sample: Any) -> Callable[[Any], Any]:
    """A fast accessor for ``steps``: one ``attrgetter`` when the message is an object."""
    if not isinstance(sample, dict) and all(isinstance(st, str) for st in steps):
        return operator.attrgetter(".".join(str(st) for st in steps))
    getters = [operator.itemgetter(st) if isinstance(st, int) or isinstance(sample, dict)
               else operator.attrgetter(st) for st in steps]

    def chain(obj: Any) -> Any:
        for get in getters:
            obj = get(obj)
        return obj

    return chain


def _compile(entry: _Topic, sample: Any) -> list[_Group]:
    """Group channels by the field they read, so ``position[0..6]`` is fetched once."""
    groups: dict[tuple[Step, ...], list[tuple[int, int | None]]] = {}
    for j, steps in enumerate(entry.paths):
        last = steps[-1]
        base, index = (steps[:-1], last) if isinstance(last, int) and len(steps) > 1 else (
            steps, None)
        groups.setdefault(base, []).append((j, index))
    return [(_getter(base, sample), items, []) for base, items in groups.items()]


def _collect(entry: _Topic, message: Any, where: str, topic: str) -> None:
    """Keep each group's field value of one message; numbers are pulled out at the end."""
    if entry.fast is None:  # first message: check every path strictly, then go fast
        _row(entry, message, where, topic, strict=True)
        entry.fast = _compile(entry, message)
    for get, items, buffer in entry.fast:
        try:
            value = get(message)
        except (AttributeError, IndexError, KeyError, TypeError):
            value = None
        if items[0][1] is not None and hasattr(value, "__len__") and len(value) > 64:
            # Keep only the used elements of long arrays, not whole message buffers.
            size = len(value)
            value = ("picked", [value[i] if -size <= i < size else math.nan
                                for i in _indices(items)])
        buffer.append(value)


def _indices(items: list[tuple[int, int | None]]) -> list[int]:
    return [i for _, i in items if i is not None]


def _group_values(items: list[tuple[int, int | None]], buffer: list[Any]) -> np.ndarray:
    """``(n_messages, len(items))`` floats of one group; NaN where a message lacked it."""
    if items[0][1] is None:
        try:
            return np.asarray(buffer, dtype=np.float64).reshape(len(buffer), 1)
        except (TypeError, ValueError):
            pass
    elif buffer and not isinstance(buffer[0], tuple):
        try:
            arr = np.asarray(buffer, dtype=np.float64)
            wanted = _indices(items)
            if arr.ndim == 2 and all(-arr.shape[1] <= i < arr.shape[1] for i in wanted):
                return arr[:, wanted]
        except (TypeError, ValueError):
            pass  # ragged or mixed: element by element below
    out = np.full((len(buffer), len(items)), np.nan)
    for k, value in enumerate(buffer):
        if isinstance(value, tuple) and len(value) == 2 and value[0] == "picked":
            out[k] = np.asarray(value[1], dtype=np.float64)
            continue
        for c, (_, index) in enumerate(items):
            try:
                out[k, c] = float(value if index is None else value[index])
            except (IndexError, TypeError, KeyError):
                continue  # e.g. an empty velocity array in this message: null
    return out


def _matrix(entry: _Topic, where: str, topic: str) -> np.ndarray:
    out = np.full((len(entry.times), len(entry.columns)), np.nan)
    for _, items, buffer in entry.fast or []:
        try:
            values = _group_values(items, buffer)
        except ValueError as err:  # a later message put a non-number where numbers were
            names = ", ".join(repr(entry.sources[j]) for j, _ in items)
            msg = f"{where}: topic {topic!r}: field {names} holds a non-number; expected numbers"
            raise IngestError(msg) from err
        out[:, [j for j, _ in items]] = values
    return out


def _extract_all(reader: RecordingReader, mapping: Mapping,
            progress: Progress | None = None) -> Extracted:
    """Read every message the mapping uses, once, in time order.

    Raises:
        IngestError: a mapped topic or field is missing, a value is not a number, an image
            does not decode; the message names the file and topic.
    """
    where = str(reader.path)
    topics = reader.topics()
    plan = _plan(mapping, topics, where)
    image_topics = {i.topic for i in mapping.images}
    value_topics = {t for t in _value_topics(mapping) if t in topics}
    images: dict[str, tuple[list[int], list[np.ndarray], list[np.ndarray]]] = {  # t, stat, hist
        t: ([], [], []) for t in image_topics}
    out = Extracted(events={t: [] for t in value_topics})
    header = mapping.time == "header"
    wanted = set(plan) | image_topics | value_topics
    for n, (topic, log_time, message) in enumerate(reader.messages(wanted), start=1):
        stamp = _header_ns(message, log_time) if header else log_time
        if topic in plan:
            entry = plan[topic]
            _collect(entry, message, where, topic)
            entry.times.append(stamp)
        if topic in images:
            try:
                stats, hist = frame_stats(decode_image(message, topics[topic].msgtype))
            except IngestError as err:
                raise IngestError(f"{where}: topic {topic!r} at {log_time} ns: {err}") from err
            bucket = images[topic]
            bucket[0].append(stamp)
            bucket[1].append(stats)
            bucket[2].append(hist)
        if topic in out.events:
            out.events[topic].append((stamp, message))
        out.messages = n
        if progress is not None and n % 2000 == 0:
            progress(2000)
    if progress is not None:
        progress(out.messages % 2000)
    for topic, entry in plan.items():
        out.series[topic] = Series(entry.columns, np.asarray(entry.times, dtype=np.int64),
                                   _matrix(entry, where, topic))
    for spec in mapping.images:
        frame_times, frame_values, frame_hists = images[spec.topic]
        out.series[spec.topic] = Series(
            [f"{spec.column_prefix}_{s}" for s in STATS],
            np.asarray(frame_times, dtype=np.int64),
            np.asarray(frame_values, dtype=np.float64).reshape(len(frame_values), len(STATS)),
            np.asarray(frame_hists, dtype=np.float64) if frame_hists else np.zeros((0, 0)))
    return out


def condition_matches(message: Any, field_path: str | None, equals: Any) -> bool:
    """Whether a marker message satisfies ``field == equals`` (any message when no field)."""
    if field_path is None:
        return True
    try:
        value = get_field(message, parse_field(field_path))
    except FieldPathError:
        return False
    return equals is None or str(value).lower() == str(equals).lower()


def extract(reader: RecordingReader, mapping: Mapping,
            progress: Progress | None = None) -> Extracted:
    """Read every message the mapping uses, once, in time order.

    The cyclic garbage collector is paused meanwhile: the loop allocates millions of small
    lists that hold no cycles, and collections over them cost more than the decoding.

    Raises:
        IngestError: a mapped topic or field is missing, a value is not a number, an image
            does not decode; the message names the file and topic.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _extract_all(reader, mapping, progress)
    finally:
        if enabled:
            gc.enable()

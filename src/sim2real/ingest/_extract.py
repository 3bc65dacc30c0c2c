"""One pass over a recording: the numbers, frame statistics and markers a mapping asks for.

Every channel keeps its own message times. The pass reads what any variant of the mapping
(``real:`` / ``sim:``) could need; which of it an episode uses, and whether a missing topic
or field is an error there, is decided once the episode's source is known.
"""

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
from sim2real.ingest.fields import ByKey, FieldPathError, Step, get_field, parse_field
from sim2real.ingest.images import STATS, decode_image, frame_stats, is_image_type
from sim2real.ingest.mapping import ChannelSpec, ImageSpec, Mapping, Scalar

__all__ = ["Extracted", "ImageSeries", "Plan", "extract", "plan_of", "to_float"]

Progress = Callable[[int], None]


@dataclass(frozen=True)
class Plan:
    """What to read: the channels and image topics of every variant, and the topics whose
    messages episode values and markers come from.

    ``positions`` maps each variant's spec objects (by ``id``: specs hold dicts, so they
    do not hash) to their entry in ``channels`` or ``images``.
    """

    channels: list[ChannelSpec]
    images: list[ImageSpec]
    value_topics: set[str]
    positions: dict[int, int]

    def channel_index(self, spec: ChannelSpec) -> int:
        return self.positions[id(spec)]

    def image_index(self, spec: ImageSpec) -> int:
        return self.positions[id(spec)]


def plan_of(mapping: Mapping) -> Plan:
    """The channels and image topics of ``mapping`` and its variants, each once."""
    channels: list[ChannelSpec] = []
    images: list[ImageSpec] = []
    positions: dict[int, int] = {}
    for variant in mapping.all_variants:
        for specs, found in ((variant.channels, channels), (variant.images, images)):
            for spec in specs:
                if spec not in found:
                    found.append(spec)  # type: ignore[arg-type]
                positions[id(spec)] = found.index(spec)  # type: ignore[arg-type]
    topics = {t for s in mapping.value_sources() for t in s.topics}
    for cond in (mapping.episodes.start, mapping.episodes.end):
        if cond is not None:
            topics.add(cond.topic)
    return Plan(channels, images, topics, positions)


@dataclass
class ImageSeries:
    """Frames of one image topic: ``times`` ``(n,)`` ns, ``stats`` ``(n, len(STATS))``,
    ``hists`` ``(n, bins)`` colour histograms (for the distance to the first frame)."""

    times: np.ndarray
    stats: np.ndarray
    hists: np.ndarray


@dataclass
class Extracted:
    """What a recording gave.

    Attributes:
        channels: per channel of the plan, ``(times ns, values)``; NaN where a message
            lacked the field.
        images: per image topic of the plan, its frames.
        problems: per channel (``("channel", i)``) or image (``("image", i)``) of the plan
            that could not be read, why (a missing topic, a field that does not exist);
            an error or a warning once it is known whether the episode needs it.
        events: raw messages of the value and marker topics, ``(time ns, message)``.
        topics: every topic of the recording.
        metadata: the recording's metadata records (name -> key -> value).
        messages: messages read.
    """

    channels: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    images: dict[int, ImageSeries] = field(default_factory=dict)
    problems: dict[tuple[str, int], str] = field(default_factory=dict)
    events: dict[str, list[tuple[int, Any]]] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    metadata: dict[str, dict[str, str]] = field(default_factory=dict)
    messages: int = 0


_Getter = Callable[[Any], Any]
_Item = tuple[int, int | None]
"""A channel of the group (its index in the plan) and the element it takes of the value."""


@dataclass
class _Group:
    """The channels read from one topic under one ``where`` filter, grouped by the field
    they read, so that ``position[0..6]`` is fetched once per message."""

    where: list[tuple[tuple[Step, ...], str]]
    specs: list[int]
    times: list[int] = field(default_factory=list)
    fields: list[tuple[_Getter, list[_Item], list[Any]]] | None = None

    def wants(self, message: Any) -> bool:
        for steps, wanted in self.where:
            try:
                if str(get_field(message, steps)).strip().lower() != wanted:
                    return False
            except FieldPathError:
                return False
        return True


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


def to_float(value: Any) -> float:
    """A number, or a string holding one (``KeyValue.value`` is a string by definition);
    an empty string is a missing value (NaN).

    Raises:
        ValueError: anything else.
    """
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, str | bytes):
        text = value.strip()
        return math.nan if not text else float(text)
    raise ValueError(f"{type(value).__name__} {str(value)[:40]!r}")


def _groups(plan: Plan, topics: dict[str, TopicInfo], where: str,
            problems: dict[tuple[str, int], str]) -> dict[str, list[_Group]]:
    """The plan's channels grouped by topic and filter; missing topics become problems."""
    out: dict[str, list[_Group]] = {}
    for i, spec in enumerate(plan.channels):
        if spec.topic not in topics:
            problems[("channel", i)] = _missing_topic(spec.topic, topics, where)
            continue
        filt = [(parse_field(p), str(v).strip().lower()) for p, v in (spec.where or {}).items()]
        groups = out.setdefault(spec.topic, [])
        group = next((g for g in groups if g.where == filt), None)
        if group is None:
            group = _Group(filt, [])
            groups.append(group)
        group.specs.append(i)
    return out


def _missing_topic(topic: str, topics: dict[str, TopicInfo], where: str) -> str:
    found = ", ".join(sorted(topics)) or "none"
    return f"{where}: topic {topic!r} is not in the recording; topics: {found}"


def _check_first(group: _Group, plan: Plan, message: Any, where: str, topic: str,
                 problems: dict[tuple[str, int], str]) -> None:
    """Check each channel's field on the group's first message; a channel whose field does
    not exist or holds no number becomes a problem and is not read further."""
    kept = []
    for i in group.specs:
        source = plan.channels[i].source
        try:
            to_float(get_field(message, plan.channels[i].steps))
        except FieldPathError as err:
            problems[("channel", i)] = (f"{where}: topic {topic!r}: field path {source!r} does "
                                        f"not exist: {err}")
            continue
        except ValueError as err:
            problems[("channel", i)] = (f"{where}: topic {topic!r} field {source!r} holds "
                                        f"{err}; expected a number")
            continue
        kept.append(i)
    group.specs = kept
    group.fields = _compile(plan, kept, message)


def _getter(steps: tuple[Step, ...], sample: Any) -> _Getter:
    """A fast accessor for ``steps``: one ``attrgetter`` when the message is an object."""
    if not isinstance(sample, dict) and all(isinstance(st, str) for st in steps):
        return operator.attrgetter(".".join(str(st) for st in steps))
    if any(isinstance(st, ByKey) for st in steps):
        return lambda obj: get_field(obj, steps)
    getters = [operator.itemgetter(st) if isinstance(st, int) or isinstance(sample, dict)
               else operator.attrgetter(str(st)) for st in steps]

    def chain(obj: Any) -> Any:
        for get in getters:
            obj = get(obj)
        return obj

    return chain


def _compile(plan: Plan, specs: list[int],
             sample: Any) -> list[tuple[_Getter, list[_Item], list[Any]]]:
    fields: dict[tuple[Step, ...], list[_Item]] = {}
    for i in specs:
        steps = plan.channels[i].steps
        last = steps[-1]
        base, index = (steps[:-1], last) if isinstance(last, int) and len(steps) > 1 else (
            steps, None)
        fields.setdefault(base, []).append((i, index))
    return [(_getter(base, sample), items, []) for base, items in fields.items()]


def _collect(group: _Group, message: Any) -> None:
    """Keep each field's value of one message; numbers are pulled out at the end."""
    for get, items, buffer in group.fields or []:
        try:
            value = get(message)
        except (AttributeError, IndexError, KeyError, TypeError, FieldPathError):
            value = None
        if items[0][1] is not None and hasattr(value, "__len__") and len(value) > 64:
            # Keep only the used elements of long arrays, not whole message buffers.
            size = len(value)
            value = ("picked", [value[i] if -size <= i < size else math.nan
                                for i in _indices(items)])
        buffer.append(value)


def _indices(items: list[_Item]) -> list[int]:
    return [i for _, i in items if i is not None]


def _field_values(items: list[_Item], buffer: list[Any]) -> np.ndarray:
    """``(n_messages, len(items))`` floats of one field; NaN where a message lacked it.

    Raises:
        ValueError: a value that is neither a number nor a numeric string.
    """
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
            pass  # ragged, mixed or strings: element by element below
    out = np.full((len(buffer), len(items)), np.nan)
    for k, value in enumerate(buffer):
        if isinstance(value, tuple) and len(value) == 2 and value[0] == "picked":
            out[k] = [to_float(v) for v in value[1]]
            continue
        for c, (_, index) in enumerate(items):
            try:
                element = value if index is None else value[index]
            except (IndexError, TypeError, KeyError):
                continue  # e.g. an empty velocity array in this message: null
            if element is not None:
                out[k, c] = to_float(element)
    return out


def _finish(group: _Group, plan: Plan, where: str, topic: str, out: Extracted) -> None:
    times = np.asarray(group.times, dtype=np.int64)
    for _, items, buffer in group.fields or []:
        try:
            values = _field_values(items, buffer)
        except ValueError as err:  # a later message put a non-number where numbers were
            for i, _ in items:
                out.problems[("channel", i)] = (
                    f"{where}: topic {topic!r}: field {plan.channels[i].source!r} holds {err}; "
                    "expected numbers")
            continue
        for c, (i, _) in enumerate(items):
            out.channels[i] = (times, values[:, c])


def _image_plan(plan: Plan, topics: dict[str, TopicInfo], where: str,
                problems: dict[tuple[str, int], str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, image in enumerate(plan.images):
        if image.topic not in topics:
            problems[("image", i)] = _missing_topic(image.topic, topics, where)
            continue
        if not is_image_type(topics[image.topic].msgtype):
            msg = (f"{where}: topic {image.topic!r} (images[{i}]) carries "
                   f"{topics[image.topic].msgtype!r}; expected sensor_msgs/Image, "
                   "CompressedImage, foxglove.RawImage or foxglove.CompressedImage")
            raise IngestError(msg)
        out.setdefault(image.topic, []).append(i)
    return out


def _extract_all(reader: RecordingReader, mapping: Mapping, plan: Plan,
                 progress: Progress | None) -> Extracted:
    where = str(reader.path)
    out = Extracted(topics=reader.topics(), metadata=reader.metadata())
    groups = _groups(plan, out.topics, where, out.problems)
    images = _image_plan(plan, out.topics, where, out.problems)
    frames: dict[str, tuple[list[int], list[np.ndarray], list[np.ndarray]]] = {
        t: ([], [], []) for t in images}
    for cond, key in ((mapping.episodes.start, "episodes.start"),
                      (mapping.episodes.end, "episodes.end")):
        if cond is not None and cond.topic not in out.topics:
            msg = _missing_topic(cond.topic, out.topics, where)
            raise IngestError(msg.replace(" is not", f" (mapping {key}) is not"))
    out.events = {t: [] for t in plan.value_topics if t in out.topics}
    header = mapping.time == "header"
    wanted = set(groups) | set(images) | set(out.events)
    for n, (topic, log_time, message) in enumerate(reader.messages(wanted), start=1):
        stamp = _header_ns(message, log_time) if header else log_time
        for group in groups.get(topic, ()):
            if group.where and not group.wants(message):
                continue
            if group.fields is None:  # first message: check every path, then go fast
                _check_first(group, plan, message, where, topic, out.problems)
            _collect(group, message)
            group.times.append(stamp)
        if topic in frames:
            try:
                stats, hist = frame_stats(decode_image(message, out.topics[topic].msgtype))
            except IngestError as err:
                raise IngestError(f"{where}: topic {topic!r} at {log_time} ns: {err}") from err
            bucket = frames[topic]
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
    for messages in out.events.values():  # readers may give a file's order, not time order
        messages.sort(key=lambda m: m[0])
    for topic, topic_groups in groups.items():
        for group in topic_groups:
            _finish(group, plan, where, topic, out)
    for topic, indices in images.items():
        stamps, rows, hists = frames[topic]
        series = ImageSeries(np.asarray(stamps, dtype=np.int64),
                             np.asarray(rows, dtype=np.float64).reshape(len(rows), len(STATS)),
                             np.asarray(hists, dtype=np.float64) if hists else np.zeros((0, 0)))
        for i in indices:
            out.images[i] = series
    return out


def condition_matches(message: Any, field_path: str | None, equals: Scalar | None) -> bool:
    """Whether a marker message satisfies ``field == equals`` (any message when no field)."""
    if field_path is None:
        return True
    try:
        value = get_field(message, parse_field(field_path))
    except FieldPathError:
        return False
    return equals is None or str(value).lower() == str(equals).lower()


def extract(reader: RecordingReader, mapping: Mapping, plan: Plan,
            progress: Progress | None = None) -> Extracted:
    """Read every message ``plan`` (of ``mapping``) names, once.

    The cyclic garbage collector is paused meanwhile: the loop allocates millions of small
    lists that hold no cycles, and collections over them cost more than the decoding.

    Raises:
        IngestError: a marker topic is missing, an image topic carries something else or a
            frame does not decode, the file is damaged; the message names file and topic.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _extract_all(reader, mapping, plan, progress)
    finally:
        if enabled:
            gc.enable()

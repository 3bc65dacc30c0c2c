"""``init-mapping``: a commented starter ``mapping.yaml`` from what a recording holds."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

from sim2real.dataset import infer_family
from sim2real.ingest._source import RecordingReader, TopicInfo
from sim2real.ingest.fields import get_field, numeric_leaves
from sim2real.ingest.images import is_image_type
from sim2real.ingest.recordings import open_recording

__all__ = ["starter_mapping"]

_MAX_CHANNELS_PER_TOPIC = 48
_SKIP_FIELDS = re.compile(r"(^|\.)(header|timestamp|stamp)(\.|$)|(^|\.)(seq|sec|nanosec|nsec)$")


def _first_messages(reader: RecordingReader, topics: dict[str, TopicInfo]) -> dict[str, Any]:
    """The first message of each topic (reading stops as soon as every topic has one)."""
    first: dict[str, Any] = {}
    for topic, _, message in reader.messages(topics):
        first.setdefault(topic, message)
        if len(first) == len(topics):
            break
    return first


def _column(topic: str, path: str, message: Any) -> str:
    """A channel name: ``<joint name>_pos`` for named joint arrays, else topic + field."""
    found = re.fullmatch(r"(position|velocity|effort)\[(\d+)\]", path)
    if found:
        try:
            names = get_field(message, ("name",))
            label = str(names[int(found.group(2))])
            suffix = {"position": "pos", "velocity": "vel"}.get(found.group(1), "effort")
            return f"{_slug(label)}_{suffix}"
        except (LookupError, TypeError):
            pass
    return _slug(f"{topic}_{path}")


def _slug(text: str) -> str:
    return re.sub(r"_+", "_", re.sub(r"[^0-9A-Za-z]+", "_", text)).strip("_").lower()


def _channel_lines(topic: str, info: TopicInfo, message: Any) -> list[str]:
    lines = [f"  # {topic}  ({info.msgtype}, {info.count if info.count is not None else '?'} msgs)"]
    leaves = [(p, v) for p, v in numeric_leaves(message) if not _SKIP_FIELDS.search(p)]
    for path, value in itertools.islice(leaves, _MAX_CHANNELS_PER_TOPIC):
        name = _column(topic, path, message)
        family = infer_family(name) or infer_family(topic.replace("/", "_"))
        guess = family or "dynamics"
        note = "" if family else "   # family guessed: check it"
        lines.append(f"  - {{from: {json.dumps(topic + '.' + path)}, name: {name}, "
                     f"family: {guess}}}   # first value {value:.4g}{note}")
    if len(leaves) > _MAX_CHANNELS_PER_TOPIC:
        lines.append(f"  # ... {len(leaves) - _MAX_CHANNELS_PER_TOPIC} more numeric fields")
    if not leaves:
        lines.append("  # (no numeric fields: a candidate for outcome:, failure_label: or markers)")
    return lines


def _header(path: Path) -> list[str]:
    return [
        f"# sim2real ingest mapping, started from {path.name} by `sim2real init-mapping`.",
        "# Every key is explained in `sim2real ingest mcap --help`. Check the families,",
        "# delete the channels you do not need, and fill in the TODOs.",
        "",
        "task: TODO_task_name            # or {filename: 'regex'} / {csv: col} / {topic:, field:}",
        "source: real                    # real | sim",
        "deployment: TODO_wave           # e.g. {filename: '^(w\\d+)_'}",
        "# robot_id: {filename: '_(r\\d+)_'}",
        "outcome: TODO_success_or_failure  # e.g. {topic: /outcome, field: data}",
        "# failure_time: {topic: /failure}        # the time of the topic's first message",
        "# failure_label: {topic: /failure, field: data}",
        "time: log                       # log (recording time) | header (header.stamp)",
        "episodes:",
        "  split: file                   # one episode per file; or markers:",
        "  # split: markers",
        "  # start: {topic: /episode, field: data, equals: start}",
        "  # end: {topic: /episode, field: data, equals: end}",
        "# sidecar: {path: episodes.csv, key: episode_id}   # columns usable as {csv: column}",
        "ctx: {}                         # e.g. object_type: {csv: object}",
        "sys: {}        # e.g. policy_version: {topic: /policy/info, field: version}",
        "param: {}      # sim recordings: friction: {topic: /sim/params, field: mu}",
        "",
    ]


def starter_mapping(path: Path) -> str:
    """The text of a starter mapping for the recording at ``path`` (MCAP or bag).

    Raises:
        IngestError: the recording cannot be read.
    """
    reader = open_recording(path)
    try:
        topics = reader.topics()
        first = _first_messages(reader, topics)
    finally:
        reader.close()
    lines = _header(path)
    images = [t for t in sorted(topics) if is_image_type(topics[t].msgtype)]
    lines.append("images:" if images else "images: []")
    lines += [f"  - {{topic: {json.dumps(t)}, prefix: {_slug(t) or 'cam'}}}   "
              f"# {topics[t].msgtype}" for t in images]
    lines += ["", "channels:"]
    for topic in sorted(set(topics) - set(images)):
        if topic in first:
            lines += _channel_lines(topic, topics[topic], first[topic])
        else:
            lines.append(f"  # {topic}  ({topics[topic].msgtype}): no messages")
    return "\n".join(lines) + "\n"

"""``init-mapping``: a commented starter ``mapping.yaml`` from what a recording holds."""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim2real.dataset import infer_family
from sim2real.errors import IngestError
from sim2real.ingest._source import RecordingReader, TopicInfo
from sim2real.ingest.fields import get_field, numeric_leaves
from sim2real.ingest.images import is_image_type
from sim2real.ingest.recordings import open_recording

__all__ = ["starter_mapping"]

_MAX_CHANNELS_PER_TOPIC = 48
_SKIP_FIELDS = re.compile(r"(^|\.)(header|timestamp|stamp)(\.|$)|(^|\.)(seq|sec|nanosec|nsec)$")


def _first_message(reader: RecordingReader, topic: str) -> Any:
    """The topic's first message, ``None`` when it has none.

    Raises:
        IngestError: the topic's messages cannot be decoded.
    """
    for _, _, message in reader.messages([topic]):
        return message
    return None


@dataclass
class _Seen:
    """What the sampled recordings hold: each topic's info and first message, the files
    holding it, and why a topic could not be decoded."""

    topics: dict[str, TopicInfo] = field(default_factory=dict)
    first: dict[str, Any] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)
    undecoded: dict[str, str] = field(default_factory=dict)


def _sample(paths: list[Path]) -> _Seen:
    seen = _Seen()
    for path in paths:
        reader = open_recording(path)
        try:
            for topic, info in reader.topics().items():
                seen.topics.setdefault(topic, info)
                seen.files.setdefault(topic, []).append(path.name)
                if topic in seen.first:
                    continue
                try:
                    message = _first_message(reader, topic)
                except IngestError as err:
                    seen.undecoded.setdefault(topic, str(err).split(": ", 1)[-1])
                    continue
                if message is not None:
                    seen.first[topic] = message
                    seen.undecoded.pop(topic, None)
        finally:
            reader.close()
    return seen


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


def _channel_lines(topic: str, info: TopicInfo, message: Any, only_in: list[str]) -> list[str]:
    count = info.count if info.count is not None else "?"
    lines = [f"  # {topic}  ({info.msgtype}, {count} msgs)"]
    optional = ""
    if only_in:
        lines.append(f"  # only in {', '.join(only_in)}: optional (or move it under real:/sim:)")
        optional = ", optional: true"
    leaves = [(p, v) for p, v in numeric_leaves(message) if not _SKIP_FIELDS.search(p)]
    for path, value in itertools.islice(leaves, _MAX_CHANNELS_PER_TOPIC):
        name = _column(topic, path, message)
        family = infer_family(name) or infer_family(topic.replace("/", "_"))
        note = "family guessed from the name" if family else "no name matched: dynamics assumed"
        lines.append(f"  - {{from: {json.dumps(topic + '.' + path)}, name: {name}, "
                     f"family: {family or 'dynamics'}{optional}}}   "
                     f"# check: {note}; first value {value:.4g}")
    if len(leaves) > _MAX_CHANNELS_PER_TOPIC:
        lines.append(f"  # ... {len(leaves) - _MAX_CHANNELS_PER_TOPIC} more numeric fields")
    if not leaves:
        lines.append("  # (no numeric fields: a candidate for outcome:, failure_label: or markers)")
    return lines


def _header(paths: list[Path]) -> list[str]:
    return [
        f"# sim2real ingest mapping, started from {', '.join(p.name for p in paths)} by "
        "`sim2real init-mapping`.",
        "# Every key is explained in `sim2real ingest mcap --help`. Check the lines marked",
        "# '# check', delete the channels you do not need, and fill in the TODOs.",
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
        "  grace: 1.0                    # outcome/failure up to 1 s after the last sample",
        "  # split: markers",
        "  # start: {topic: /episode, field: data, equals: start}",
        "  # end: {topic: /episode, field: data, equals: end}",
        "# sidecar: {path: episodes.csv, key: episode_id}   # columns usable as {csv: column}",
        "ctx: {}                         # e.g. object_type: {csv: object}",
        "sys: {}        # e.g. policy_version: {topic: /policy/info, field: version}",
        "param: {}      # sim recordings: friction: {topic: /sim/params, field: mu}",
        "",
    ]


def _only_in(seen: _Seen, topic: str, paths: list[Path]) -> list[str]:
    """The files holding ``topic`` when not all of them do (empty when all do)."""
    return seen.files[topic] if len(seen.files[topic]) < len(paths) else []


def starter_mapping(paths: Path | list[Path]) -> str:
    """The text of a starter mapping for the recordings at ``paths`` (MCAP or bags): the
    topics of all of them, each field's family a guess marked ``# check``.

    Raises:
        IngestError: a recording cannot be opened.
    """
    paths = [paths] if isinstance(paths, Path) else list(paths)
    seen = _sample(paths)
    topics = seen.topics
    lines = _header(paths)
    images = [t for t in sorted(topics) if is_image_type(topics[t].msgtype)]
    lines.append("images:" if images else "images: []")
    for t in images:
        only_in = _only_in(seen, t, paths)
        optional = ", optional: true" if only_in else ""
        note = f"; only in {', '.join(only_in)}" if only_in else ""
        lines.append(f"  - {{topic: {json.dumps(t)}, prefix: {_slug(t) or 'cam'}{optional}}}   "
                     f"# {topics[t].msgtype}{note}")
    lines += ["", "channels:"]
    names = [p.name for p in paths]
    for topic in sorted(set(topics) - set(images)):
        only_in = _only_in(seen, topic, paths)
        if topic in seen.first:
            lines += _channel_lines(topic, topics[topic], seen.first[topic], only_in)
        elif topic in seen.undecoded:
            lines.append(f"  # {topic}  ({topics[topic].msgtype}): skipped, cannot be decoded "
                         f"({seen.undecoded[topic]})")
        else:
            lines.append(f"  # {topic}  ({topics[topic].msgtype}): no messages in "
                         f"{', '.join(names)}")
    return "\n".join(lines) + "\n"

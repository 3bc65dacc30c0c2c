"""Field paths into decoded messages: ``position[2]``, ``pose.position.x``, ``data``,
``status[0].values[key=battery].value`` (the element of a list of ``KeyValue``-like
messages whose ``key`` is ``battery``).

Decoded messages are objects with attributes (ROS, via rosbags or mcap-ros2-support) or
dicts (JSON channels); a path works on both.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Iterator
from typing import Any, NamedTuple

__all__ = ["ByKey", "FieldPathError", "get_field", "numeric_leaves", "parse_field",
           "split_source"]


class ByKey(NamedTuple):
    """A path step ``[key=NAME]``: the element of a list whose ``key`` field is ``NAME``."""

    name: str


Step = str | int | ByKey
_STEP = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)|\[(-?\d+)\]|\[key=([^\]]+)\]")
_MISSING = object()


class FieldPathError(LookupError):
    """A path that does not resolve on a message; ``str()`` says which step failed."""


def parse_field(path: str) -> tuple[Step, ...]:
    """Split ``pose.position[2]`` into ``("pose", "position", 2)``.

    Raises:
        ValueError: the path is not ``name(.name|[index])*``.
    """
    steps: list[Step] = []
    pos = 0
    while pos < len(path):
        if steps and path[pos] == "." and pos + 1 < len(path) and path[pos + 1] != "[":
            pos += 1
        match = _STEP.match(path, pos)
        if match is None or (not steps and match.group(1) is None):
            msg = (f"field path {path!r} is not name(.name|[index]|[key=NAME])*, e.g. "
                   "position[2]")
            raise ValueError(msg)
        if match.group(1):
            steps.append(match.group(1))
        elif match.group(2) is not None:
            steps.append(int(match.group(2)))
        else:
            steps.append(ByKey(match.group(3)))
        pos = match.end()
    if not steps:
        raise ValueError("empty field path")
    return tuple(steps)


def split_source(source: str) -> tuple[str, str | None]:
    """Split ``/joint_states.position[2]`` into topic and field path.

    ROS topic names hold no ``.`` or ``[``, so the topic ends at the first of those.
    """
    match = re.search(r"[.\[]", source)
    if match is None:
        return source, None
    field = source[match.start():].lstrip(".")
    return source[: match.start()], field or None


def _step(obj: Any, step: Step) -> Any:
    if isinstance(step, ByKey):
        if not _is_sequence(obj):
            return _MISSING
        for item in obj:
            key = item.get("key") if isinstance(item, dict) else getattr(item, "key", None)
            if key == step.name:
                return item
        return _MISSING
    if isinstance(step, int):
        try:
            return obj[step]
        except (IndexError, TypeError, KeyError):
            return _MISSING
    if isinstance(obj, dict):
        return obj.get(step, _MISSING)
    return getattr(obj, step, _MISSING)


def get_field(message: Any, steps: tuple[Step, ...]) -> Any:
    """The value at ``steps`` in ``message``.

    Raises:
        FieldPathError: a step does not exist; the message names it and what was there.
    """
    obj = message
    for i, step in enumerate(steps):
        value = _step(obj, step)
        if value is _MISSING:
            raise FieldPathError(_describe_miss(obj, steps, i))
        obj = value
    return obj


def _describe_miss(obj: Any, steps: tuple[Step, ...], i: int) -> str:
    done = _join(steps[:i]) or "the message"
    step = steps[i]
    if isinstance(step, ByKey):
        keys = [str(item.get("key") if isinstance(item, dict) else getattr(item, "key", "?"))
                for item in obj] if _is_sequence(obj) else []
        return (f"{done} holds no element with key {step.name!r}; keys: "
                f"{', '.join(keys) or 'none'}")
    if isinstance(step, int):
        try:
            size = len(obj)
        except TypeError:
            return f"{done} is not a sequence, so [{steps[i]}] does not exist"
        return f"{done} has {size} elements, so [{steps[i]}] does not exist"
    names = sorted(field_names(obj))
    return f"{done} has no field {steps[i]!r}; its fields are {', '.join(names) or 'none'}"


def _join(steps: tuple[Step, ...]) -> str:
    out = ""
    for s in steps:
        if isinstance(s, ByKey):
            out += f"[key={s.name}]"
        else:
            out += f"[{s}]" if isinstance(s, int) else (f".{s}" if out else s)
    return out


def field_names(obj: Any) -> list[str]:
    """The fields of a decoded message (dict keys, dataclass fields or slots)."""
    if isinstance(obj, dict):
        return [str(k) for k in obj]
    fields = getattr(obj, "__dataclass_fields__", None)
    if fields:
        return [f for f in fields if not f.startswith("_")]
    slots = getattr(obj, "__slots__", None)
    if slots:
        return [s for s in slots if not s.startswith("_")]
    return [k for k in vars(obj) if not k.startswith("_")] if hasattr(obj, "__dict__") else []


def numeric_leaves(obj: Any, prefix: str = "", *, max_len: int = 32,
                   depth: int = 0) -> Iterator[tuple[str, float]]:
    """Every numeric leaf of a message as ``(field path, value)``, for starter mappings.

    Sequences longer than ``max_len`` (pixel buffers, point clouds) are skipped.
    """
    if depth > 6:
        return
    if isinstance(obj, numbers.Real):
        yield prefix, float(obj)
        return
    if isinstance(obj, str | bytes | bytearray | memoryview):
        return
    if _is_sequence(obj):
        if len(obj) > max_len:
            return
        for i, item in enumerate(obj):
            yield from numeric_leaves(item, f"{prefix}[{i}]", max_len=max_len, depth=depth + 1)
        return
    for name in field_names(obj):
        value = obj[name] if isinstance(obj, dict) else getattr(obj, name, None)
        path = f"{prefix}.{name}" if prefix else name
        yield from numeric_leaves(value, path, max_len=max_len, depth=depth + 1)


def _is_sequence(obj: Any) -> bool:
    if isinstance(obj, list | tuple):
        return True
    return hasattr(obj, "shape") and hasattr(obj, "__len__") and hasattr(obj, "dtype")

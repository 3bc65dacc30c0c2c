"""The rules of the dataset format, each a check that names file, column and first bad row."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sim2real.dataset.ids import EpisodeIndex, one_run_each
from sim2real.dataset.schema import (
    CTX_PREFIX,
    EPISODES_REQUIRED,
    OUTCOMES,
    PARAM_PREFIX,
    SOURCES,
    SYS_PREFIX,
)
from sim2real.errors import DatasetError

__all__ = ["check_episodes", "check_signal_part"]

_STRING_COLUMNS = ("episode_id", "source", "task", "outcome", "failure_label", "deployment",
                   "robot_id", "site")


def check_episodes(table: pa.Table, file: str) -> pa.Table:
    """Validate the episodes table and return it with normalised column types.

    Raises:
        DatasetError: the first rule broken, with its column and row.
    """
    for column in EPISODES_REQUIRED:
        if column not in table.column_names:
            raise DatasetError("required column is missing", file=file, column=column)
    table = _normalise(table, file)
    _no_nulls(table, "episode_id", file)
    _unique(table, "episode_id", file)
    _in_vocabulary(table, "source", SOURCES, file)
    _no_nulls(table, "task", file)
    real = pc.equal(table["source"], "real")
    for column in ("outcome", "deployment", "started_at"):
        if column not in table.column_names:
            if pc.any(real).as_py():
                raise DatasetError("required for real episodes but missing", file=file,
                                   column=column)
            continue
        _required_where(table, column, real, file)
    if "outcome" in table.column_names:
        _in_vocabulary(table, "outcome", OUTCOMES, file, allow_null=True)
    if "failure_time" in table.column_names:
        bad = pc.less(table["failure_time"], 0.0)
        _fail_first(bad, "must be >= 0 seconds from the episode start", file, "failure_time")
    for column in table.column_names:
        if column.startswith(PARAM_PREFIX):
            _fail_first(pc.and_(real, pc.is_valid(table[column])),
                        "param.* must be null on real rows", file, column)
    return table


def check_signal_part(table: pa.Table, file: str, known: EpisodeIndex) -> np.ndarray:
    """Validate ``episode_id`` and ``t`` of one signals file, in file order.

    Args:
        table: the file's ``episode_id`` (strings, or dictionary-encoded strings) and ``t``.
        file: how messages name the file.
        known: the episodes table's IDs.

    Returns:
        ``(table.num_rows,)`` each sample's episode's position in ``known``.

    Raises:
        DatasetError: an unknown episode, a missing ``t``, or ``t`` not strictly increasing.
    """
    ids = table["episode_id"]
    if not _is_text(ids.type):
        ids = ids.cast(pa.string())
    _fail_first(pc.is_null(ids), "must not be null", file, "episode_id")
    codes = known.rows(ids)
    unknown = np.flatnonzero(codes < 0)
    if unknown.size:
        raise DatasetError("no such episode in episodes", file=file, column="episode_id",
                           row=int(unknown[0]))
    t = table["t"].cast(pa.float64()).to_numpy(zero_copy_only=False)
    if not np.all(np.isfinite(t)):
        row = int(np.flatnonzero(~np.isfinite(t))[0])
        raise DatasetError("must be a finite number of seconds", file=file, column="t", row=row)
    # Each sample against the previous one of its episode (and channel, in the long layout):
    # neighbours in the file when every series is one run (files written sorted), else
    # through a stable sort by series.
    series, within = codes, "an episode"
    if "channel" in table.column_names:
        channel = _channel_index(table["channel"])
        series = codes * (int(channel.max(initial=0)) + 1) + channel
        within = "an episode's channel"
    order = None if one_run_each(series) else np.argsort(series, kind="stable")
    ordered_codes, ordered_t = (series, t) if order is None else (series[order], t[order])
    same = ordered_codes[1:] == ordered_codes[:-1]
    not_increasing = np.flatnonzero(same & (np.diff(ordered_t) <= 0)) + 1
    if not_increasing.size:
        rows = not_increasing if order is None else order[not_increasing]
        raise DatasetError(f"t must be strictly increasing within {within}", file=file,
                           column="t", row=int(rows.min()))
    return codes


def _channel_index(column: pa.ChunkedArray) -> np.ndarray:
    """``(len(column),)`` a number per distinct channel name."""
    if not _is_text(column.type):
        column = column.cast(pa.string())
    return EpisodeIndex(sorted({str(v) for v in pc.unique(column).to_pylist()})).rows(column)


def _is_text(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _normalise(table: pa.Table, file: str) -> pa.Table:
    for i, name in enumerate(table.column_names):
        column = table.column(i)
        target: pa.DataType | None = None
        if name in _STRING_COLUMNS or name.startswith((CTX_PREFIX, SYS_PREFIX)):
            wrong_type = name in _STRING_COLUMNS and not pa.types.is_string(column.type)
            if pa.types.is_dictionary(column.type) or wrong_type:
                target = pa.string()
        elif name == "failure_time" or name.startswith(PARAM_PREFIX):
            target = pa.float64()
        elif name == "started_at":
            target = pa.timestamp("us", tz="UTC")
        if target is None or column.type == target:
            continue
        table = table.set_column(i, name, _cast(column, target, file, name))
    return table


def _cast(
    column: pa.ChunkedArray, target: pa.DataType, file: str, name: str
) -> pa.ChunkedArray | pa.Array:
    if pa.types.is_timestamp(target) and pa.types.is_string(column.type):
        return _parse_times(column, file, name)
    if pa.types.is_timestamp(target) and pa.types.is_timestamp(column.type):
        if column.type.tz is None:
            return pc.assume_timezone(column, "UTC").cast(target)
        return column.cast(target)
    try:
        return column.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        for row, value in enumerate(column.to_pylist()):
            try:
                pa.array([value], type=column.type).cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                msg = f"cannot read {value!r} as {target}"
                raise DatasetError(msg, file=file, column=name, row=row) from err
        raise DatasetError(f"cannot read as {target}: {err}", file=file, column=name) from err


def _parse_times(column: pa.ChunkedArray, file: str, name: str) -> pa.Array:
    """ISO 8601 strings to UTC timestamps; a time without a zone offset is read as UTC."""
    parsed: list[datetime | None] = []
    for row, value in enumerate(column.to_pylist()):
        if value is None:
            parsed.append(None)
            continue
        try:
            stamp = datetime.fromisoformat(value)
        except ValueError as err:
            msg = f"cannot read {value!r} as an ISO 8601 time"
            raise DatasetError(msg, file=file, column=name, row=row) from err
        parsed.append(stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC))
    return pa.array(parsed, pa.timestamp("us", tz="UTC"))


def _fail_first(mask: pa.ChunkedArray | pa.Array, message: str, file: str, column: str) -> None:
    mask = pc.fill_null(mask, False)
    if pc.any(mask).as_py():
        row = pc.index(mask, True).as_py()
        raise DatasetError(message, file=file, column=column, row=row)


def _no_nulls(table: pa.Table, column: str, file: str) -> None:
    _fail_first(pc.is_null(table[column]), "must not be empty", file, column)


def _unique(table: pa.Table, column: str, file: str) -> None:
    values = table[column].to_pylist()
    seen: set[object] = set()
    for row, value in enumerate(values):
        if value in seen:
            raise DatasetError(f"duplicate value {value!r}", file=file, column=column, row=row)
        seen.add(value)


def _in_vocabulary(table: pa.Table, column: str, allowed: tuple[str, ...], file: str,
                   *, allow_null: bool = False) -> None:
    values = table[column]
    bad = pc.invert(pc.is_in(values, value_set=pa.array(allowed)))
    if allow_null:
        bad = pc.and_(bad, pc.is_valid(values))
    if pc.any(pc.fill_null(bad, True)).as_py():
        row = pc.index(pc.fill_null(bad, True), True).as_py()
        found = values[row].as_py()
        msg = f"unknown value {found!r}; expected one of {', '.join(allowed)}"
        raise DatasetError(msg, file=file, column=column, row=row)


def _required_where(table: pa.Table, column: str, where: pa.ChunkedArray, file: str) -> None:
    _fail_first(pc.and_(where, pc.is_null(table[column])),
                "required for real episodes but empty", file, column)

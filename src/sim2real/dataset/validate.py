"""The rules of the dataset format, each a check that names file, column and first bad row."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sim2real.dataset.ids import EpisodeIndex
from sim2real.dataset.schema import (
    BANK_SOURCES,
    CTX_PREFIX,
    EPISODES_REQUIRED,
    OUTCOMES,
    PARAM_PREFIX,
    SOURCES,
    SYS_PREFIX,
)
from sim2real.errors import DatasetError

__all__ = [
    "FLOAT32_MAX",
    "LONG_EPISODE",
    "PartState",
    "SampleSpans",
    "check_episodes",
    "check_names",
    "check_samples",
    "check_signal_group",
    "check_values",
]

# The analysis computes in float32 (the signal grids): a larger value would become inf.
FLOAT32_MAX = float(np.finfo(np.float32).max)
# An episode this many times longer than the median of its source is compared over that
# span only, so that one runaway recording never sizes every episode's grid.
LONG_EPISODE = 10.0

_STRING_COLUMNS = ("episode_id", "source", "task", "outcome", "failure_label", "deployment",
                   "robot_id", "site")


def check_names(names: list[str], file: str, required: tuple[str, ...]) -> None:
    """Column names: each once, none differing from another only by surrounding spaces, and
    every ``required`` one present (a near miss such as ``'T'`` or ``' t'`` is named).

    Raises:
        DatasetError: naming the column.
    """
    seen: dict[str, str] = {}
    for name in names:
        key = name.strip()
        if key in seen:
            what = "appears twice" if seen[key] == name else f"is named alike {seen[key]!r}"
            raise DatasetError(f"column {what}; names must be unique", file=file, column=name)
        seen[key] = name
    for column in required:
        if column not in names:
            near = [n for n in names if n.strip().casefold() == column]
            hint = f" (found {near[0]!r})" if near else ""
            raise DatasetError(f"required column is missing{hint}", file=file, column=column)


def check_episodes(table: pa.Table, file: str) -> pa.Table:
    """Validate the episodes table and return it with normalised column types.

    Raises:
        DatasetError: the first rule broken, with its column and row.
    """
    check_names(table.column_names, file, EPISODES_REQUIRED)
    if table.num_rows == 0:
        raise DatasetError("holds no episodes", file=file)
    table = _normalise(table, file)
    _no_nulls(table, "episode_id", file)
    _unique(table, "episode_id", file)
    _in_vocabulary(table, "source", SOURCES, file)
    if pc.any(pc.equal(table["source"], "sim")).as_py():
        _fail_first(pc.equal(table["source"], "reference"),
                    "a dataset compares real runs with sim rollouts or with normal real runs "
                    "(reference), not both", file, "source")
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
    # Normal real runs ran with no simulation parameters either.
    not_sim = pc.not_equal(table["source"], "sim")
    for column in table.column_names:
        if column.startswith(PARAM_PREFIX):
            _fail_first(pc.and_(not_sim, pc.is_valid(table[column])),
                        "param.* must be null on real rows and reference rows", file, column)
    return table


@dataclass
class PartState:
    """What validating one signals file carries from one row group to the next, so that
    the file is read a row group at a time (never whole) and every message still names
    the row of the file.

    A series is an episode (wide layout) or an episode's channel (long layout), coded
    ``channel * n_episodes + episode``: a channel first seen in a later row group appends
    a block of series instead of renumbering those already seen.

    Attributes:
        file: how messages name the file.
        n_episodes: episodes in the episodes table.
        rows: rows of the file already checked (the file row of the next group's first).
        channels: long layout: each channel name's code, in order of first appearance.
        last: ``(n_series,)`` each series' last ``t`` so far (-inf: none yet).
        count: ``(n_series,)`` each series' samples so far.
        most: ``(n_episodes,)`` samples of each episode's most sampled series so far.
    """

    file: str
    n_episodes: int
    rows: int = 0
    channels: dict[str, int] = field(default_factory=dict)
    last: np.ndarray = field(init=False)
    count: np.ndarray = field(init=False)
    most: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.last = np.full(self.n_episodes, -np.inf)
        self.count = np.zeros(self.n_episodes, dtype=np.int64)
        self.most = np.zeros(self.n_episodes, dtype=np.int64)

    def channel_codes(self, column: pa.ChunkedArray) -> np.ndarray:
        """``(len(column),)`` each row's channel code (no nulls: checked before), new
        channels taking the next codes; looked up once per row group's dictionary."""
        parts = []
        for chunk in column.chunks:
            if not pa.types.is_dictionary(chunk.type):
                chunk = pc.dictionary_encode(chunk)
            names = chunk.dictionary.cast(pa.string()).to_pylist()
            for name in names:
                self.channels.setdefault(name, len(self.channels))
            lookup = np.array([self.channels[n] for n in names], dtype=np.int64)
            parts.append(lookup[chunk.indices.to_numpy(zero_copy_only=False)])
        codes = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        grow = len(self.channels) * self.n_episodes - self.last.size
        if grow > 0:
            self.last = np.concatenate([self.last, np.full(grow, -np.inf)])
            self.count = np.concatenate([self.count, np.zeros(grow, np.int64)])
        return codes


def check_signal_group(table: pa.Table, known: EpisodeIndex,
                       state: PartState) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate ``episode_id`` and ``t`` of one row group of a signals file, the file's
    earlier row groups already checked into ``state``.

    Args:
        table: the row group's ``episode_id`` (strings, or dictionary-encoded strings) and
            ``t`` (numbers, or text that reads as numbers throughout), and ``channel`` in
            the long layout (no nulls).
        known: the episodes table's IDs.
        state: the file's state, advanced past this row group.

    Returns:
        ``(table.num_rows,)`` each sample's episode's position in ``known``, its ``t`` as
        float64, and its series (see :class:`PartState`).

    Raises:
        DatasetError: an unknown episode, a ``t`` that is missing, not a number or not
            finite, or ``t`` not strictly increasing; the row counted from the file's start.
    """
    file, offset = state.file, state.rows
    ids = table["episode_id"]
    if not _is_text(ids.type):
        ids = ids.cast(pa.string())
    _fail_first(pc.is_null(ids), "must not be null", file, "episode_id", offset)
    codes = known.rows(ids)
    unknown = np.flatnonzero(codes < 0)
    if unknown.size:
        raise DatasetError("no such episode in episodes", file=file, column="episode_id",
                           row=offset + int(unknown[0]))
    if not (pa.types.is_floating(table["t"].type) or pa.types.is_integer(table["t"].type)
            or _is_text(table["t"].type)):
        raise DatasetError(f"must be seconds as numbers, found {table['t'].type}", file=file,
                           column="t")
    t = _cast(table["t"], pa.float64(), file, "t", offset).to_numpy(zero_copy_only=False)
    if not np.all(np.isfinite(t)):
        row = offset + int(np.flatnonzero(~np.isfinite(t))[0])
        raise DatasetError("must be a finite number of seconds", file=file, column="t", row=row)
    # Each sample against the previous one of its series, in one pass in file order,
    # whatever the order of the episodes: no sort.
    series, within = codes, "an episode"
    if "channel" in table.column_names:
        series = state.channel_codes(table["channel"]) * state.n_episodes + codes
        within = "an episode's channel"
    row = _first_not_increasing(series, t, state.last)
    if row >= 0:
        raise DatasetError(f"t must be strictly increasing within {within}", file=file,
                           column="t", row=offset + row)
    state.rows += table.num_rows
    return codes, t, series


@numba.njit(nogil=True, cache=True)
def _first_not_increasing(series: np.ndarray, t: np.ndarray,
                          last: np.ndarray) -> int:  # pragma: no cover - compiled
    # The first row whose t is not above the previous t of its series (``last``, carried
    # from the earlier row groups and updated); -1: none.
    for i in range(series.size):
        s = series[i]
        if t[i] <= last[s]:
            return i
        last[s] = t[i]
    return -1


class SampleSpans:
    """Where each episode's samples lie, gathered row group by row group while ``t`` is
    validated.

    Attributes:
        first, last: ``(n_episodes,)`` first and last sample time (inf and -inf without
            samples).
        count: ``(n_episodes,)`` samples (in the long layout: of its most sampled channel,
            file by file).
    """

    def __init__(self, n_episodes: int) -> None:
        self.first = np.full(n_episodes, np.inf)
        self.last = np.full(n_episodes, -np.inf)
        self.count = np.zeros(n_episodes, dtype=np.int64)

    def add(self, codes: np.ndarray, t: np.ndarray, series: np.ndarray,
            state: PartState) -> None:
        """Take in one row group's samples, checked by :func:`check_signal_group` (an
        episode may span row groups and files)."""
        if codes.size:
            _take_spans(codes, t, series, self.first, self.last, state.count, state.most)

    def close(self, state: PartState) -> None:
        """Count a file's samples, once its last row group is in."""
        self.count += state.most


@numba.njit(nogil=True, cache=True)
def _take_spans(codes: np.ndarray, t: np.ndarray, series: np.ndarray, first: np.ndarray,
                last: np.ndarray, per_series: np.ndarray,
                most: np.ndarray) -> None:  # pragma: no cover - compiled
    # One pass in file order (rows of many episodes may interleave): each episode's first
    # and last t, and the sample count of its most sampled series in the file so far.
    for i in range(codes.size):
        c, s = codes[i], series[i]
        first[c] = min(first[c], t[i])
        last[c] = max(last[c], t[i])
        per_series[s] += 1
        most[c] = max(most[c], per_series[s])


def check_samples(episodes: pa.Table, spans: SampleSpans, file: str,
                  first_sample: Callable[[int], tuple[str, int]], *,
                  skip_bad: bool = False) -> tuple[pa.Table, float, list[str]]:
    """The rules joining episodes to their samples.

    - ``t`` counts from the episode's start: a first sample later than the span below is
      an absolute time (epoch seconds), an error;
    - the span compared is :data:`LONG_EPISODE` times the median episode length of the
      source with the longer ones; a longer episode is compared over that span (warned);
    - a real failure needs two samples or more, and its ``failure_time`` (its end where
      none is given) within its samples and the span. Those that are not are an error
      naming them, or, with ``skip_bad``, left out with a warning.

    Args:
        episodes: the validated episodes table.
        spans: its episodes' samples, in its row order.
        file: the episodes file, for messages.
        first_sample: where an episode's first sample is (signals file, row), given its
            row in ``episodes`` (asked only to name it in an error).
        skip_bad: leave out the failures that break a rule instead of failing.

    Returns:
        The episodes (bad failures left out where asked), the span in seconds, warnings.

    Raises:
        DatasetError: an episode's ``t`` does not start near 0, or a failure breaks a rule.
    """
    has = spans.count > 0
    length = np.where(has, spans.last - spans.first, np.nan)
    source = np.array(episodes["source"].to_pylist(), dtype=object)
    typical = [float(np.median(length[has & (source == s)])) for s in (*BANK_SOURCES, "real")
               if np.any(has & (source == s))]
    span = LONG_EPISODE * max(max(typical, default=0.0), _MIN_SPAN_S)
    ids = episodes["episode_id"].to_pylist()
    late = np.flatnonzero(has & (spans.first > span))
    if late.size:
        episode = int(late[0])
        msg = (f"episode {ids[episode]!r} starts at t = {spans.first[episode]:.6g} s; t counts "
               f"seconds from the episode start (not a clock time)")
        part, row = first_sample(episode)
        raise DatasetError(msg, file=part, column="t", row=row)
    warnings: list[str] = []
    long = np.flatnonzero(has & (spans.last > span))
    if long.size:
        warnings.append(f"{long.size} episode(s) longer than {LONG_EPISODE:g} x the median "
                        f"episode, compared over their first {span:.4g} s only: "
                        + _listed(ids, long, spans.last, "s"))
    bad = _bad_failures(episodes, spans, span)
    if bad:
        rows = sorted(bad)
        listing = "; ".join(f"{ids[r]!r} (row {r}): {bad[r]}" for r in rows[:5])
        more = f"; and {len(rows) - 5} more" if len(rows) > 5 else ""
        if not skip_bad:
            msg = (f"{len(rows)} real failure(s) cannot be compared: {listing}{more}; "
                   "fix them, or give --skip-bad-episodes to leave them out")
            raise DatasetError(msg, file=file, column="episode_id", row=rows[0])
        warnings.append(f"{len(rows)} real failure(s) left out (--skip-bad-episodes): "
                        f"{listing}{more}")
        keep = np.ones(episodes.num_rows, dtype=bool)
        keep[rows] = False
        episodes = episodes.filter(pa.array(keep))
    empty = np.flatnonzero(~has & np.isin(source, BANK_SOURCES))
    if empty.size:
        warnings.append(f"{empty.size} sim or reference episode(s) have no samples: "
                        + ", ".join(repr(ids[r]) for r in empty[:5])
                        + (", ..." if empty.size > 5 else ""))
    return episodes, span, warnings


# The span is never shorter than this, so that very short episodes keep some slack.
_MIN_SPAN_S = 1.0


def _bad_failures(episodes: pa.Table, spans: SampleSpans, span: float) -> dict[int, str]:
    """Row -> why, for the real failures that cannot be compared."""
    if "outcome" not in episodes.column_names:  # no real episodes, so no real failures
        return {}
    failed = pc.fill_null(pc.and_(pc.equal(episodes["source"], "real"),
                                  pc.equal(episodes["outcome"], "failure")), False)
    rows = np.flatnonzero(failed.to_numpy(zero_copy_only=False))
    given = (episodes["failure_time"].to_numpy(zero_copy_only=False).astype(float)
             if "failure_time" in episodes.column_names else np.full(episodes.num_rows, np.nan))
    bad: dict[int, str] = {}
    for r in rows.tolist():
        n, first, last = int(spans.count[r]), spans.first[r], spans.last[r]
        if n == 0:
            bad[r] = "no samples in the signals"
            continue
        if n < 2:
            bad[r] = "one sample only; a trajectory needs two or more"
            continue
        end = given[r] if np.isfinite(given[r]) else last
        step = (last - first) / (n - 1)  # a failure logged one sample after the last is in
        if not first <= end <= last + step:
            bad[r] = (f"failure_time {end:.6g} s outside its samples "
                      f"({first:.6g} to {last:.6g} s)")
        elif end > span:
            bad[r] = (f"fails at {end:.6g} s, past the {span:.4g} s compared "
                      f"({LONG_EPISODE:g} x the median episode)")
    return bad


def _listed(ids: list[str], rows: np.ndarray, values: np.ndarray, unit: str) -> str:
    shown = ", ".join(f"{ids[r]!r} ({values[r]:.6g} {unit})" for r in rows[:5])
    return shown + (", ..." if rows.size > 5 else "")


def check_values(values: pa.ChunkedArray | pa.Array, file: str, column: str,
                 row_offset: int = 0) -> None:
    """A channel's values: numbers within the float32 range the analysis computes in
    (NaN and null mean "no sample" and pass).

    Raises:
        DatasetError: the first value beyond that range, with its row.
    """
    x = values.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    with np.errstate(invalid="ignore"):
        beyond = np.flatnonzero(np.abs(x) > FLOAT32_MAX)
    if beyond.size:
        row = int(beyond[0])
        msg = (f"value {x[row]:.6g} is beyond the float32 range the analysis computes in "
               f"(+-{FLOAT32_MAX:.3g}); write a missing value (null) where there is no reading")
        raise DatasetError(msg, file=file, column=column, row=row_offset + row)


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
    _finite_numbers(table, file)
    return table


def _finite_numbers(table: pa.Table, file: str) -> None:
    """``failure_time`` is finite where given; ``param.*`` and numeric ``ctx.*`` values fit
    the float32 range (an ``inf`` would make every distance and range inf, silently)."""
    for name in table.column_names:
        column = table[name]
        if name == "failure_time":
            x = column.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
            inf = np.flatnonzero(np.isinf(x))
            if inf.size:
                raise DatasetError(f"must be a finite number of seconds (or empty: at the "
                                   f"episode's end), got {x[inf[0]]:g}", file=file,
                                   column=name, row=int(inf[0]))
        elif name.startswith(PARAM_PREFIX) or (name.startswith(CTX_PREFIX)
                                               and pa.types.is_floating(column.type)):
            check_values(column, file, name)


def _cast(
    column: pa.ChunkedArray, target: pa.DataType, file: str, name: str, row_offset: int = 0
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
                raise DatasetError(msg, file=file, column=name,
                                   row=row_offset + row) from err
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


def _fail_first(mask: pa.ChunkedArray | pa.Array, message: str, file: str, column: str,
                row_offset: int = 0) -> None:
    mask = pc.fill_null(mask, False)
    if pc.any(mask).as_py():
        row = row_offset + pc.index(mask, True).as_py()
        raise DatasetError(message, file=file, column=column, row=row)


def _no_nulls(table: pa.Table, column: str, file: str) -> None:
    """Neither null nor blank text (an empty task would be a task of its own)."""
    blank = pc.equal(pc.utf8_trim_whitespace(table[column]), "")
    _fail_first(pc.or_kleene(pc.is_null(table[column]), blank), "must not be empty", file,
                column)


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

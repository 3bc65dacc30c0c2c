"""The two layouts of the signals table: wide (a column per channel) and long (a row per sample).

Wide: ``episode_id, t, <channel>...``; a null means "no sample of this channel at this t".
Long: ``episode_id, t, channel, value``; every channel keeps its own timestamps, which is
how message logs arrive. A ``channel`` column of strings is what tells them apart (in the
wide layout every channel is numeric).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sim2real.dataset.ids import EpisodeIndex
from sim2real.errors import DatasetError

__all__ = ["LONG_COLUMNS", "Layout", "channel_codes", "layout_of", "to_long", "to_wide"]

Layout = Literal["wide", "long"]
LONG_COLUMNS = ("episode_id", "t", "channel", "value")


def _is_text(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _is_number(kind: pa.DataType) -> bool:
    return bool(pa.types.is_floating(kind) or pa.types.is_integer(kind)
                or pa.types.is_null(kind))


def layout_of(schema: pa.Schema, file: str) -> Layout:
    """The layout of one signals file, from its schema.

    Raises:
        DatasetError: a long file with other columns, a non-numeric ``value`` or channel.
    """
    names = schema.names
    if "channel" in names and _is_text(schema.field("channel").type):
        extra = [n for n in names if n not in LONG_COLUMNS]
        if extra:
            msg = (f"the long layout holds exactly {', '.join(LONG_COLUMNS)}; "
                   f"found also {', '.join(extra)}")
            raise DatasetError(msg, file=file, column=extra[0])
        if "value" not in names:
            raise DatasetError("the long layout needs a value column", file=file, column="value")
        if not _is_number(schema.field("value").type):
            msg = f"must be numeric, found {schema.field('value').type}"
            raise DatasetError(msg, file=file, column="value")
        return "long"
    for field in schema:
        if field.name not in ("episode_id", "t") and not _is_number(field.type):
            msg = f"channel must be numeric, found {field.type}"
            raise DatasetError(msg, file=file, column=field.name)
    return "wide"


def channel_codes(column: pa.ChunkedArray | pa.Array, names: Sequence[str]) -> np.ndarray:
    """``(len(column),)`` each row's channel's position in ``names``, -1 for others."""
    return EpisodeIndex(names).rows(column)


def to_wide(table: pa.Table, channels: Sequence[str]) -> pa.Table:
    """Long-layout rows as the wide layout: one row per distinct ``(episode_id, t)``, one
    column per channel of ``channels`` (in that order), null where a channel has no sample.

    Rows come out sorted by episode (in order of first appearance), then ``t``.
    """
    ids = table["episode_id"]
    if pa.types.is_dictionary(ids.type):
        ids = ids.cast(pa.string())
    names = pc.unique(ids).to_pylist()
    episode = EpisodeIndex(names).rows(ids)
    t = table["t"].to_numpy(zero_copy_only=False).astype(np.float64)
    order = np.lexsort((t, episode))
    episode, t = episode[order], t[order]
    new_row = np.ones(order.size, dtype=bool)
    new_row[1:] = (episode[1:] != episode[:-1]) | (t[1:] != t[:-1])
    slot = np.cumsum(new_row) - 1
    n_rows = int(slot[-1]) + 1 if slot.size else 0
    codes = channel_codes(table["channel"], channels)[order]
    values = table["value"].to_numpy(zero_copy_only=False).astype(np.float64)[order]
    columns: dict[str, pa.Array] = {
        "episode_id": pa.array(np.asarray(names, dtype=object)[episode[new_row]]
                               if n_rows else [], pa.string()),
        "t": pa.array(t[new_row], pa.float64()),
    }
    for k, name in enumerate(channels):
        column = np.full(n_rows, np.nan)
        mine = codes == k
        column[slot[mine]] = values[mine]  # one stamp twice: the later row wins
        columns[name] = pa.array(column, pa.float64(), mask=np.isnan(column))
    return pa.table(columns)


def to_long(table: pa.Table) -> pa.Table:
    """Wide-layout rows as the long layout: one row per non-null sample, ordered by
    episode (as they come), channel name, then ``t``."""
    names = sorted(c for c in table.column_names if c not in ("episode_id", "t"))
    parts = []
    for name in names:
        rows = table.filter(pc.is_valid(table[name]))
        value = rows[name].cast(pa.float64())
        rows = rows.filter(pc.invert(pc.is_nan(value)))
        parts.append(pa.table({
            "episode_id": rows["episode_id"], "t": rows["t"].cast(pa.float64()),
            "channel": pa.array([name] * rows.num_rows, pa.string()),
            "value": rows[name].cast(pa.float64())}))
    if not parts:
        return pa.table({c: pa.array([], pa.string() if c in ("episode_id", "channel")
                                     else pa.float64()) for c in LONG_COLUMNS})
    return pa.concat_tables(parts)

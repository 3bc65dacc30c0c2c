"""Context columns (``ctx.*``) encoded for matching and for the task-scope novelty check."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa

__all__ = ["ContextTable", "context_table"]

# From this many rows on, comparing integer codes beats comparing Python strings even
# counting the one-off encoding.
_ENCODE_MIN_ROWS = 256


@dataclass(frozen=True)
class ContextTable:
    """The ``ctx.*`` columns of some episodes, split by kind.

    Attributes:
        size: number of episodes.
        categorical: column name -> ``(n,)`` object array of strings (None where missing).
        numeric: column name -> ``(n,)`` float array (NaN where missing).
        symptom: ``(n,)`` the ``failure_label`` of failed episodes, None elsewhere: what was
            seen to go wrong, matched like context but never a novelty.
    """

    size: int
    categorical: dict[str, np.ndarray]
    numeric: dict[str, np.ndarray]
    symptom: np.ndarray | None = None

    def take(self, rows: np.ndarray) -> ContextTable:
        """The same columns restricted to ``rows``."""
        taken = ContextTable(
            len(rows),
            {k: v[rows] for k, v in self.categorical.items()},
            {k: v[rows] for k, v in self.numeric.items()},
            None if self.symptom is None else self.symptom[rows],
        )
        # A large table (a rollout bank) is encoded once, and the slices taken of it for
        # every group of queries inherit the encoding.
        if "_codes" in self.__dict__ or self.size >= _ENCODE_MIN_ROWS:
            taken.__dict__["_codes"] = {k: (codes[rows], vocabulary)
                                        for k, (codes, vocabulary) in self._codes.items()}
        return taken

    @cached_property
    def _codes(self) -> dict[str, tuple[np.ndarray, dict[str, int]]]:
        """Each categorical column as int32 codes (-1 where missing) and its vocabulary."""
        encoded = {}
        for name, values in self.categorical.items():
            present = np.array([v is not None for v in values], dtype=bool)
            vocabulary = {str(v): i for i, v in enumerate(np.unique(values[present]))}
            codes = np.full(values.size, -1, dtype=np.int32)
            codes[present] = [vocabulary[v] for v in values[present]]
            encoded[name] = (codes, vocabulary)
        return encoded

    def distance(
        self, row: int, other: ContextTable, numeric_scale: dict[str, float]
    ) -> np.ndarray:
        """Mean squared context distance from ``self[row]`` to every row of ``other``
        (see :meth:`distances`)."""
        return self.take(np.array([row])).distances(other, numeric_scale)[0]

    def distances(self, other: ContextTable, numeric_scale: dict[str, float]) -> np.ndarray:
        """``(self.size, other.size)`` mean squared context distances.

        A categorical mismatch counts 1, a numeric difference its square in units of
        ``numeric_scale``; the mean is over the columns a row of ``self`` has, and a value
        ``other`` lacks counts 0.
        """
        return self.pair_distances(np.arange(self.size)[:, None], other,
                                   np.arange(other.size)[None, :], numeric_scale)

    def pair_distances(self, rows: np.ndarray, other: ContextTable, other_rows: np.ndarray,
                       numeric_scale: dict[str, float]) -> np.ndarray:
        """The :meth:`distances` of ``self[rows]`` to ``other[other_rows]``, the two index
        arrays broadcast against each other (the same numbers, entry by entry)."""
        rows, other_rows = np.asarray(rows), np.asarray(other_rows)
        total = np.zeros(np.broadcast_shapes(rows.shape, other_rows.shape))
        count = np.zeros(rows.shape)
        encoded = "_codes" in other.__dict__ or other.size >= _ENCODE_MIN_ROWS
        # Strings are looked at once per distinct row, however many pairs share it.
        distinct, where = np.unique(rows, return_inverse=True)
        where = where.reshape(rows.shape)
        for name, values in self.categorical.items():
            if name not in other.categorical:
                continue
            present = np.array([v is not None for v in values[distinct]], dtype=bool)[where]
            if encoded:
                codes, vocabulary = other._codes[name]
                mine = np.array([vocabulary.get(v, -2) for v in values[distinct]],
                                dtype=np.int64)
                total += present & (codes[other_rows] != mine[where])
            else:
                total += present & (other.categorical[name][other_rows] != values[rows])
            count += present
        for name, values in self.numeric.items():
            if name not in other.numeric:
                continue
            present = np.isfinite(values)[rows]
            diff = (other.numeric[name][other_rows] - values[rows]) / numeric_scale.get(name, 1.0)
            square = diff * diff
            total += np.where(present & ~np.isnan(square), square, 0.0)
            count += present
        return total / np.maximum(count, 1)


def context_table(episodes: pa.Table) -> ContextTable:
    """Encode every ``ctx.*`` column of ``episodes`` (strings categorical, numbers numeric)."""
    categorical: dict[str, np.ndarray] = {}
    numeric: dict[str, np.ndarray] = {}
    for name in episodes.column_names:
        if not name.startswith("ctx."):
            continue
        column = episodes[name]
        if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
            numeric[name] = column.to_numpy(zero_copy_only=False).astype(float)
        else:
            values = column.cast(pa.string()).to_pylist()
            categorical[name] = np.array(values, dtype=object)
    return ContextTable(episodes.num_rows, categorical, numeric, _symptoms(episodes))


def _symptoms(episodes: pa.Table) -> np.ndarray:
    n = episodes.num_rows
    if "failure_label" not in episodes.column_names or "outcome" not in episodes.column_names:
        return np.full(n, None, dtype=object)
    labels = episodes["failure_label"].cast(pa.string()).to_pylist()
    failed = [o == "failure" for o in episodes["outcome"].to_pylist()]
    return np.array([lab if f else None for lab, f in zip(labels, failed, strict=True)],
                    dtype=object)

"""A table's column as a NumPy object array, for the per-row Python work that follows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["column_values", "strings"]


def column_values(table: pa.Table, column: str) -> np.ndarray:
    """``column``'s values (``None`` for nulls, and throughout where it is absent)."""
    if column not in table.column_names:
        return np.full(table.num_rows, None, dtype=object)
    return np.array(table[column].to_pylist(), dtype=object)


def strings(table: pa.Table, column: str) -> np.ndarray:
    """:func:`column_values`, each as Arrow writes it as text (a ``sys.*`` flag of any type is
    then compared and reported as text)."""
    if column not in table.column_names:
        return np.full(table.num_rows, None, dtype=object)
    return np.array(table[column].cast(pa.string()).to_pylist(), dtype=object)

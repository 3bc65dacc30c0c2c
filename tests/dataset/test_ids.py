"""Episode IDs looked up in columns: plain or dictionary-encoded, nulls and strangers -1."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sim2real.dataset.ids import EpisodeIndex


def test_rows_are_first_positions_whatever_the_encoding() -> None:
    index = EpisodeIndex(["a", "b", "c", "b"])
    column = pa.array(["c", None, "b", "zz", "a", "c"])
    expected = [2, -1, 1, -1, 0, 2]
    assert index.rows(column).tolist() == expected
    assert index.rows(column.dictionary_encode()).tolist() == expected
    chunked = pa.chunked_array([column[:2], column[2:]])
    assert index.rows(chunked).tolist() == expected
    assert index.rows(pa.array([1, 2], pa.int64())).tolist() == [-1, -1]
    assert index.rows(pa.array([], pa.string())).dtype == np.int64


def test_many_values_against_few_ids_give_the_same_positions() -> None:
    # Past a few values per ID the lookup goes through Arrow's hashing instead of the dict.
    index = EpisodeIndex(["a", "b"])
    column = pa.array(["b", "x", None, "a"] * 10)
    assert index.rows(pa.array(column.to_pylist()[:1])).tolist() == [1]
    assert index.rows(column).tolist() == [1, -1, -1, 0] * 10

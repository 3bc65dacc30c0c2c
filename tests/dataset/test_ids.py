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


def test_both_lookups_give_the_same_positions() -> None:
    # A few values against many IDs go through a dict, many values through Arrow's hashing.
    ids = [f"e{i}" for i in range(100)] + ["e5"]
    index = EpisodeIndex(ids)
    few = pa.array(["e7", None, "zz", "e5"])
    assert index.rows(few).tolist() == [7, -1, -1, 5]
    many = pa.array([*few.to_pylist(), *ids] * 3)
    assert index.rows(many).tolist() == [7, -1, -1, 5, *range(100), 5] * 3

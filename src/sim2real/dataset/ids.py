"""Episode IDs looked up in whole columns: the row of each sample's episode."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["EpisodeIndex", "one_run_each"]


class EpisodeIndex:
    """The position of each of some episode IDs, looked up for whole columns of IDs.

    Args:
        episode_ids: the episodes, in order (a grid's rows, the episodes table).
    """

    def __init__(self, episode_ids: Sequence[str]) -> None:
        self.ids = pa.array(list(episode_ids), pa.string())
        self._rows: dict[str, int] = {}
        for i, e in enumerate(episode_ids):
            self._rows.setdefault(e, i)

    def __len__(self) -> int:
        return len(self.ids)

    def rows(self, ids: pa.ChunkedArray | pa.Array) -> np.ndarray:
        """``(len(ids),)`` int64: each ID's position, -1 for other episodes and nulls.

        Dictionary-encoded IDs (how the readers load ``episode_id``: a row group holds a few
        hundred episodes) are looked up once per dictionary entry, not once per sample.
        """
        chunks = ids.chunks if isinstance(ids, pa.ChunkedArray) else [ids]
        parts = []
        for chunk in chunks:
            if pa.types.is_dictionary(chunk.type):
                lookup = np.array([self._rows.get(v, -1) for v in chunk.dictionary.to_pylist()]
                                  + [-1], dtype=np.int64)  # the last entry stands for null
                indices = pc.fill_null(chunk.indices, len(chunk.dictionary))
                parts.append(lookup[indices.to_numpy(zero_copy_only=False)])
            else:
                found = pc.index_in(chunk, value_set=self.ids)
                parts.append(found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64))
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def one_run_each(codes: np.ndarray) -> bool:
    """Whether each episode's samples (``codes``: their episodes) form one contiguous run,
    as in files written sorted by episode."""
    if codes.size < 2:
        return True
    heads = codes[np.concatenate([[True], codes[1:] != codes[:-1]])]
    return bool(np.unique(heads).size == heads.size)

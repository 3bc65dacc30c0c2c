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
                # The last entry stands for null.
                lookup = np.append(self._positions(chunk.dictionary), -1)
                indices = pc.fill_null(chunk.indices, len(chunk.dictionary))
                parts.append(lookup[indices.to_numpy(zero_copy_only=False)])
            else:
                parts.append(self._positions(chunk))
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def _positions(self, values: pa.Array) -> np.ndarray:
        """Each value's first position in the IDs, -1 where absent or null (hashed in
        Arrow: a row group's dictionary may hold every episode of the fleet)."""
        if not pa.types.is_string(values.type):
            values = values.cast(pa.string())
        found = pc.index_in(values, value_set=self.ids)
        return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)


def one_run_each(codes: np.ndarray) -> bool:
    """Whether each episode's samples (``codes``: their episodes) form one contiguous run,
    as in files written sorted by episode."""
    if codes.size < 2:
        return True
    heads = codes[np.concatenate([[True], codes[1:] != codes[:-1]])]
    return bool(np.unique(heads).size == heads.size)

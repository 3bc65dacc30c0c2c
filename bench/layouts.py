"""One benchmark fleet in four file orders, the same rows and the same episodes table.

- ``sorted``: the parts ``write_dataset`` writes, sorted by ``episode_id`` then ``t``;
- ``time``: one ``signals.parquet`` in time order: the episodes of each block of the fleet
  (a few thousand, in random ID order, as robots of one shift) recorded at once, their rows
  interleaved by ``t``; row groups of 1 M rows, each spanning the whole ID range;
- ``sim-first``: one file, every sim rollout then every real episode, each episode's rows
  together but the episodes in random ID order (generation order under random IDs);
- ``small-files``: the ``time`` order cut into 1,000 files.

Streaming, so that ``l`` fits: one pass routes the rows to blocks of about 256 MB (temporary
Parquet files), then each block is ordered in memory and appended to the output.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

__all__ = ["LAYOUTS", "write_layout"]

LAYOUTS = ("sorted", "time", "sim-first", "small-files")
_BLOCK_BYTES = 256 << 20
_SMALL_FILES = 1000
_SIDE_FILES = ("episodes.parquet", "episodes.csv", "channels.csv", "params.csv")


def write_layout(dataset: Path, layout: str) -> Path:
    """Fleet ``dataset`` (sorted parts) in ``layout``, written once beside it.

    Returns:
        The dataset folder of that layout (``dataset`` itself for ``sorted``).
    """
    if layout == "sorted":
        return dataset
    out = dataset.parent / f"dataset-{layout}"
    if out.exists():
        return out
    tmp = dataset.parent / f".dataset-{layout}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "signals").mkdir(parents=True)
    for name in _SIDE_FILES:
        if (dataset / name).exists():
            shutil.copy(dataset / name, tmp / name)
    episodes = pq.read_table(dataset / "episodes.parquet", columns=["episode_id", "source"])
    ids = episodes["episode_id"].to_numpy(zero_copy_only=False)
    rank = np.random.default_rng(0).permutation(ids.size)
    real = pc.equal(episodes["source"], "real").to_numpy(zero_copy_only=False)
    source = pads.dataset(dataset / "signals", format="parquet")
    decoded = sum(pq.ParquetFile(f).metadata.num_rows for f in source.files)
    n_blocks = max(1, math.ceil(_row_bytes(source.schema) * decoded / _BLOCK_BYTES))
    # Blocks by random rank: each holds episodes from the whole ID range; sim-first puts
    # every sim block before every real one.
    block = rank * n_blocks // ids.size
    if layout == "sim-first":
        block = block + n_blocks * real
        n_blocks *= 2
    blocks = _route(source, ids, block, n_blocks, tmp / "blocks")
    writer = None
    written = 0
    per_file = math.ceil(decoded / _SMALL_FILES)
    for path in blocks:
        rows = pq.read_table(path)
        code = pc.index_in(rows["episode_id"], value_set=pa.array(ids)).to_numpy()
        t = rows["t"].to_numpy()
        order = np.lexsort((t, rank[code])) if layout == "sim-first" else \
            np.lexsort((rank[code], t))
        rows = rows.take(order)
        path.unlink()
        if layout == "small-files":
            for start in range(0, rows.num_rows, per_file):
                _write(rows.slice(start, per_file), tmp / "signals" / f"part-{written:05d}.parquet")
                written += 1
            continue
        if writer is None:
            writer = pq.ParquetWriter(tmp / "signals" / "signals.parquet", rows.schema,
                                      use_dictionary=["episode_id"], write_page_checksum=True)
        writer.write_table(rows, row_group_size=1_000_000)
    if writer is not None:
        writer.close()
    shutil.rmtree(tmp / "blocks")
    tmp.rename(out)
    return out


def _row_bytes(schema: pa.Schema) -> int:
    return 16 + sum(f.type.bit_width // 8 for f in schema if pa.types.is_floating(f.type))


def _write(rows: pa.Table, path: Path) -> None:
    pq.write_table(rows, path, use_dictionary=["episode_id"], write_page_checksum=True,
                   row_group_size=1_000_000)


def _route(source: pads.Dataset, ids: np.ndarray, block: np.ndarray, n_blocks: int,
           folder: Path) -> list[Path]:
    """One pass: each row to its episode's block file; the block files, in block order."""
    folder.mkdir()
    paths = [folder / f"block-{b:05d}.parquet" for b in range(n_blocks)]
    writers: dict[int, pq.ParquetWriter] = {}
    lookup = pa.array(ids)
    for batch in source.to_batches():
        code = pc.index_in(batch["episode_id"], value_set=lookup).to_numpy()
        where = block[code]
        order = np.argsort(where, kind="stable")
        rows = pa.Table.from_batches([batch]).take(order)
        counts = np.bincount(where, minlength=n_blocks)
        start = 0
        for b, n in enumerate(counts.tolist()):
            if n:
                if b not in writers:
                    writers[b] = pq.ParquetWriter(paths[b], rows.schema, compression="none")
                writers[b].write_table(rows.slice(start, n))
            start += n
    for writer in writers.values():
        writer.close()
    return [paths[b] for b in sorted(writers)]

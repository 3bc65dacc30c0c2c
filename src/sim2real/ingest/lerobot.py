"""LeRobot datasets (format v2.1 and v3.0), read from their Parquet and ``meta/`` files.

No dependency on the lerobot package or torch: pyarrow reads the frames, ``meta/info.json``
names the features. Vector features become one channel per element (named from the
feature's ``names``), image features (PNG in the Parquet) become perception statistics;
video features live in MP4 files outside the Parquet and are skipped with a warning.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sim2real.dataset import Channel, write_dataset
from sim2real.errors import IngestError
from sim2real.ingest._tables import EpisodeDefaults, finish_rows, signals_table
from sim2real.ingest.images import STATS, decode_compressed, episode_image_columns

__all__ = ["ingest_lerobot", "read_lerobot"]

_INDEX = {"index", "episode_index", "frame_index", "timestamp", "task_index"}
_NUMERIC = {"float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"}


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as err:
        msg = f"{path}: missing; a LeRobot dataset has meta/info.json (format v2.1 or v3.0)"
        raise IngestError(msg) from err
    except json.JSONDecodeError as err:
        raise IngestError(f"{path}: not valid JSON ({err})") from err


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _element_names(key: str, feature: dict[str, Any]) -> list[str]:
    """Column names of a vector feature: ``state_<name>`` from ``names`` or ``state_<i>``."""
    base = re.sub(r"[^0-9A-Za-z]+", "_", key.removeprefix("observation.")).strip("_")
    size = int(np.prod(feature.get("shape") or [1]))
    names = feature.get("names")
    if isinstance(names, dict):  # older datasets: {"motors": [...]}
        names = next(iter(names.values()), None)
    if isinstance(names, list) and len(names) == size and all(isinstance(n, str) for n in names):
        return [f"{base}_{re.sub(r'[^0-9A-Za-z]+', '_', n).strip('_')}" for n in names]
    return [base] if size == 1 else [f"{base}_{i}" for i in range(size)]


def _family(key: str) -> str:
    if key == "action" or key.startswith("action."):
        return "policy"
    return "perception" if "image" in key else "dynamics"


def _tasks(root: Path, version: str) -> dict[int, str]:
    if version.startswith("v3"):
        path = root / "meta" / "tasks.parquet"
        if not path.exists():
            return {}
        table = pq.read_table(path).to_pylist()
        # pandas writes the task string as the index column in some versions
        return {int(r["task_index"]): str(r.get("task") or r.get("__index_level_0__"))
                for r in table}
    return {int(r["task_index"]): str(r["task"]) for r in _jsonl(root / "meta" / "tasks.jsonl")}


def _vector(column: pa.ChunkedArray, width: int) -> np.ndarray:
    """``(n_frames, width)`` from a fixed-size-list (or scalar) column."""
    array = column.combine_chunks()
    if pa.types.is_list(array.type) or pa.types.is_fixed_size_list(array.type):
        flat = pc.list_flatten(array).to_numpy(zero_copy_only=False)
        return flat.astype(np.float64).reshape(len(array), width)
    return array.to_numpy(zero_copy_only=False).astype(np.float64).reshape(len(array), 1)


def _images(column: pa.ChunkedArray, where: str) -> list[np.ndarray]:
    frames = []
    for cell in column.to_pylist():
        data = cell.get("bytes") if isinstance(cell, dict) else cell
        if data is None:
            raise IngestError(f"{where}: an image cell holds no PNG bytes (only a path)")
        frames.append(decode_compressed({"data": data, "format": "png"}))
    return frames


def _episode(frames: pa.Table, features: dict[str, Any], episode_id: str,
             where: str) -> tuple[pa.Table, dict[str, str]]:
    frames = frames.sort_by("frame_index")
    t = frames["timestamp"].to_numpy().astype(np.float64)
    if len(t) > 1 and not np.all(np.diff(t) > 0):
        first = int(np.argmax(np.diff(t) <= 0)) + 1
        msg = (f"{where}: episode {episode_id!r}: column 'timestamp' does not increase at "
               f"frame {first}")
        raise IngestError(msg)
    columns: dict[str, np.ndarray] = {}
    families: dict[str, str] = {}
    for key, feature in features.items():
        if key in _INDEX or key not in frames.column_names:
            continue
        if feature.get("dtype") == "image":
            prefix = _element_names(key, {"shape": [1]})[0]
            columns.update(episode_image_columns(prefix, _images(frames[key], where)))
            families.update({f"{prefix}_{s}": "perception" for s in (*STATS, "hist_dist")})
        elif feature.get("dtype") in _NUMERIC:
            names = _element_names(key, feature)
            values = _vector(frames[key], len(names))
            for i, name in enumerate(names):
                columns[name] = values[:, i]
                families[name] = _family(key)
    return signals_table(episode_id, t, columns), families


def read_lerobot(root: str | Path, defaults: EpisodeDefaults | None = None
                 ) -> tuple[pa.Table, pa.Table, list[Channel]]:
    """Read a LeRobot dataset folder.

    Episode IDs are ``<folder>-<episode_index:06d>``; ``task`` comes from the episode's
    first task; by default episodes are ``real`` successes (LeRobot records demonstrations)
    of deployment ``<folder>`` starting at ``meta/info.json``'s modification time, one
    after another; ``defaults`` override any of these.

    Returns:
        ``(episodes, signals, channels)``.

    Raises:
        IngestError: ``meta/info.json`` is missing, the format version is not 2.x or 3.x,
            no data file exists, or timestamps do not increase.
    """
    root = Path(root)
    info = _json(root / "meta" / "info.json")
    version = str(info.get("codebase_version", ""))
    if not version.startswith(("v2", "v3")):
        msg = f"{root / 'meta' / 'info.json'}: codebase_version {version!r}; expected v2.1 or v3.0"
        raise IngestError(msg)
    features: dict[str, Any] = info.get("features", {})
    for key, feature in features.items():
        if feature.get("dtype") == "video":
            warnings.warn(f"{root}: video feature {key!r} is stored as MP4 and is skipped",
                          stacklevel=2)
    files = sorted((root / "data").rglob("*.parquet"))
    if not files:
        raise IngestError(f"{root / 'data'}: no Parquet files; expected data/chunk-*/*.parquet")
    tasks = _tasks(root, version)
    start = dt.datetime.fromtimestamp((root / "meta" / "info.json").stat().st_mtime, tz=dt.UTC)
    rows, parts, families, offset = [], [], {}, 0.0
    for path in files:
        table = pq.read_table(path)
        if not {"episode_index", "timestamp", "frame_index"} <= set(table.column_names):
            msg = (f"{path}: expected columns episode_index, frame_index, timestamp; "
                   f"found {table.column_names}")
            raise IngestError(msg)
        for index in sorted(set(table["episode_index"].to_pylist())):
            frames = table.filter(pc.equal(table["episode_index"], index))
            episode_id = f"{root.name}-{int(index):06d}"
            signals, fams = _episode(frames, features, episode_id, str(path))
            families.update(fams)
            parts.append(signals)
            started = start + dt.timedelta(seconds=offset)
            offset += float(signals["t"][-1].as_py()) + 1.0 if signals.num_rows else 1.0
            task_index = frames["task_index"][0].as_py() if "task_index" in frames.column_names \
                else None
            rows.append({"episode_id": episode_id, "source": "real",
                         "task": tasks.get(task_index, "default") if task_index is not None
                         else "default", "outcome": "success", "deployment": root.name,
                         "started_at": started})
    channels = [Channel(n, f) for n, f in families.items()]  # type: ignore[arg-type]
    signals = pa.concat_tables(parts, promote_options="default")
    return finish_rows(rows, defaults or EpisodeDefaults()), signals, channels


def ingest_lerobot(root: str | Path, out: str | Path, *,
                   defaults: EpisodeDefaults | None = None, append: bool = False) -> list[str]:
    """Convert a LeRobot dataset folder into the dataset at ``out`` (atomically; see write_dataset).

    Returns:
        The IDs of the episodes written.
    """
    episodes, signals, channels = read_lerobot(root, defaults)
    write_dataset(out, episodes, signals, channels=channels, append=append)
    return [str(e) for e in episodes["episode_id"].to_pylist()]

"""LeRobot datasets (format v2.1 and v3.0), read from their Parquet and ``meta/`` files.

No dependency on the lerobot package or torch: pyarrow reads the frames, ``meta/info.json``
names the features. Vector features (observation.state, action, ...) become one channel per
element (named from the feature's ``names``), image features (PNG in the Parquet) become
perception statistics; video features live in MP4 files outside the Parquet and are
skipped with a warning. ``next.success``, ``next.done`` and ``next.reward`` are episode
facts, never channels: an episode with ``next.success`` set on some frame is a success.
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
from sim2real.ingest._facts import Facts, finish_rows
from sim2real.ingest._tables import (
    EpisodeDefaults,
    read_families,
    signals_table,
    warn_nonfinite,
)
from sim2real.ingest.images import STATS, decode_compressed, episode_image_columns
from sim2real.ingest.mapping import Mapping

__all__ = ["ingest_lerobot", "read_lerobot"]

_INDEX = {"index", "episode_index", "frame_index", "timestamp", "task_index"}
_FACTS = {"next.success", "next.done", "next.reward"}
_NUMERIC = {"float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"}
_ERRORS = (pa.ArrowException, OSError, ValueError, KeyError, TypeError, IndexError)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        msg = f"{path}: missing; a LeRobot dataset has meta/info.json (format v2.1 or v3.0)"
        raise IngestError(msg) from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise IngestError(f"{path}: not valid JSON ({err})") from err


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise IngestError(f"{path}: line {number} is not valid JSON ({err})") from err
        if not isinstance(row, dict):
            raise IngestError(f"{path}: line {number}: expected a JSON object")
        rows.append(row)
    return rows


def _features(info: Any, path: Path) -> dict[str, dict[str, Any]]:
    """``info.json``'s ``features``, checked: a map of feature name to a map with a dtype.

    Raises:
        IngestError: names the key of the first feature of the wrong shape.
    """
    if not isinstance(info, dict):
        raise IngestError(f"{path}: expected a JSON object with codebase_version and features")
    features = info.get("features", {})
    if not isinstance(features, dict):
        raise IngestError(f"{path}: key 'features': expected an object of feature name -> "
                          f"{{dtype, shape, names}}, got {type(features).__name__}")
    for key, feature in features.items():
        shape = feature.get("shape", [1]) if isinstance(feature, dict) else None
        if not isinstance(feature, dict) or not isinstance(feature.get("dtype"), str) or not (
                shape is None or (isinstance(shape, list)
                                  and all(isinstance(n, int) and n >= 0 for n in shape))):
            raise IngestError(f"{path}: key 'features.{key}': expected {{dtype: str, shape: "
                              f"[int, ...], names: ...}}, got {json.dumps(feature)[:80]}")
    return features


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


def _family(key: str) -> str | None:
    """The family LeRobot's own naming tells; ``None`` leaves it to the dataset loader,
    which infers it from the channel name and says so in the report."""
    if key == "action" or key.startswith("action."):
        return "policy"
    if key == "observation.state":
        return "dynamics"
    return "perception" if "image" in key else None


def _tasks(root: Path, version: str) -> dict[int, str]:
    if version.startswith("v3"):
        path = root / "meta" / "tasks.parquet"
        if not path.exists():
            return {}
        table = _read(path).to_pylist()
        # pandas writes the task string as the index column in some versions
        return {int(r["task_index"]): str(r.get("task") or r.get("__index_level_0__"))
                for r in table}
    return {int(r["task_index"]): str(r["task"]) for r in _jsonl(root / "meta" / "tasks.jsonl")}


def _episode_tasks(root: Path, version: str) -> dict[int, str]:
    """Each episode's first task string from the episode metadata, where it is listed."""
    rows: list[dict[str, Any]] = []
    if version.startswith("v3"):
        for path in sorted((root / "meta" / "episodes").rglob("*.parquet")):
            rows += _read(path, ["episode_index", "tasks"]).to_pylist()
    else:
        rows = _jsonl(root / "meta" / "episodes.jsonl")
    out = {}
    for row in rows:
        tasks = row.get("tasks")
        if isinstance(tasks, list) and tasks and row.get("episode_index") is not None:
            out[int(row["episode_index"])] = str(tasks[0])
    return out


def _read(path: Path, columns: list[str] | None = None) -> pa.Table:
    """A Parquet file, its page checksums verified where the writer stored them."""
    try:
        source = pq.ParquetFile(path, page_checksum_verification=True)
        present = source.schema_arrow.names
        return source.read(columns=None if columns is None else
                           [c for c in columns if c in present])
    except _ERRORS as err:
        raise IngestError(f"{path}: not a readable Parquet file ({err})") from err


def _vector(column: pa.ChunkedArray, width: int, where: str) -> np.ndarray:
    """``(n_frames, width)`` from a fixed-size-list (or scalar) column."""
    array = column.combine_chunks()
    try:
        if pa.types.is_list(array.type) or pa.types.is_fixed_size_list(array.type):
            flat = pc.list_flatten(array).to_numpy(zero_copy_only=False)
            return flat.astype(np.float64).reshape(len(array), width)
        return array.to_numpy(zero_copy_only=False).astype(np.float64).reshape(len(array), 1)
    except (ValueError, TypeError, pa.ArrowException) as err:
        msg = f"{where}: does not hold {width} number(s) per frame as info.json says ({err})"
        raise IngestError(msg) from err


def _images(column: pa.ChunkedArray, where: str) -> list[np.ndarray]:
    frames = []
    for cell in column.to_pylist():
        data = cell.get("bytes") if isinstance(cell, dict) else cell
        if data is None:
            raise IngestError(f"{where}: an image cell holds no PNG bytes (only a path)")
        frames.append(decode_compressed({"data": data, "format": "png"}))
    return frames


def _episode(frames: pa.Table, features: dict[str, Any], episode_id: str,
             where: str) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, str | None]]:
    """``(t, columns, families)`` of one episode's frames."""
    frames = frames.sort_by("frame_index")
    t = frames["timestamp"].to_numpy(zero_copy_only=False).astype(np.float64)
    if len(t) > 1 and not np.all(np.diff(t) > 0):
        first = int(np.argmax(~(np.diff(t) > 0))) + 1
        msg = (f"{where}: episode {episode_id!r}: column 'timestamp' does not increase at "
               f"frame {first}")
        raise IngestError(msg)
    columns: dict[str, np.ndarray] = {}
    families: dict[str, str | None] = {}
    for key, feature in features.items():
        if key in _INDEX or key in _FACTS or key not in frames.column_names:
            continue
        if feature.get("dtype") == "image":
            prefix = _element_names(key, {"shape": [1]})[0]
            columns.update(episode_image_columns(prefix, _images(frames[key], where)))
            families.update({f"{prefix}_{s}": "perception" for s in (*STATS, "hist_dist")})
        elif feature.get("dtype") in _NUMERIC:
            names = _element_names(key, feature)
            values = _vector(frames[key], len(names), f"{where}: column {key!r}")
            for i, name in enumerate(names):
                columns[name] = values[:, i]
                families[name] = _family(key)
    return t, columns, families


def _outcome(frames: pa.Table) -> str:
    """``next.success`` set on any frame: a success; never set: a failure; absent: success
    (LeRobot records demonstrations)."""
    if "next.success" not in frames.column_names:
        return "success"
    flags = frames["next.success"].combine_chunks()
    if pa.types.is_list(flags.type) or pa.types.is_fixed_size_list(flags.type):
        flags = pc.list_flatten(flags)
    return "success" if pc.any(flags.cast(pa.bool_())).as_py() else "failure"


def read_lerobot(root: str | Path, defaults: EpisodeDefaults | None = None, *,
                 mapping: Mapping | None = None,
                 families: Path | None = None) -> tuple[pa.Table, pa.Table, list[Channel]]:
    """Read a LeRobot dataset folder.

    Episode IDs are ``<folder>-<episode_index:06d>``; ``task`` comes from the episode's
    first task; by default episodes are ``real`` (successes unless ``next.success`` says
    otherwise) of deployment ``<folder>`` starting at ``meta/info.json``'s modification
    time, one after another. A ``mapping`` reads more facts (``{feature: next.done}``,
    ``{path: '/(success|failure)/'}``...); ``defaults`` override; the sidecar last, keyed by
    episode ID or episode index. ``families`` (a ``channel,family,unit`` CSV) declares
    families beyond LeRobot's own naming (state: dynamics, action: policy, images:
    perception).

    Returns:
        ``(episodes, signals, channels)``.

    Raises:
        IngestError: ``meta/info.json`` is missing or of the wrong shape, the format version
            is not 2.x or 3.x, no data file exists or one cannot be read, or timestamps do
            not increase; the message names the file and key.
    """
    root = Path(root)
    info_path = root / "meta" / "info.json"
    info = _json(info_path)
    features = _features(info, info_path)
    version = str(info.get("codebase_version", ""))
    if not version.startswith(("v2", "v3")):
        raise IngestError(f"{info_path}: codebase_version {version!r}; expected v2.1 or v3.0")
    for key, feature in features.items():
        if feature.get("dtype") == "video":
            warnings.warn(f"{root}: video feature {key!r} is stored as MP4 and is skipped",
                          stacklevel=2)
    files = sorted((root / "data").rglob("*.parquet"))
    if not files:
        raise IngestError(f"{root / 'data'}: no Parquet files; expected data/chunk-*/*.parquet")
    tasks, episode_tasks = _tasks(root, version), _episode_tasks(root, version)
    start = dt.datetime.fromtimestamp(info_path.stat().st_mtime, tz=dt.UTC)
    rows: list[dict[str, Any]] = []
    facts: list[Facts] = []
    parts, found, offset = [], {}, 0.0
    samples: list[dict[str, np.ndarray]] = []
    for path in files:
        table = _read(path)
        if not {"episode_index", "timestamp", "frame_index"} <= set(table.column_names):
            msg = (f"{path}: expected columns episode_index, frame_index, timestamp; "
                   f"found {table.column_names}")
            raise IngestError(msg)
        for name, check in (("episode_index", pa.types.is_integer),
                            ("frame_index", pa.types.is_integer),
                            ("timestamp", pa.types.is_floating)):
            kind = table.schema.field(name).type
            if not check(kind):
                raise IngestError(f"{path}: column {name!r} holds {kind}; expected "
                                  f"{'seconds' if name == 'timestamp' else 'integers'}")
        for index in sorted(set(table["episode_index"].to_pylist()) - {None}):
            frames = table.filter(pc.equal(table["episode_index"], index))
            episode_id = f"{root.name}-{int(index):06d}"
            try:
                t, columns, fams = _episode(frames, features, episode_id, str(path))
            except IngestError:
                raise
            except Exception as err:  # a damaged file that info.json does not describe
                msg = (f"{path}: episode {episode_id!r} cannot be read ({type(err).__name__}: "
                       f"{err}); does meta/info.json describe its columns?")
                raise IngestError(msg) from err
            found.update(fams)
            samples.append(columns)
            signals = signals_table(episode_id, t, columns)
            parts.append(signals)
            task_index = frames["task_index"][0].as_py() if "task_index" in frames.column_names \
                else None
            task = episode_tasks.get(int(index)) or (
                tasks.get(int(task_index)) if task_index is not None else None)
            rows.append({"episode_id": episode_id, "_name": str(int(index)), "source": "real",
                         "task": task or "default", "outcome": _outcome(frames),
                         "deployment": root.name,
                         "started_at": start + dt.timedelta(seconds=offset)})
            facts.append(Facts(f"{path}: episode {episode_id!r}", root, frames=frames))
            offset += float(signals["t"][-1].as_py()) + 1.0 if signals.num_rows else 1.0
    declared = {c.name: c for c in read_families(families)} if families else {}
    channels = [declared.get(n) or Channel(n, f)  # type: ignore[arg-type]
                for n, f in found.items() if n in declared or f is not None]
    warn_nonfinite(str(root), samples)
    signals = pa.concat_tables(parts, promote_options="default")
    episodes = finish_rows(rows, defaults or EpisodeDefaults(), mapping, facts)
    return episodes, signals, channels


def ingest_lerobot(root: str | Path, out: str | Path, *,
                   defaults: EpisodeDefaults | None = None, append: bool = False,
                   mapping: Mapping | None = None, families: Path | None = None) -> list[str]:
    """Convert a LeRobot dataset folder into the dataset at ``out`` (atomically; see
    :func:`read_lerobot` for the options and write_dataset for ``append``).

    Returns:
        The IDs of the episodes written.
    """
    episodes, signals, channels = read_lerobot(root, defaults, mapping=mapping,
                                               families=families)
    write_dataset(out, episodes, signals, channels=channels, append=append)
    return [str(e) for e in episodes["episode_id"].to_pylist()]

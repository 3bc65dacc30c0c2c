"""robomimic HDF5 files: ``data/demo_N`` with ``actions``, ``states``, ``rewards``, ``obs/<key>``.

Each demo becomes one episode ``<file stem>-demo_N``; ``obs/<key>`` vectors become
``<key>_<i>`` channels, image observations (uint8 ``(T, H, W, C)``) perception statistics,
``actions`` ``action_<i>`` (policy), ``states`` ``state_<i>`` and ``rewards`` ``reward``.
robomimic stores no time stamps: ``t = step / rate`` with ``rate`` from ``env_args``'
``control_freq`` when present (robosuite), else 20 Hz.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from sim2real._optional import require
from sim2real.dataset import Channel, infer_family, write_dataset
from sim2real.errors import IngestError
from sim2real.ingest._tables import EpisodeDefaults, finish_rows, signals_table
from sim2real.ingest.images import STATS, episode_image_columns

__all__ = ["ingest_robomimic", "read_robomimic"]

_LAYOUT = "data/demo_N groups holding actions, and optionally states, rewards, dones, obs/<key>"
_DEMO = re.compile(r"demo_(\d+)$")


def _env_args(data: Any) -> dict[str, Any]:
    raw = data.attrs.get("env_args")
    if raw is None:
        return {}
    try:
        return dict(json.loads(raw if isinstance(raw, str) else raw.decode()))
    except (ValueError, AttributeError):
        return {}


def _demos(data: Any, where: str) -> list[str]:
    names = [n for n in data if _DEMO.match(n)]
    if not names:
        msg = (f"{where}: key 'data' holds no demo_N groups (found {list(data)[:5]}); "
               f"expected {_LAYOUT}")
        raise IngestError(msg)
    return sorted(names, key=lambda n: int(_DEMO.match(n).group(1)))  # type: ignore[union-attr]


def _splits(handle: Any) -> dict[str, str]:
    """Demo name -> split name from ``mask/<split>`` (the first split that lists it)."""
    out: dict[str, str] = {}
    mask = handle.get("mask")
    if mask is None:
        return out
    for split in mask:
        for name in mask[split][()]:
            out.setdefault(name.decode() if isinstance(name, bytes) else str(name), split)
    return out


def _columns(demo: Any, n: int, where: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    columns: dict[str, np.ndarray] = {}
    families: dict[str, str] = {}

    def add(base: str, array: np.ndarray, family: str | None) -> None:
        if array.shape[0] != n:
            msg = f"{where}: key {base!r} has {array.shape[0]} steps; 'actions' has {n}"
            raise IngestError(msg)
        flat = array.reshape(n, -1).astype(np.float64)
        names = [base] if flat.shape[1] == 1 else [f"{base}_{i}" for i in range(flat.shape[1])]
        for i, name in enumerate(names):
            columns[name] = flat[:, i]
            families[name] = family or infer_family(name) or "dynamics"

    add("action", demo["actions"][()], "policy")
    if "states" in demo:
        add("state", demo["states"][()], "dynamics")
    if "rewards" in demo:
        add("reward", demo["rewards"][()], "policy")
    obs = demo.get("obs")
    for key in sorted(obs) if obs is not None else []:
        array = obs[key][()]
        name = re.sub(r"[^0-9A-Za-z]+", "_", key).strip("_")
        if array.dtype == np.uint8 and array.ndim in (3, 4):  # (T, H, W[, C]) frames
            columns.update(episode_image_columns(name, list(array)))
            families.update({f"{name}_{s}": "perception" for s in (*STATS, "hist_dist")})
        else:
            add(name, array, None)
    return columns, families


def _outcome(demo: Any) -> str:
    """Success when the last ``dones`` flag is set or any reward is positive."""
    if "dones" in demo and len(demo["dones"]) and bool(demo["dones"][-1]):
        return "success"
    if "rewards" in demo and len(demo["rewards"]) and float(np.max(demo["rewards"][()])) > 0:
        return "success"
    return "failure"


def read_robomimic(path: str | Path, defaults: EpisodeDefaults | None = None,
                   rate: float | None = None) -> tuple[pa.Table, pa.Table, list[Channel]]:
    """Read a robomimic HDF5 file; demos are ``sim`` episodes unless ``defaults`` say otherwise.

    Returns:
        ``(episodes, signals, channels)``.

    Raises:
        IngestError: the file is not HDF5 or not robomimic's layout (names the key).
    """
    h5py = require("h5py", "ingest")
    path = Path(path)
    where = str(path)
    try:
        handle = h5py.File(path, "r")
    except OSError as err:
        raise IngestError(f"{where}: not a readable HDF5 file ({err}); expected {_LAYOUT}") from err
    with handle:
        data = handle.get("data")
        if data is None or not isinstance(data, h5py.Group):
            msg = f"{where}: no group 'data' (found {list(handle)[:5]}); expected {_LAYOUT}"
            raise IngestError(msg)
        env = _env_args(data)
        hz = rate or float(env.get("env_kwargs", {}).get("control_freq") or 20.0)
        splits = _splits(handle)
        rows, parts, families = [], [], {}
        for name in _demos(data, where):
            demo = data[name]
            if "actions" not in demo:
                msg = f"{where}: key 'data/{name}/actions' is missing; expected {_LAYOUT}"
                raise IngestError(msg)
            n = int(demo["actions"].shape[0])
            columns, fams = _columns(demo, n, f"{where}: data/{name}")
            families.update(fams)
            episode_id = f"{path.stem}-{name}"
            parts.append(signals_table(episode_id, np.arange(n) / hz, columns))
            row: dict[str, Any] = {"episode_id": episode_id, "source": "sim",
                                   "task": str(env.get("env_name") or path.stem),
                                   "outcome": _outcome(demo)}
            if name in splits:
                row["ctx.split"] = splits[name]
            rows.append(row)
    channels = [Channel(n, f) for n, f in families.items()]  # type: ignore[arg-type]
    signals = pa.concat_tables(parts, promote_options="default")
    return finish_rows(rows, defaults or EpisodeDefaults()), signals, channels


def ingest_robomimic(path: str | Path, out: str | Path, *,
                     defaults: EpisodeDefaults | None = None,
                     rate: float | None = None, append: bool = False) -> list[str]:
    """Convert a robomimic HDF5 file into the dataset at ``out`` (atomically; see write_dataset).

    Returns:
        The IDs of the episodes written.
    """
    episodes, signals, channels = read_robomimic(path, defaults, rate)
    write_dataset(out, episodes, signals, channels=channels, append=append)
    return [str(e) for e in episodes["episode_id"].to_pylist()]

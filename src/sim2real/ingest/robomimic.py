"""robomimic HDF5 files: ``data/demo_N`` with ``actions``, ``states``, ``rewards``, ``obs/<key>``.

Each demo becomes one episode ``<file stem>-demo_N``; ``obs/<key>`` vectors become
``<key>_<i>`` channels, image observations (uint8 ``(T, H, W, C)``) perception statistics,
``actions`` ``action_<i>`` (policy), ``states`` ``state_<i>`` and ``rewards`` ``reward``;
the families of other observations are left to the dataset loader (inferred from their
names, and said so) unless a ``--families`` CSV declares them. robomimic stores no time
stamps: ``t = step / rate`` with ``rate`` from ``env_args``' ``control_freq`` when present
(robosuite), else 20 Hz. A mapping reads episode facts from demo and file attributes
(``{attr: success}``).
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from sim2real._optional import require
from sim2real.dataset import Channel, write_dataset
from sim2real.errors import IngestError
from sim2real.ingest._facts import Facts, finish_rows
from sim2real.ingest._tables import (
    EpisodeDefaults,
    read_families,
    signals_table,
    warn_nonfinite,
)
from sim2real.ingest.images import STATS, episode_image_columns
from sim2real.ingest.mapping import Mapping

__all__ = ["ingest_robomimic", "read_robomimic"]

_LAYOUT = "data/demo_N groups holding actions, and optionally states, rewards, dones, obs/<key>"
_DEMO = re.compile(r"demo_(\d+)$")


def _member(group: Any, name: str) -> Any:
    """``group[name]``, ``None`` when there is no such link. (h5py's ``get`` also answers
    ``None`` for a member it cannot open, hiding a damaged file.)"""
    return group[name] if name in group else None  # noqa: SIM401 - get() is the problem


def _env_args(data: Any) -> dict[str, Any]:
    raw = data.attrs.get("env_args")
    if raw is None:
        return {}
    try:
        return dict(json.loads(raw if isinstance(raw, str) else raw.decode()))
    except (ValueError, AttributeError, TypeError):
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
    mask = _member(handle, "mask")
    if mask is None:
        return out
    for split in mask:
        for name in mask[split][()]:
            out.setdefault(name.decode() if isinstance(name, bytes) else str(name), split)
    return out


def _columns(demo: Any, n: int,
             where: str) -> tuple[dict[str, np.ndarray], dict[str, str | None]]:
    columns: dict[str, np.ndarray] = {}
    families: dict[str, str | None] = {}

    def add(base: str, array: np.ndarray, family: str | None) -> None:
        if array.ndim == 0 or array.shape[0] != n:
            steps = array.shape[0] if array.ndim else "no"
            msg = f"{where}: key {base!r} has {steps} steps; 'actions' has {n}"
            raise IngestError(msg)
        try:
            flat = array.reshape(n, -1).astype(np.float64)
        except (ValueError, TypeError) as err:
            msg = f"{where}: key {base!r} holds {array.dtype} values; expected numbers"
            raise IngestError(msg) from err
        names = [base] if flat.shape[1] == 1 else [f"{base}_{i}" for i in range(flat.shape[1])]
        for i, name in enumerate(names):
            columns[name] = flat[:, i]
            families[name] = family

    add("action", _stored(demo["actions"], where), "policy")
    if "states" in demo:
        add("state", _stored(demo["states"], where), "dynamics")
    if "rewards" in demo:
        add("reward", _stored(demo["rewards"], where), "policy")
    obs = _member(demo, "obs")
    for key in sorted(obs) if obs is not None else []:
        array = _stored(obs[key], where)
        name = re.sub(r"[^0-9A-Za-z]+", "_", key).strip("_")
        if array.dtype == np.uint8 and array.ndim in (3, 4) and n:  # (T, H, W[, C]) frames
            columns.update(episode_image_columns(name, list(array)))
            families.update({f"{name}_{s}": "perception" for s in (*STATS, "hist_dist")})
        else:
            add(name, array, None)
    return columns, families


def _stored(dataset: Any, where: str) -> np.ndarray:
    """A dataset's values, refusing a chunked one whose chunks are not all stored: HDF5
    reads a missing chunk (never written, or its index damaged) as fill values."""
    if dataset.chunks is not None and dataset.size:
        expected = int(np.prod([-(-n // c) for n, c in zip(dataset.shape, dataset.chunks,
                                                            strict=True)]))
        if dataset.id.get_num_chunks() < expected:
            msg = (f"{where}: key {dataset.name!r} has {dataset.id.get_num_chunks()} of its "
                   f"{expected} chunks stored; the file is damaged or was not fully written")
            raise IngestError(msg)
    return np.asarray(dataset[()])


def _outcome(demo: Any) -> str:
    """Success when the last ``dones`` flag is set or any reward is positive."""
    if "dones" in demo and len(demo["dones"]) and bool(demo["dones"][-1]):
        return "success"
    if "rewards" in demo and len(demo["rewards"]) and float(np.max(demo["rewards"][()])) > 0:
        return "success"
    return "failure"


def _rate(env: dict[str, Any], rate: float | None, where: str) -> float:
    kwargs = env.get("env_kwargs")
    found = kwargs.get("control_freq") if isinstance(kwargs, dict) else None
    try:
        hz = float(rate or found or 20.0)
    except (TypeError, ValueError) as err:
        msg = f"{where}: env_args control_freq {found!r} is not a number; pass --rate"
        raise IngestError(msg) from err
    if not np.isfinite(hz) or hz <= 0:
        raise IngestError(f"{where}: a rate of {hz} steps per second; pass --rate")
    return hz


def _attrs(demo: Any, data: Any) -> Any:
    """An attribute by name: the demo's, else the file's ``data`` group's."""
    def get(name: str) -> Any:
        found = demo.attrs.get(name)
        return data.attrs.get(name) if found is None else found
    return get


def read_robomimic(path: str | Path, defaults: EpisodeDefaults | None = None,
                   rate: float | None = None, *, mapping: Mapping | None = None,
                   families: Path | None = None) -> tuple[pa.Table, pa.Table, list[Channel]]:
    """Read a robomimic HDF5 file; demos are ``sim`` episodes unless ``defaults`` say otherwise.

    A ``mapping`` reads more facts (``{attr: operator}``, ``{path: ...}``); ``defaults``
    override; the sidecar last, keyed by episode ID or demo name (``demo_5``). ``families``
    (a ``channel,family,unit`` CSV) declares the observations' families. A demo without
    steps is left out with a warning.

    Returns:
        ``(episodes, signals, channels)``.

    Raises:
        IngestError: the file is not HDF5, not robomimic's layout, or damaged (names the key).
    """
    h5py = require("h5py", "ingest")
    path = Path(path)
    where = str(path)
    try:
        handle = h5py.File(path, "r")
    except Exception as err:  # not HDF5, or a damaged superblock
        raise IngestError(f"{where}: not a readable HDF5 file ({err}); expected {_LAYOUT}") from err
    try:
        with handle:
            episodes, parts, found = _read_demos(h5py, handle, path, defaults, rate, mapping)
    except IngestError:
        raise
    except Exception as err:  # h5py on a damaged file
        msg = f"{where}: cannot be read, damaged ({type(err).__name__}: {err})"
        raise IngestError(msg) from err
    declared = {c.name: c for c in read_families(families)} if families else {}
    channels = [declared.get(n) or Channel(n, f)  # type: ignore[arg-type]
                for n, f in found.items() if n in declared or f is not None]
    signals = pa.concat_tables(parts, promote_options="default")
    return episodes, signals, channels


def _read_demos(h5py: Any, handle: Any, path: Path, defaults: EpisodeDefaults | None,
                rate: float | None, mapping: Mapping | None
                ) -> tuple[pa.Table, list[pa.Table], dict[str, str | None]]:
    """The episodes table, each demo's signals and each channel's family (if known)."""
    where = str(path)
    rows: list[dict[str, Any]] = []
    facts: list[Facts] = []
    parts, found = [], {}
    samples: list[dict[str, np.ndarray]] = []
    data = _member(handle, "data")
    if data is None or not isinstance(data, h5py.Group):
        msg = f"{where}: no group 'data' (found {list(handle)[:5]}); expected {_LAYOUT}"
        raise IngestError(msg)
    env = _env_args(data)
    hz = _rate(env, rate, where)
    splits = _splits(handle)
    for name in _demos(data, where):
        try:
            demo = data[name]
            if not isinstance(demo, h5py.Group) or "actions" not in demo:
                msg = f"{where}: key 'data/{name}/actions' is missing; expected {_LAYOUT}"
                raise IngestError(msg)
            n = int(demo["actions"].shape[0]) if demo["actions"].shape else 0
            if n == 0:
                warnings.warn(f"{where}: data/{name} has no steps; left out", stacklevel=2)
                continue
            columns, fams = _columns(demo, n, f"{where}: data/{name}")
            outcome = _outcome(demo)
        except IngestError:
            raise
        except Exception as err:  # h5py on a damaged demo
            msg = f"{where}: data/{name} cannot be read, damaged ({type(err).__name__}: {err})"
            raise IngestError(msg) from err
        found.update(fams)
        samples.append(columns)
        episode_id = f"{path.stem}-{name}"
        parts.append(signals_table(episode_id, np.arange(n) / hz, columns))
        row: dict[str, Any] = {"episode_id": episode_id, "_name": name, "source": "sim",
                               "task": str(env.get("env_name") or path.stem),
                               "outcome": outcome}
        if name in splits:
            row["ctx.split"] = splits[name]
        rows.append(row)
        facts.append(Facts(f"{where}: episode {episode_id!r}", path,
                           attr=_attrs(demo, data)))
    if not rows:
        raise IngestError(f"{where}: no demo has any step; expected {_LAYOUT}")
    warn_nonfinite(where, samples)
    episodes = finish_rows(rows, defaults or EpisodeDefaults(), mapping, facts)
    return episodes, parts, found


def ingest_robomimic(path: str | Path, out: str | Path, *,
                     defaults: EpisodeDefaults | None = None, rate: float | None = None,
                     append: bool = False, mapping: Mapping | None = None,
                     families: Path | None = None) -> list[str]:
    """Convert a robomimic HDF5 file into the dataset at ``out`` (atomically; see
    :func:`read_robomimic` for the options and write_dataset for ``append``).

    Returns:
        The IDs of the episodes written.
    """
    episodes, signals, channels = read_robomimic(path, defaults, rate, mapping=mapping,
                                                 families=families)
    write_dataset(out, episodes, signals, channels=channels, append=append)
    return [str(e) for e in episodes["episode_id"].to_pylist()]

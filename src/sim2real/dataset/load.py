"""Read a dataset folder (local or on an object store) and check every rule of the format."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.dataset as pads

from sim2real.dataset.ids import EpisodeIndex
from sim2real.dataset.location import Location
from sim2real.dataset.schema import (
    CTX_PREFIX,
    FAMILIES,
    PARAM_PREFIX,
    SYS_PREFIX,
    Channel,
    Family,
    ParamRange,
    infer_family,
)
from sim2real.dataset.validate import check_episodes, check_signal_part
from sim2real.errors import DatasetError

__all__ = ["Dataset", "load_dataset"]


@dataclass(frozen=True)
class Dataset:
    """A validated dataset: the episodes table in memory, signals read on demand.

    Attributes:
        root: the dataset folder: a local path or an object-store URI.
        episodes: one row per episode, ``started_at`` as a UTC timestamp.
        signal_files: the Parquet or CSV files holding the samples, on ``root``'s filesystem.
        channels: every channel present in the signals, in column order.
        params: randomisation ranges, keyed by parameter name without ``param.``.
        deployments: real deployments ordered by their earliest ``started_at``.
        durations: each episode's last sample time, seconds (read while validating ``t``).
        warnings: what the loader had to guess (inferred families, derived ranges).
    """

    root: Location
    episodes: pa.Table
    signal_files: tuple[Location, ...]
    channels: Mapping[str, Channel]
    params: Mapping[str, ParamRange]
    deployments: tuple[str, ...]
    durations: Mapping[str, float]
    warnings: tuple[str, ...]

    @property
    def ctx_columns(self) -> list[str]:
        return [c for c in self.episodes.column_names if c.startswith(CTX_PREFIX)]

    @property
    def sys_columns(self) -> list[str]:
        return [c for c in self.episodes.column_names if c.startswith(SYS_PREFIX)]

    def read_signals(
        self,
        episode_ids: Sequence[str] | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """Samples of the given episodes (all when ``None``), ``episode_id`` and ``t`` first.

        Only the named channel columns are read, and row groups whose ``episode_id`` range
        misses the requested IDs are skipped, so reading a few windows stays cheap.
        """
        wanted = ["episode_id", "t", *(columns if columns is not None else self.channels)]
        source = _signal_dataset(self.signal_files)
        present = [c for c in wanted if c in source.schema.names]
        filt = None
        if episode_ids is not None:
            filt = pc.field("episode_id").isin(pa.array(list(episode_ids), pa.string()))
        table = source.to_table(columns=present, filter=filt)
        for name in wanted:
            if name not in table.column_names:
                table = table.append_column(name, pa.nulls(table.num_rows, pa.float64()))
        return table.select(wanted)


def load_dataset(path: str | Path) -> Dataset:
    """Load a dataset folder and validate it against the dataset format.

    Args:
        path: folder with ``episodes.parquet|csv``, ``signals.parquet|csv`` or ``signals/``,
            and optionally ``channels.csv`` and ``params.csv``: a local path or any URI
            pyarrow's filesystems open (``s3://bucket/prefix``, ``gs://...``,
            ``file:///...``; credentials come from the store's usual environment).

    Returns:
        The validated :class:`Dataset`.

    Raises:
        DatasetError: a rule of the format is broken; the message names file, column, row.
    """
    root = Location.parse(path)
    if not root.is_dir():
        raise DatasetError("expected a dataset folder", file=str(root))
    episodes_file = _one_of(root, "episodes.parquet", "episodes.csv")
    episodes = check_episodes(_read_table(episodes_file), str(episodes_file))
    signal_files = _signal_files(root)
    channel_names = _channel_columns(signal_files)
    known = EpisodeIndex(episodes["episode_id"].to_pylist())
    last = np.full(len(known), -np.inf)
    for file in signal_files:
        table = _ids_and_times(file)
        codes = check_signal_part(table, str(file), known)
        # An episode may span files: keep its latest sample time over all of them.
        np.maximum.at(last, codes, table["t"].cast(pa.float64()).to_numpy(zero_copy_only=False))
    durations = {e: float(d) for e, d in zip(known.ids.to_pylist(), last, strict=True)
                 if np.isfinite(d)}
    warnings: list[str] = []
    channels = _channels(root, channel_names, warnings)
    params = _params(root, episodes, warnings)
    return Dataset(
        root=root,
        episodes=episodes,
        signal_files=signal_files,
        channels=channels,
        params=params,
        deployments=_deployment_order(episodes),
        durations=durations,
        warnings=tuple(warnings),
    )


def _one_of(root: Location, *names: str) -> Location:
    for name in names:
        if (root / name).exists():
            return root / name
    raise DatasetError(f"missing; expected one of {', '.join(names)}", file=str(root))


def _read_table(file: Location) -> pa.Table:
    try:
        if file.suffix == ".csv":
            # An empty CSV cell is a missing value, as in every spreadsheet.
            options = pacsv.ConvertOptions(strings_can_be_null=True)
            with file.filesystem.open_input_stream(file.path) as stream:
                return pacsv.read_csv(stream, convert_options=options)
        return pads.dataset(file.path, format="parquet", filesystem=file.filesystem).to_table()
    except (pa.ArrowInvalid, OSError) as err:
        raise DatasetError(f"cannot be read: {err}", file=str(file)) from err


def _signal_files(root: Location) -> tuple[Location, ...]:
    if (root / "signals").is_dir():
        parts = tuple((root / "signals").files(".parquet"))
        if not parts:
            raise DatasetError("folder holds no *.parquet parts", file=str(root / "signals"))
        return parts
    return (_one_of(root, "signals.parquet", "signals.csv"),)


def _signal_dataset(files: Sequence[Location]) -> pads.Dataset:
    fmt = "csv" if files[0].suffix == ".csv" else "parquet"
    return pads.dataset([f.path for f in files], format=fmt, filesystem=files[0].filesystem)


def _ids_and_times(file: Location) -> pa.Table:
    """The ``episode_id`` and ``t`` columns of one signals file, in file order.

    ``episode_id`` comes dictionary-encoded from Parquet: a row group holds a few hundred
    episodes, so decoding one string per sample would cost more than the check itself.
    """
    try:
        if file.suffix == ".csv":
            source = _signal_dataset([file])
        else:
            options = pads.ParquetReadOptions(dictionary_columns={"episode_id"})
            source = pads.dataset(file.path, filesystem=file.filesystem,
                                  format=pads.ParquetFileFormat(read_options=options))
        for required in ("episode_id", "t"):
            if required not in source.schema.names:
                raise DatasetError("required column is missing", file=str(file), column=required)
        return source.to_table(columns=["episode_id", "t"])
    except (pa.ArrowInvalid, OSError) as err:
        raise DatasetError(f"cannot be read: {err}", file=str(file)) from err


def _channel_columns(files: Sequence[Location]) -> list[str]:
    names: dict[str, None] = {}
    for file in files:
        schema = _signal_dataset([file]).schema
        for field in schema:
            if field.name in ("episode_id", "t"):
                continue
            if not (pa.types.is_floating(field.type) or pa.types.is_integer(field.type)
                    or pa.types.is_null(field.type)):
                msg = f"channel must be numeric, found {field.type}"
                raise DatasetError(msg, file=str(file), column=field.name)
            names[field.name] = None
    if not names:
        raise DatasetError("no channel columns besides episode_id and t", file=str(files[0]))
    return list(names)


def _channels(root: Location, names: list[str], warnings: list[str]) -> dict[str, Channel]:
    declared: dict[str, Channel] = {}
    path = root / "channels.csv"
    if path.exists():
        with io.StringIO(path.read_text(), newline="") as f:
            reader = csv.DictReader(f)
            for field in ("channel", "family"):
                if field not in (reader.fieldnames or []):
                    raise DatasetError("required column is missing", file=str(path), column=field)
            for row_number, row in enumerate(reader):
                family = (row["family"] or "").strip()
                if family not in FAMILIES:
                    msg = f"unknown family {family!r}; expected one of {', '.join(FAMILIES)}"
                    raise DatasetError(msg, file=str(path), column="family", row=row_number)
                name = row["channel"].strip()
                declared[name] = Channel(name, family, (row.get("unit") or "").strip())
    channels: dict[str, Channel] = {}
    inferred: list[str] = []
    for name in names:
        if name in declared:
            channels[name] = declared[name]
            continue
        guess: Family | None = infer_family(name)
        if guess is None:
            warnings.append(
                f"channel {name!r}: family neither declared nor inferable; assumed dynamics"
            )
            guess = "dynamics"
        inferred.append(f"{name}->{guess}")
        channels[name] = Channel(name, guess, inferred=True)
    if inferred:
        warnings.append("channel families inferred from names: " + ", ".join(inferred))
    return channels


def _params(root: Location, episodes: pa.Table, warnings: list[str]) -> dict[str, ParamRange]:
    columns = [c for c in episodes.column_names if c.startswith(PARAM_PREFIX)]
    sim = episodes.filter(pc.equal(episodes["source"], "sim"))
    declared: dict[str, ParamRange] = {}
    path = root / "params.csv"
    if path.exists():
        declared = _read_params_csv(path)
    params: dict[str, ParamRange] = {}
    derived: list[str] = []
    for column in columns:
        name = column.removeprefix(PARAM_PREFIX)
        if name in declared:
            params[name] = declared[name]
            continue
        values = sim[column].to_numpy(zero_copy_only=False).astype(float)
        values = values[np.isfinite(values)]
        if values.size == 0:
            continue
        low, high = float(values.min()), float(values.max())
        params[name] = ParamRange(name, low, high, (low + high) / 2)
        derived.append(name)
    if derived:
        warnings.append("parameter ranges taken from the sim rows (no params.csv entry): "
                        + ", ".join(derived))
    return params


def _read_params_csv(path: Location) -> dict[str, ParamRange]:
    out: dict[str, ParamRange] = {}
    with io.StringIO(path.read_text(), newline="") as f:
        reader = csv.DictReader(f)
        for field in ("param", "low", "high"):
            if field not in (reader.fieldnames or []):
                raise DatasetError("required column is missing", file=str(path), column=field)
        for row_number, row in enumerate(reader):
            name = row["param"].strip().removeprefix(PARAM_PREFIX)
            try:
                low, high = float(row["low"]), float(row["high"])
                nominal = float(row["nominal"]) if row.get("nominal") else (low + high) / 2
            except ValueError as err:
                raise DatasetError(f"not a number: {err}", file=str(path), row=row_number) from err
            if not low <= nominal <= high:
                msg = f"expected low <= nominal <= high, got {low}, {nominal}, {high}"
                raise DatasetError(msg, file=str(path), column="param", row=row_number)
            out[name] = ParamRange(name, low, high, nominal)
    return out


def _deployment_order(episodes: pa.Table) -> tuple[str, ...]:
    real = episodes.filter(pc.equal(episodes["source"], "real"))
    if real.num_rows == 0:
        return ()
    grouped = real.group_by("deployment").aggregate([("started_at", "min")])
    ordered = grouped.sort_by([("started_at_min", "ascending"), ("deployment", "ascending")])
    return tuple(ordered["deployment"].to_pylist())

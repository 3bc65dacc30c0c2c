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
from sim2real.dataset.layout import LONG_COLUMNS, Layout, layout_of, to_wide
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
        layout: ``wide`` (a column per channel) or ``long`` (``channel``, ``value`` rows).
    """

    root: Location
    episodes: pa.Table
    signal_files: tuple[Location, ...]
    channels: Mapping[str, Channel]
    params: Mapping[str, ParamRange]
    deployments: tuple[str, ...]
    durations: Mapping[str, float]
    warnings: tuple[str, ...]
    layout: Layout = "wide"

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
        """Samples of the given episodes (all when ``None``), ``episode_id`` and ``t`` first,
        in the wide layout whatever the files' (a long dataset's channels are joined on
        ``t``, null where a channel has no sample).

        Only the named channel columns are read, and row groups whose ``episode_id`` range
        misses the requested IDs are skipped, so reading a few windows stays cheap.
        """
        names = list(columns if columns is not None else self.channels)
        wanted = ["episode_id", "t", *names]
        table = self.read_raw(episode_ids, names)
        if self.layout == "long":
            table = to_wide(table, names)
        for name in wanted:
            if name not in table.column_names:
                table = table.append_column(name, pa.nulls(table.num_rows, pa.float64()))
        return table.select(wanted)

    def read_raw(self, episode_ids: Sequence[str] | None, channels: Sequence[str]) -> pa.Table:
        """Samples of the given episodes (all when ``None``) and ``channels``, as the files
        hold them: ``episode_id``, ``t`` and the channel columns present (wide), or every
        ``episode_id, t, channel, value`` row of those channels (long)."""
        source = _signal_dataset(self.signal_files)
        filt = None
        if episode_ids is not None:
            filt = pc.field("episode_id").isin(pa.array(list(episode_ids), pa.string()))
        if self.layout == "long":
            of_channels = pc.field("channel").isin(pa.array(list(channels), pa.string()))
            filt = of_channels if filt is None else filt & of_channels
            return source.to_table(columns=list(LONG_COLUMNS), filter=filt)
        wanted = ["episode_id", "t", *channels]
        return source.to_table(columns=[c for c in wanted if c in source.schema.names],
                               filter=filt)


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
    layout = _layout(signal_files)
    known = EpisodeIndex(episodes["episode_id"].to_pylist())
    last = np.full(len(known), -np.inf)
    found: set[str] = set()
    for file in signal_files:
        table = _ids_and_times(file, layout)
        if layout == "long":
            _fail_on_null(table["channel"], file)
            found |= _distinct(table["channel"])
        codes = check_signal_part(table, str(file), known)
        # An episode may span files: keep its latest sample time over all of them.
        np.maximum.at(last, codes, table["t"].cast(pa.float64()).to_numpy(zero_copy_only=False))
    durations = {e: float(d) for e, d in zip(known.ids.to_pylist(), last, strict=True)
                 if np.isfinite(d)}
    channel_names = _channel_columns(signal_files) if layout == "wide" else sorted(found)
    if not channel_names:
        what = "channel columns besides episode_id and t" if layout == "wide" else "rows"
        raise DatasetError(f"no {what}", file=str(signal_files[0]))
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
        layout=layout,
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


def _ids_and_times(file: Location, layout: Layout) -> pa.Table:
    """The ``episode_id`` and ``t`` columns of one signals file (and ``channel``, in the
    long layout), in file order.

    ``episode_id`` and ``channel`` come dictionary-encoded from Parquet: a row group holds
    a few hundred episodes, so decoding one string per sample would cost more than the
    check itself.
    """
    keys = ["episode_id", "t"] if layout == "wide" else ["episode_id", "t", "channel"]
    try:
        if file.suffix == ".csv":
            source = _signal_dataset([file])
        else:
            options = pads.ParquetReadOptions(dictionary_columns={"episode_id", "channel"})
            source = pads.dataset(file.path, filesystem=file.filesystem,
                                  format=pads.ParquetFileFormat(read_options=options))
        for required in keys:
            if required not in source.schema.names:
                raise DatasetError("required column is missing", file=str(file), column=required)
        return source.to_table(columns=keys)
    except (pa.ArrowInvalid, OSError) as err:
        raise DatasetError(f"cannot be read: {err}", file=str(file)) from err


def _layout(files: Sequence[Location]) -> Layout:
    """The layout every signals file shares.

    Raises:
        DatasetError: a file breaks its layout's rules, or the files mix layouts.
    """
    layouts = {str(f): layout_of(_schema(f), str(f)) for f in files}
    if len(set(layouts.values())) > 1:
        long = next(f for f, kind in layouts.items() if kind == "long")
        wide = next(f for f, kind in layouts.items() if kind == "wide")
        msg = (f"signals parts mix layouts: this one is long (episode_id, t, channel, value), "
               f"{wide} is wide (a column per channel); write every part in one layout")
        raise DatasetError(msg, file=long)
    return next(iter(layouts.values()))


def _schema(file: Location) -> pa.Schema:
    try:
        return _signal_dataset([file]).schema
    except (pa.ArrowInvalid, OSError) as err:
        raise DatasetError(f"cannot be read: {err}", file=str(file)) from err


def _channel_columns(files: Sequence[Location]) -> list[str]:
    names: dict[str, None] = {}
    for file in files:
        names.update(dict.fromkeys(n for n in _schema(file).names if n not in ("episode_id", "t")))
    return list(names)


def _distinct(column: pa.ChunkedArray) -> set[str]:
    """The distinct values of a (possibly dictionary-encoded) string column."""
    found: set[str] = set()
    for chunk in column.chunks:
        if pa.types.is_dictionary(chunk.type):
            chunk = chunk.dictionary.take(pc.unique(chunk.indices))
        found.update(v for v in pc.unique(chunk).to_pylist() if v is not None)
    return found


def _fail_on_null(column: pa.ChunkedArray, file: Location) -> None:
    missing = pc.is_null(column)
    if pc.any(missing).as_py():
        row = pc.index(missing, True).as_py()
        raise DatasetError("must not be null", file=str(file), column="channel", row=row)


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

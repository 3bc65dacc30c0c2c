"""Read a dataset folder (local or on an object store) and check every rule of the format."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.dataset as pads
import pyarrow.parquet as pq

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
from sim2real.dataset.validate import (
    FLOAT32_MAX,
    PartState,
    SampleSpans,
    check_episodes,
    check_names,
    check_samples,
    check_signal_group,
    check_values,
)
from sim2real.errors import DatasetError

__all__ = ["Dataset", "load_dataset", "signal_batches"]


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
        durations: each episode's last sample time, seconds (read while validating ``t``),
            at most ``span``; episodes without samples are absent.
        warnings: what the loader had to guess (inferred families, derived ranges) or
            left out.
        span: the seconds from an episode's start that are compared: ten times the median
            episode (:data:`~sim2real.dataset.validate.LONG_EPISODE`), so that no runaway
            recording sizes every episode's grid.
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
    span: float = np.inf
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
            present = list(LONG_COLUMNS)
            of_channels = pc.field("channel").isin(pa.array(list(channels), pa.string()))
            filt = of_channels if filt is None else filt & of_channels
        else:
            present = [c for c in ("episode_id", "t", *channels) if c in source.schema.names]
        try:
            table = source.to_table(columns=present, filter=filt)
        except (pa.ArrowException, OSError) as err:
            raise _unreadable(self.signal_files, present, err) from err
        if "t" in table.column_names and table["t"].type != pa.float64():
            # t written as text that reads as numbers throughout (checked when loaded)
            table = table.set_column(1, "t", table["t"].cast(pa.float64()))
        return table


def load_dataset(path: str | Path, *, skip_bad_episodes: bool = False) -> Dataset:
    """Load a dataset folder and validate it against the dataset format.

    Every rule is checked here, before any analysis: the episodes, each signals part's
    footer and its ``episode_id``/``t`` pages (the channels' pages are checked, against their
    page checksums where the writer stored them, as the analysis reads them), channel
    values within range (from the row-group statistics), and the failures' samples.

    Args:
        path: folder with ``episodes.parquet|csv``, ``signals.parquet|csv`` or ``signals/``,
            and optionally ``channels.csv`` and ``params.csv``: a local path or any URI
            pyarrow's filesystems open (``s3://bucket/prefix``, ``gs://...``,
            ``file:///...``; credentials come from the store's usual environment).
        skip_bad_episodes: leave out real failures that cannot be compared (no samples, a
            ``failure_time`` outside them), with a warning, instead of failing.

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
    footers = [_footer(file) for file in signal_files]
    layout = _layout(signal_files, footers)
    channel_names = _channel_columns(signal_files, footers) if layout == "wide" else []
    known = EpisodeIndex(episodes["episode_id"].to_pylist())
    spans = SampleSpans(len(known))
    found: set[str] = set()
    for file, footer in zip(signal_files, footers, strict=True):
        # Row group by row group: a file of any size is never held whole (the state
        # carried between groups is per episode, not per sample).
        state = PartState(str(file), len(known))
        for group in _ids_and_times(file, layout):
            codes, t, series = check_signal_group(group, known, state)
            spans.add(codes, t, series, state)
        spans.close(state)
        found.update(state.channels)
        _check_value_ranges(file, footer, channel_names or ["value"])
    if layout == "long":
        if not found:
            raise DatasetError("no rows", file=str(signal_files[0]))
        channel_names = sorted(found)
    episodes, span, warnings = check_samples(
        episodes, spans, str(episodes_file), partial(_first_sample, signal_files, known),
        skip_bad=skip_bad_episodes)
    has = np.isfinite(spans.last)
    durations = dict(zip(known.ids.filter(pa.array(has)).to_pylist(),
                         np.minimum(spans.last[has], span).tolist(), strict=True))
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
        span=span,
        layout=layout,
    )


def _first_sample(files: Sequence[Location], known: EpisodeIndex,
                  episode: int) -> tuple[str, int]:
    """The file and row of an episode's first sample (to name it in an error: the IDs are
    read again, which only an error pays for)."""
    for file in files:
        offset = 0
        for group in _ids_and_times(file, "wide"):
            rows = np.flatnonzero(known.rows(group["episode_id"]) == episode)
            if rows.size:
                return str(file), offset + int(rows[0])
            offset += group.num_rows
    return str(files[0]), 0


def _one_of(root: Location, *names: str) -> Location:
    found = [root / name for name in names if (root / name).exists()]
    if len(found) > 1:  # which one is the dataset? Never guess: a stale copy would win
        raise DatasetError(f"holds both {found[0].name} and {found[1].name}; keep one",
                           file=str(root))
    if found:
        return found[0]
    raise DatasetError(f"missing; expected one of {', '.join(names)}", file=str(root))


def _read_table(file: Location) -> pa.Table:
    try:
        if file.suffix == ".csv":
            # An empty CSV cell is a missing value, as in every spreadsheet.
            options = pacsv.ConvertOptions(strings_can_be_null=True)
            with file.filesystem.open_input_stream(file.path) as stream:
                return pacsv.read_csv(stream, convert_options=options)
        source = pq.ParquetFile(file.path, filesystem=file.filesystem,
                                page_checksum_verification=True)
        check_names(source.schema_arrow.names, str(file), ())
        return source.read()
    except (pa.ArrowException, OSError) as err:
        raise DatasetError(f"cannot be read: {err}", file=str(file)) from err


def _unreadable(files: Sequence[Location], columns: Sequence[str],
               err: Exception) -> DatasetError:
    """The error for a read of signals that failed after loading (a corrupt page of a
    channel: loading decodes only ``episode_id`` and ``t``), naming the part: each is
    read alone until one fails (this runs only once a read has failed)."""
    for file in files:
        try:
            source = _signal_dataset([file])
            source.to_table(columns=[c for c in columns if c in source.schema.names])
        except (pa.ArrowException, OSError) as part_err:
            return DatasetError(f"cannot be read (corrupt page?): {part_err}", file=str(file))
    return DatasetError(f"cannot be read: {err}", file=str(files[0]))


def _signal_files(root: Location) -> tuple[Location, ...]:
    if (root / "signals").is_dir():
        beside = [n for n in ("signals.parquet", "signals.csv") if (root / n).exists()]
        if beside:
            raise DatasetError(f"holds both signals/ and {beside[0]}; keep one",
                               file=str(root))
        parts = tuple((root / "signals").files(".parquet"))
        if not parts:
            raise DatasetError("folder holds no *.parquet parts", file=str(root / "signals"))
        return parts
    return (_one_of(root, "signals.parquet", "signals.csv"),)


# Pages are checked against the checksums their writer stored (``write_dataset`` stores
# them): a flipped bit in a compressed page otherwise decodes into silently wrong values.
_VERIFY = pads.ParquetFragmentScanOptions(page_checksum_verification=True)


def _signal_dataset(files: Sequence[Location]) -> pads.Dataset:
    fmt: str | pads.FileFormat = "csv"
    if files[0].suffix != ".csv":
        fmt = pads.ParquetFileFormat(default_fragment_scan_options=_VERIFY)
    return pads.dataset([f.path for f in files], format=fmt, filesystem=files[0].filesystem)


def _footer(file: Location) -> pq.FileMetaData | None:
    """A Parquet part's footer (``None`` for CSV), its column names checked: a part that is
    empty, truncated or not Parquet at all fails here, named."""
    try:
        if file.suffix == ".csv":
            names = _signal_dataset([file]).schema.names
            footer = None
        else:
            footer = pq.read_metadata(file.path, filesystem=file.filesystem)
            names = footer.schema.to_arrow_schema().names
    except (pa.ArrowException, OSError) as err:
        msg = f"cannot be read (empty, truncated or not {file.suffix[1:]}?): {err}"
        raise DatasetError(msg, file=str(file)) from err
    check_names(names, str(file), ("episode_id", "t"))
    return footer


def _ids_and_times(file: Location, layout: Layout) -> Iterator[pa.Table]:
    """The ``episode_id`` and ``t`` columns of one signals file (and ``channel``, in the
    long layout), in file order, one Parquet row group at a time (a CSV file: whole), each
    ``channel`` checked for nulls (rows counted from the file's start).

    ``episode_id`` and ``channel`` come dictionary-encoded from Parquet: a row group holds
    a few hundred episodes, so decoding one string per sample would cost more than the
    check itself.
    """
    keys = ["episode_id", "t"] if layout == "wide" else ["episode_id", "t", "channel"]
    offset = 0
    for group in _groups(file, keys):
        if layout == "long":
            _fail_first_null(group["channel"], file, offset)
        offset += group.num_rows
        yield group


def _groups(file: Location, keys: list[str]) -> Iterator[pa.Table]:
    try:
        if file.suffix == ".csv":
            yield _signal_dataset([file]).to_table(columns=keys)
            return
        # One file, read directly: a dataset object per file costs more than a small
        # part's read (a fleet of 1,000 files).
        parquet = pq.ParquetFile(file.path, filesystem=file.filesystem,
                                 read_dictionary=keys[::2], page_checksum_verification=True)
        for group in range(parquet.metadata.num_row_groups):
            yield parquet.read_row_group(group, columns=keys)
    except (pa.ArrowException, OSError) as err:
        raise DatasetError(f"cannot be read: {err}", file=str(file)) from err


def signal_batches(file: Location, columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
    """One signals file streamed in record batches: those of ``columns`` it holds, its
    pages checked against their checksums, ``episode_id`` and ``channel`` dictionary-encoded
    (looked up once per row group's dictionary, not once per sample).

    Raises:
        DatasetError: the file cannot be read (named).
    """
    try:
        if file.suffix == ".csv":
            source = _signal_dataset([file])
            present = [c for c in columns if c in source.schema.names]
            yield from source.to_batches(columns=present)
            return
        # One file, read directly, one row group at a time (its columns decoded on every
        # core), each freed before the next: no dataset object per file, no read-ahead.
        # (ParquetFile.iter_batches held on to what it had read: 6 GiB for one 7 GiB file.)
        parquet = pq.ParquetFile(file.path, filesystem=file.filesystem,
                                 read_dictionary=[k for k in ("episode_id", "channel")
                                                  if k in columns],
                                 page_checksum_verification=True)
        present = [c for c in columns if c in parquet.schema_arrow.names]
        for group in range(parquet.metadata.num_row_groups):
            yield from parquet.read_row_group(group, columns=present).to_batches()
    except (pa.ArrowException, OSError) as err:
        raise DatasetError(f"cannot be read: {err}", file=str(file)) from err


def _schema(file: Location, footer: pq.FileMetaData | None) -> pa.Schema:
    return _signal_dataset([file]).schema if footer is None else footer.schema.to_arrow_schema()


def _layout(files: Sequence[Location], footers: Sequence[pq.FileMetaData | None]) -> Layout:
    """The layout every signals file shares.

    Raises:
        DatasetError: a file breaks its layout's rules, or the files mix layouts.
    """
    layouts = {str(f): layout_of(_schema(f, footer), str(f))
               for f, footer in zip(files, footers, strict=True)}
    if len(set(layouts.values())) > 1:
        long = next(f for f, kind in layouts.items() if kind == "long")
        wide = next(f for f, kind in layouts.items() if kind == "wide")
        msg = (f"signals parts mix layouts: this one is long (episode_id, t, channel, value), "
               f"{wide} is wide (a column per channel); write every part in one layout")
        raise DatasetError(msg, file=long)
    return next(iter(layouts.values()))


def _fail_first_null(column: pa.ChunkedArray, file: Location, row_offset: int) -> None:
    missing = pc.is_null(column)
    if pc.any(missing).as_py():
        row = row_offset + pc.index(missing, True).as_py()
        raise DatasetError("must not be null", file=str(file), column="channel", row=row)


def _channel_columns(files: Sequence[Location], footers: Sequence[pq.FileMetaData | None],
                     ) -> list[str]:
    names: dict[str, None] = {}
    for file, footer in zip(files, footers, strict=True):
        schema = _signal_dataset([file]).schema if footer is None else \
            footer.schema.to_arrow_schema()
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


def _check_value_ranges(file: Location, footer: pq.FileMetaData | None,
                        channels: Sequence[str]) -> None:
    """Every channel value within range, read from the row-group statistics; a column
    chunk is decoded only where its statistics are missing or out of range (CSV: all)."""
    if footer is None:
        table = _signal_dataset([file]).to_table()
        for name in channels:
            if name in table.column_names:
                check_values(table[name], str(file), name)
        return
    wanted = set(channels)
    offset = 0
    for g in range(footer.num_row_groups):
        group = footer.row_group(g)
        for j in range(group.num_columns):
            chunk = group.column(j)
            if chunk.path_in_schema not in wanted or _within_range(chunk):
                continue
            try:
                values = pq.ParquetFile(file.path, filesystem=file.filesystem).read_row_group(
                    g, columns=[chunk.path_in_schema])[0]
            except (pa.ArrowException, OSError) as err:
                raise DatasetError(f"cannot be read: {err}", file=str(file),
                                   column=chunk.path_in_schema) from err
            check_values(values, str(file), chunk.path_in_schema, offset)
        offset += group.num_rows


def _within_range(chunk: pq.ColumnChunkMetaData) -> bool:
    """Whether a column chunk's statistics show every value in range (or none present)."""
    stats = chunk.statistics
    if stats is None:
        return False
    if stats.has_null_count and stats.null_count == chunk.num_values:
        return True
    return bool(stats.has_min_max and max(abs(stats.min), abs(stats.max)) <= FLOAT32_MAX)


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


_TARGET_PREFIX = "target."


def _read_params_csv(path: Location) -> dict[str, ParamRange]:
    out: dict[str, ParamRange] = {}
    with io.StringIO(path.read_text(), newline="") as f:
        reader = csv.DictReader(f)
        for field in ("param", "low", "high"):
            if field not in (reader.fieldnames or []):
                raise DatasetError("required column is missing", file=str(path), column=field)
        targets = [c for c in reader.fieldnames or [] if c.startswith(_TARGET_PREFIX)]
        for row_number, row in enumerate(reader):
            name = row["param"].strip().removeprefix(PARAM_PREFIX)
            try:
                low, high = float(row["low"]), float(row["high"])
                nominal = float(row["nominal"]) if row.get("nominal") else (low + high) / 2
                minimum, maximum = (float(row[c]) if (row.get(c) or "").strip() else None
                                    for c in ("min", "max"))
            except ValueError as err:
                raise DatasetError(f"not a number: {err}", file=str(path), row=row_number) from err
            if not low <= nominal <= high:
                msg = f"expected low <= nominal <= high, got {low}, {nominal}, {high}"
                raise DatasetError(msg, file=str(path), column="param", row=row_number)
            if (minimum is not None and minimum > low) or (maximum is not None and maximum < high):
                msg = (f"physical bounds [{minimum}, {maximum}] must contain the range "
                       f"[{low}, {high}] sim sampled from")
                raise DatasetError(msg, file=str(path), column="min" if minimum is not None
                                   and minimum > low else "max", row=row_number)
            family = (row.get("family") or "").strip() or None
            if family is not None and family not in FAMILIES:
                msg = f"unknown family {family!r}; expected one of {', '.join(FAMILIES)}"
                raise DatasetError(msg, file=str(path), column="family", row=row_number)
            where = {c.removeprefix(_TARGET_PREFIX): row[c].strip() for c in targets
                     if (row.get(c) or "").strip()}
            out[name] = ParamRange(name, low, high, nominal, minimum, maximum,
                                   family, where)
    return out


def _deployment_order(episodes: pa.Table) -> tuple[str, ...]:
    real = episodes.filter(pc.equal(episodes["source"], "real"))
    if real.num_rows == 0:
        return ()
    grouped = real.group_by("deployment").aggregate([("started_at", "min")])
    ordered = grouped.sort_by([("started_at_min", "ascending"), ("deployment", "ascending")])
    return tuple(ordered["deployment"].to_pylist())

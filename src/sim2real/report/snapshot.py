"""Immutable results that save themselves as JSON, HTML and Parquet, and show in notebooks.

A run folder holds:

- ``report.json``: :class:`~sim2real.report.model.ReportModel`, the contract of the spec;
- ``report.html``: the same content for people, one self-contained file;
- ``signatures.parquet``: one row per event, layout ``(n_events, ...)``: ``episode_id``,
  ``cluster_id``, ``embed_x``, ``embed_y`` (a 2-D embedding of the signature), then
  ``z.<channel>`` (signed standardised effect per channel) and ``family.<name>`` columns;
- ``traces.parquet``: long format, one row per sample of a shown trajectory: ``event_id``
  (the real failure), ``episode_id`` (that failure or one of its nearest sim rollouts),
  ``role`` (``real`` or ``sim``), ``channel``, ``t`` (seconds relative to the failure
  time, so <= 0), ``value``.

``validate`` writes ``validation.json`` (:class:`~sim2real.report.model.ValidationModel`)
and ``validation.html``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from sim2real._atomic import atomic_files, check_target
from sim2real.errors import ReportError, UsageError
from sim2real.report.model import ReportModel, ValidationModel

__all__ = ["RUN_FILES", "Report", "Validation", "check_output", "read_previous"]

_M = TypeVar("_M", ReportModel, ValidationModel)

REPORT_JSON = "report.json"
REPORT_HTML = "report.html"
SIGNATURES = "signatures.parquet"
TRACES = "traces.parquet"
VALIDATION_JSON = "validation.json"
VALIDATION_HTML = "validation.html"
# Every file a run folder may hold: these and the outputs of ``sim2real check`` and
# ``sim2real calibrate`` (``check.json``, ``calibration.json``). A folder holding anything
# else is a user's, and an output is never landed over it.
RUN_FILES = frozenset({REPORT_JSON, REPORT_HTML, SIGNATURES, TRACES, VALIDATION_JSON,
                       VALIDATION_HTML, "check.json", "calibration.json"})


@dataclass(frozen=True)
class Report:
    """The result of ``analyze``: the report model plus the tables its pages plot."""

    model: ReportModel
    signatures: pa.Table
    traces: pa.Table

    def to_json(self) -> str:
        """The ``report.json`` text (UTF-8): stable key order, so runs diff cleanly."""
        return self.model.model_dump_json(indent=2) + "\n"

    def to_html(self) -> str:
        """The self-contained ``report.html`` page."""
        from sim2real.report.html import render_report

        return render_report(self)

    def _repr_html_(self) -> str:
        from sim2real.report.html import render_report_fragment

        return render_report_fragment(self)

    def save(self, out: str | Path) -> Path:
        """Write the run folder: it appears whole or not at all, whatever fails or stops.

        Raises:
            UsageError: ``out`` is a file or a folder of other files (see
                :func:`check_output`).
        """
        out = Path(out)
        check_output(out)
        with atomic_files(out) as stage:
            (stage / REPORT_JSON).write_text(self.to_json(), encoding="utf-8")
            pq.write_table(self.signatures, stage / SIGNATURES)
            pq.write_table(self.traces, stage / TRACES)
            (stage / REPORT_HTML).write_text(self.to_html(), encoding="utf-8")
        return out

    @classmethod
    def load(cls, out: str | Path) -> Report:
        """Read a run folder written by :meth:`save`.

        Raises:
            ReportError: the folder holds no readable report.
        """
        out = Path(out)
        if out.suffix == ".json":
            out = out.parent
        model = _read_model(out / REPORT_JSON, ReportModel)
        signatures = _read_table(out / SIGNATURES)
        traces = _read_table(out / TRACES)
        return cls(model=model, signatures=signatures, traces=traces)


@dataclass(frozen=True)
class Validation:
    """The result of ``validate``: before/after rates and a verdict per cluster."""

    model: ValidationModel

    def to_json(self) -> str:
        """The ``validation.json`` text (UTF-8)."""
        return self.model.model_dump_json(indent=2) + "\n"

    def to_html(self) -> str:
        """The self-contained ``validation.html`` page."""
        from sim2real.report.html import render_validation

        return render_validation(self)

    def _repr_html_(self) -> str:
        from sim2real.report.html import render_validation_fragment

        return render_validation_fragment(self)

    def save(self, out: str | Path) -> Path:
        """Write ``validation.json`` and ``validation.html`` into ``out``, both or neither.

        Raises:
            UsageError: ``out`` is a file or a folder of other files.
        """
        out = Path(out)
        check_output(out)
        with atomic_files(out) as stage:
            (stage / VALIDATION_JSON).write_text(self.to_json(), encoding="utf-8")
            (stage / VALIDATION_HTML).write_text(self.to_html(), encoding="utf-8")
        return out

    @classmethod
    def load(cls, out: str | Path) -> Validation:
        """Read ``validation.json`` from a folder written by :meth:`save`."""
        return cls(model=_read_model(Path(out) / VALIDATION_JSON, ValidationModel))


def check_output(out: str | Path) -> None:
    """Check, before any work, that ``out`` can become a run folder: a new folder, an empty
    one or an earlier run's (its stale staging folders are removed on the way).

    Raises:
        UsageError: ``out`` is a file or under one, cannot be written, or holds other files.
    """
    check_target(Path(out), RUN_FILES)


def read_previous(path: str | Path) -> ReportModel:
    """An earlier report given as ``--previous``: a ``report.json`` (any name) or its folder.

    Raises:
        UsageError: it cannot be read as a report (bad input: exit code 2).
    """
    path = Path(path)
    try:
        return _read_model(path / REPORT_JSON if path.is_dir() else path, ReportModel)
    except ReportError as err:
        raise UsageError(f"--previous {err}") from err


def _read_model(path: Path, model: type[_M]) -> _M:
    try:
        return model.model_validate_json(path.read_bytes())
    except FileNotFoundError as err:
        msg = f"{path}: no such file; expected the output of a sim2real run"
        raise ReportError(msg) from err
    except OSError as err:
        raise ReportError(f"{path}: cannot be read: {err.strerror}") from err
    except ValidationError as err:
        msg = f"{path}: not a valid {model.__name__}: {err.errors()[0]['msg']}"
        raise ReportError(msg) from err


def _read_table(path: Path) -> pa.Table:
    if not path.exists():
        return pa.table({})
    try:
        return pq.read_table(path)
    except (pa.ArrowException, OSError) as err:
        raise ReportError(f"{path}: cannot be read: {err}") from err

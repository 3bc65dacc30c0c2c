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

from sim2real._atomic import atomic_files
from sim2real.errors import ReportError
from sim2real.report.model import ReportModel, ValidationModel

__all__ = ["Report", "Validation"]

_M = TypeVar("_M", ReportModel, ValidationModel)

REPORT_JSON = "report.json"
REPORT_HTML = "report.html"
SIGNATURES = "signatures.parquet"
TRACES = "traces.parquet"
VALIDATION_JSON = "validation.json"
VALIDATION_HTML = "validation.html"


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
        """Write the run folder; nothing is left half-written if any part fails."""
        out = Path(out)
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
        """Write ``validation.json`` and ``validation.html`` into ``out``."""
        out = Path(out)
        with atomic_files(out) as stage:
            (stage / VALIDATION_JSON).write_text(self.to_json(), encoding="utf-8")
            (stage / VALIDATION_HTML).write_text(self.to_html(), encoding="utf-8")
        return out

    @classmethod
    def load(cls, out: str | Path) -> Validation:
        """Read ``validation.json`` from a folder written by :meth:`save`."""
        return cls(model=_read_model(Path(out) / VALIDATION_JSON, ValidationModel))


def _read_model(path: Path, model: type[_M]) -> _M:
    try:
        return model.model_validate_json(path.read_bytes())
    except FileNotFoundError as err:
        msg = f"{path}: no such file; expected the output of a sim2real run"
        raise ReportError(msg) from err
    except ValidationError as err:
        msg = f"{path}: not a valid {model.__name__}: {err.errors()[0]['msg']}"
        raise ReportError(msg) from err


def _read_table(path: Path) -> pa.Table:
    if not path.exists():
        return pa.table({})
    return pq.read_table(path)

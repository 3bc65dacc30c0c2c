"""The Report and Validation snapshots, their JSON models and HTML renderer."""

from sim2real.report.model import ReportModel, ValidationModel
from sim2real.report.snapshot import Report, Validation

__all__ = ["Report", "ReportModel", "Validation", "ValidationModel"]

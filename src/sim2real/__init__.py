"""sim2real: cluster real-robot failures by their sim-to-real drift signature.

>>> import sim2real
>>> report = sim2real.analyze("my-dataset", out="out")   # doctest: +SKIP
>>> report                                              # renders in a notebook
>>> sim2real.validate("my-dataset", ["w05"], ["w06"])    # doctest: +SKIP
"""

from sim2real._version import __version__
from sim2real.api import analyze
from sim2real.dataset import Dataset, load_dataset, write_dataset
from sim2real.pipeline import AnalysisConfig
from sim2real.report import Report, ReportModel, Validation, ValidationModel

# The function shadows its subpackage's name on purpose: ``sim2real.validate(...)`` mirrors
# ``sim2real validate``; the subpackage stays importable as ``sim2real.validate.compare``.
from sim2real.validate.compare import validate

__all__ = [
    "AnalysisConfig",
    "Dataset",
    "Report",
    "ReportModel",
    "Validation",
    "ValidationModel",
    "__version__",
    "analyze",
    "load_dataset",
    "validate",
    "write_dataset",
]

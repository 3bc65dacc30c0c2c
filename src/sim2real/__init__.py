"""sim2real: cluster real-robot failures by their sim-to-real drift signature.

>>> import sim2real
>>> report = sim2real.analyze("my-dataset", out="out")   # doctest: +SKIP
>>> report                                              # renders in a notebook
>>> sim2real.validate("my-dataset", ["w05"], ["w06"])    # doctest: +SKIP

The public names are imported on first use, so ``import sim2real`` and the start of the
command line stay instant (and a Ctrl-C while the libraries load prints one line).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim2real._version import __version__
    from sim2real.api import analyze
    from sim2real.dataset import Dataset, load_dataset, write_dataset
    from sim2real.pipeline import AnalysisConfig
    from sim2real.report import Report, ReportModel, Validation, ValidationModel
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

_HOME = {
    "AnalysisConfig": "sim2real.pipeline",
    "Dataset": "sim2real.dataset",
    "Report": "sim2real.report",
    "ReportModel": "sim2real.report",
    "Validation": "sim2real.report",
    "ValidationModel": "sim2real.report",
    "__version__": "sim2real._version",
    "analyze": "sim2real.api",
    "load_dataset": "sim2real.dataset",
    "validate": "sim2real.validate.compare",
    "write_dataset": "sim2real.dataset",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'sim2real' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})


class _Package(types.ModuleType):
    """The function ``validate`` shadows its subpackage's name on purpose
    (``sim2real.validate(...)`` mirrors ``sim2real validate``): importing the subpackage,
    which binds it onto this package, must not replace the function."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "validate" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

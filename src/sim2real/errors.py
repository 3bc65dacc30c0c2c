"""One root exception, with a subclass per stage.

Input errors also derive from :class:`ValueError`, so callers that only know the standard
library still catch them; the CLI maps :class:`InputError` to exit code 2.
"""

from __future__ import annotations

__all__ = [
    "AnalysisError",
    "DatasetError",
    "IngestError",
    "InputError",
    "MissingExtraError",
    "ReportError",
    "Sim2RealError",
    "SimulatorError",
    "UsageError",
]


class Sim2RealError(Exception):
    """Root of every error sim2real raises on purpose."""


class InputError(Sim2RealError, ValueError):
    """The user's input is wrong: a file, a field, an option. Exit code 2."""


class DatasetError(InputError):
    """A dataset breaks a rule of the dataset format.

    Args:
        message: what was expected.
        file: the file it was found in.
        column: the offending column, when one is to blame.
        row: the first offending row (0-based data row), when one exists.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        column: str | None = None,
        row: int | None = None,
    ) -> None:
        self.file = file
        self.column = column
        self.row = row
        where = [p for p in (file, f"column {column!r}" if column else None) if p]
        if row is not None:
            where.append(f"row {row}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class IngestError(InputError):
    """A recording cannot be converted: corrupt file, missing topic, bad mapping."""


class MissingExtraError(InputError):
    """A command needs an optional dependency that is not installed; names the extra."""


class UsageError(InputError):
    """Options that do not fit together or name things that do not exist."""


class AnalysisError(Sim2RealError):
    """An analysis stage could not produce its result from valid input."""


class ReportError(Sim2RealError):
    """A report or validation file cannot be read or written."""


class SimulatorError(Sim2RealError):
    """A simulator adapter failed or could not be loaded."""

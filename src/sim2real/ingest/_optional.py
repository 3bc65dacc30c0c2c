"""Import heavy optional dependencies on first use, naming the extra that provides them."""

from __future__ import annotations

import importlib
from types import ModuleType

from sim2real.errors import IngestError

__all__ = ["require"]


def require(module: str, extra: str = "ingest") -> ModuleType:
    """Import ``module`` or raise an :class:`IngestError` that says which extra installs it.

    Args:
        module: dotted module name (``"mcap.reader"``).
        extra: the ``sim2real`` extra that lists the package.

    Raises:
        IngestError: the package is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        top = module.split(".")[0]
        msg = (f"{top!r} is not installed; it comes with the {extra!r} extra: "
               f"pip install 'sim2real[{extra}]'")
        raise IngestError(msg) from err

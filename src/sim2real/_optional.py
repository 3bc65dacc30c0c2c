"""Import optional dependencies on first use, naming the extra that provides them.

``pip install sim2real`` alone runs ``analyze``, ``validate`` and ``demo``; ingest, the
dashboard, calibration, Ray and the browser tests each come with an extra. Code that needs
one calls :func:`require` where it is used, never at import time, so a missing extra is a
one-line error (exit code 2) only for the command that needs it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from sim2real.errors import MissingExtraError

__all__ = ["require"]


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise a :class:`MissingExtraError` that says which extra has it.

    Args:
        module: dotted module name (``"mcap.reader"``).
        extra: the ``sim2real`` extra that lists the package (``"ingest"``, ``"serve"``...).

    Raises:
        MissingExtraError: the package is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        top = module.split(".")[0]
        msg = (f"{top!r} is not installed; it comes with the {extra!r} extra: "
               f"pip install 'sim2real[{extra}]'")
        raise MissingExtraError(msg) from err

"""The ``DATASET`` argument of the commands that read one: a local folder or a URI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from sim2real.dataset.location import is_uri

__all__ = ["DatasetArgument"]


class DatasetArgument(click.ParamType):
    """A local dataset folder (checked to exist, as before) or an object-store URI.

    URIs (``s3://bucket/prefix``...) pass through unchanged: only the loader can tell
    whether the store holds a dataset there, and it says so with exit code 2.
    """

    name = "dataset"
    _folder = click.Path(exists=True, file_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str | Path:
        if isinstance(value, str) and is_uri(value):
            return value
        folder: Path = self._folder.convert(value, param, ctx)
        return folder

"""Where a dataset lives: a local folder or any URI that pyarrow's filesystems open.

``s3://bucket/prefix``, ``gs://bucket/prefix``, ``hdfs://...`` and ``file:///...`` go through
:meth:`pyarrow.fs.FileSystem.from_uri` (its query options too, e.g.
``?endpoint_override=host:9000&scheme=http`` for an S3-compatible store); anything else is a
local path and reads exactly as before. A :class:`Location` pickles with its filesystem, so
Ray tasks on other machines reopen the same files.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs

from sim2real.errors import DatasetError

__all__ = ["Location", "is_uri"]


def is_uri(where: str | Path) -> bool:
    """Whether ``where`` names a filesystem by its scheme (``s3://...``) rather than a path."""
    return isinstance(where, str) and "://" in where


@dataclass(frozen=True)
class Location:
    """A file or folder on a :mod:`pyarrow.fs` filesystem.

    Attributes:
        filesystem: local disk, S3, GCS, HDFS...
        path: the path on ``filesystem`` (``bucket/key`` on object stores).
        uri: how messages name it: a local path as given, or ``scheme://path`` (without
            the URI's query, which may hold endpoints or keys).
    """

    filesystem: pafs.FileSystem
    path: str
    uri: str

    @classmethod
    def parse(cls, where: str | Path) -> Location:
        """The location of a local path or of a URI.

        Raises:
            DatasetError: no pyarrow filesystem opens the URI.
        """
        if not is_uri(where):
            local = str(Path(where))
            return cls(pafs.LocalFileSystem(), local, local)
        text = str(where)
        shown = text.split("?", 1)[0]
        try:
            filesystem, path = pafs.FileSystem.from_uri(text)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as err:
            raise DatasetError(f"no pyarrow filesystem opens it: {err}", file=shown) from err
        return cls(filesystem, path, shown.rstrip("/"))

    @property
    def _is_path(self) -> bool:
        # Given as a local path (not a URI): names keep the platform's path form.
        return "://" not in self.uri

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def suffix(self) -> str:
        return Path(self.name).suffix

    def __truediv__(self, name: str) -> Location:
        if self._is_path:
            child = str(Path(self.path) / name)
            return Location(self.filesystem, child, child)
        return Location(self.filesystem, f"{self.path.rstrip('/')}/{name}", f"{self.uri}/{name}")

    def __str__(self) -> str:
        return self.uri

    def canonical(self) -> str:
        """A name that does not depend on the working directory: absolute path, or the URI."""
        if self._is_path:
            return str(Path(self.path).resolve())
        return self.uri

    def kind(self) -> pafs.FileType:
        """File, directory or not found.

        Raises:
            DatasetError: the store cannot be asked (no credentials, no network...).
        """
        try:
            return self.filesystem.get_file_info(self.path).type
        except OSError as err:
            raise DatasetError(f"cannot be opened: {err}", file=self.uri) from err

    def exists(self) -> bool:
        return self.kind() != pafs.FileType.NotFound

    def is_dir(self) -> bool:
        return self.kind() == pafs.FileType.Directory

    def files(self, suffix: str) -> list[Location]:
        """The files directly inside this folder whose names end in ``suffix``, by name."""
        try:
            infos = self.filesystem.get_file_info(pafs.FileSelector(self.path))
        except OSError as err:
            raise DatasetError(f"cannot be listed: {err}", file=self.uri) from err
        names = sorted(i.base_name for i in infos
                       if i.type == pafs.FileType.File and i.base_name.endswith(suffix))
        return [self / n for n in names]

    def read_text(self) -> str:
        """The whole file as UTF-8 text (small side files: ``channels.csv``, ``params.csv``).

        Raises:
            DatasetError: it cannot be read.
        """
        try:
            with self.filesystem.open_input_stream(self.path) as stream:
                return io.TextIOWrapper(stream, encoding="utf-8", newline="").read()
        except (OSError, UnicodeDecodeError) as err:
            raise DatasetError(f"cannot be read: {err}", file=self.uri) from err

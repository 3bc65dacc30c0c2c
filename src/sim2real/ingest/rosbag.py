"""ROS 1 bags and rosbag2 folders (sqlite3 or mcap storage) through ``rosbags``' AnyReader."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from sim2real._optional import require
from sim2real.errors import IngestError
from sim2real.ingest._source import MessageRecord, TopicInfo

__all__ = ["RosbagRecording", "is_rosbag2_dir"]


def is_rosbag2_dir(path: Path) -> bool:
    """Whether ``path`` is a rosbag2 folder (it holds a ``metadata.yaml``)."""
    return path.is_dir() and (path / "metadata.yaml").is_file()


class RosbagRecording:
    """An open ROS 1 bag, rosbag2 folder, or bare ``.db3`` / ``.mcap`` rosbag2 file.

    Old bags that carry no message definitions are decoded with a default typestore
    (ROS 1 Noetic for ``.bag`` files, ROS 2 Humble otherwise).

    Raises:
        IngestError: the bag cannot be opened or is damaged.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        highlevel = require("rosbags.highlevel", "ingest")
        typesys = require("rosbags.typesys", "ingest")
        store = typesys.Stores.ROS1_NOETIC if self.path.suffix == ".bag" else (
            typesys.Stores.ROS2_HUMBLE)
        if not self.path.exists():
            raise IngestError(f"{self.path}: no such bag file or folder")
        try:
            self._reader = highlevel.AnyReader(
                [self.path], default_typestore=typesys.get_typestore(store))
            self._reader.open()
        except Exception as err:  # any failure of rosbags on this bag: it is damaged
            raise self._corrupt(err) from err
        self._topics: dict[str, TopicInfo] = {}
        for conn in self._reader.connections:
            prior = self._topics.get(conn.topic)
            count = conn.msgcount + (prior.count or 0 if prior else 0)
            self._topics[conn.topic] = TopicInfo(conn.topic, conn.msgtype, count)

    def _corrupt(self, err: Exception, where: str = "") -> IngestError:
        return IngestError(f"{self.path}{where}: not a readable bag, truncated or corrupt "
                           f"({type(err).__name__}: {err}); expected a ROS 1 bag or a rosbag2 "
                           "folder / .db3 / .mcap file")

    def topics(self) -> dict[str, TopicInfo]:
        """Every topic in the bag, with message counts."""
        return dict(self._topics)

    def metadata(self) -> dict[str, dict[str, str]]:
        """rosbag2's ``custom_data`` (``metadata.yaml``) as the record ``custom_data``."""
        custom: dict[str, str] = {}
        for bag in self._reader.readers:
            # rosbags keeps it on the storage's metadata (no public accessor in 0.11).
            meta = getattr(getattr(bag, "storage", bag), "metadata", None)
            found = getattr(meta, "custom", None)
            if isinstance(found, dict):
                custom.update({str(k): str(v) for k, v in found.items()})
        return {"custom_data": custom} if custom else {}

    def messages(self, topics: Collection[str]) -> Iterator[MessageRecord]:
        """Decoded messages of ``topics`` in time order.

        Raises:
            IngestError: a damaged chunk or a message that does not decode.
        """
        wanted = set(topics)
        conns = [c for c in self._reader.connections if c.topic in wanted]
        if not conns:
            return
        stream = self._reader.messages(connections=conns)
        deserialize = self._reader.deserialize
        while True:
            try:
                conn, stamp, raw = next(stream)
            except StopIteration:
                return
            except Exception as err:  # rosbags on a damaged bag
                raise self._corrupt(err) from err
            try:
                message: Any = deserialize(raw, conn.msgtype)
            except Exception as err:  # a message that does not decode as its type
                raise self._corrupt(err, f": topic {conn.topic!r} at {stamp} ns") from err
            yield MessageRecord(conn.topic, stamp, message)

    def close(self) -> None:
        """Close the bag."""
        self._reader.close()

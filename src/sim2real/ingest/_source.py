"""The small protocol every message-based recording reader follows (MCAP, rosbag)."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any, NamedTuple, Protocol

__all__ = ["MessageRecord", "RecordingReader", "TopicInfo"]


class TopicInfo(NamedTuple):
    """One topic of a recording."""

    name: str
    msgtype: str
    """Schema name as the file spells it (``sensor_msgs/msg/JointState``, ``foxglove.RawImage``)."""
    count: int | None  # type: ignore[assignment]  # shadows tuple.count, as intended
    """Messages on the topic, when the file's summary says so without a scan."""


class MessageRecord(NamedTuple):
    """One decoded message."""

    topic: str
    log_time: int
    """Nanoseconds since the epoch, as recorded."""
    message: Any
    """A decoded message: an object with attributes (ROS) or a dict (JSON)."""


class RecordingReader(Protocol):
    """An open recording: its topics, metadata and a stream of decoded messages."""

    path: Path

    def topics(self) -> dict[str, TopicInfo]:
        """Every topic in the recording, by name."""
        ...

    def metadata(self) -> dict[str, dict[str, str]]:
        """Metadata records by name (MCAP records; rosbag2's ``custom_data``)."""
        ...

    def messages(self, topics: Collection[str]) -> Iterator[MessageRecord]:
        """Decoded messages of ``topics``, in about time order (ingest sorts each series).

        Raises:
            IngestError: the file is corrupt or a message cannot be decoded.
        """
        ...

    def close(self) -> None:
        """Release the file."""
        ...

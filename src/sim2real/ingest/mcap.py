"""MCAP recordings (ROS 2 CDR and JSON / Foxglove SDK files) through the ``mcap`` package."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import IO, Any

from sim2real._optional import require
from sim2real.errors import IngestError
from sim2real.ingest._source import MessageRecord, TopicInfo

__all__ = ["McapRecording"]

# What a damaged file makes the mcap reader raise besides its own McapError.
_READ_ERRORS: tuple[type[Exception], ...] = (EOFError, struct.error, ValueError, KeyError,
                                             IndexError, UnicodeDecodeError, OSError)


def _json_decoder_factory() -> Any:
    """A decoder factory for ``json`` message encoding (the mcap package ships none)."""
    reader = require("mcap.reader", "ingest")

    class JsonDecoderFactory(reader.DecoderFactory):  # type: ignore[name-defined]
        def decoder_for(self, message_encoding: str, schema: Any) -> Callable[[bytes], Any] | None:
            return json.loads if message_encoding == "json" else None

    return JsonDecoderFactory()


class McapRecording:
    """An open MCAP file; messages decoded by mcap-ros2-support (CDR) or ``json.loads``.

    Args:
        path: the ``.mcap`` file.

    Raises:
        IngestError: the file is missing, truncated or not MCAP.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        reader_mod = require("mcap.reader", "ingest")
        ros2 = require("mcap_ros2.decoder", "ingest")
        self._errors = (require("mcap.exceptions", "ingest").McapError, *_READ_ERRORS)
        try:
            self._file: IO[bytes] = self.path.open("rb")
        except OSError as err:
            msg = f"{self.path}: cannot open the recording ({err.strerror})"
            raise IngestError(msg) from err
        try:
            self._reader = reader_mod.make_reader(
                self._file, decoder_factories=[ros2.DecoderFactory(), _json_decoder_factory()])
            self._topics = self._read_topics()
        except self._errors as err:
            self._file.close()
            raise self._corrupt(err) from err

    def _corrupt(self, err: Exception) -> IngestError:
        return IngestError(f"{self.path}: not a readable MCAP file, truncated or corrupt "
                           f"({type(err).__name__}: {err}); expected a complete MCAP recording")

    def _read_topics(self) -> dict[str, TopicInfo]:
        summary = self._reader.get_summary()
        if summary is None:  # a file written without a summary section: scan it once
            return self._scan_topics()
        counts = summary.statistics.channel_message_counts if summary.statistics else {}
        topics: dict[str, TopicInfo] = {}
        for channel in summary.channels.values():
            schema = summary.schemas.get(channel.schema_id)
            name = schema.name if schema else ""
            prior = topics.get(channel.topic)
            count = counts.get(channel.id, 0) + (prior.count or 0 if prior else 0)
            topics[channel.topic] = TopicInfo(channel.topic, name, count if counts else None)
        return topics

    def _scan_topics(self) -> dict[str, TopicInfo]:
        found: dict[str, list[Any]] = {}
        for schema, channel, _ in self._reader.iter_messages():
            entry = found.setdefault(channel.topic, [schema.name if schema else "", 0])
            entry[1] += 1
        return {t: TopicInfo(t, n, c) for t, (n, c) in found.items()}

    def topics(self) -> dict[str, TopicInfo]:
        """Every topic in the file, with message counts from the summary."""
        return dict(self._topics)

    def messages(self, topics: Collection[str]) -> Iterator[MessageRecord]:
        """Decoded messages of ``topics`` in log-time order.

        Raises:
            IngestError: a damaged chunk, or a message encoding with no decoder.
        """
        decoder_missing = require("mcap.exceptions", "ingest").DecoderNotFoundError
        stream = self._reader.iter_decoded_messages(topics=list(topics), log_time_order=True)
        while True:
            try:
                _, channel, message, decoded = next(stream)
            except StopIteration:
                return
            except decoder_missing as err:
                msg = (f"{self.path}: {err}; sim2real decodes the 'cdr' (ROS 2) and 'json' "
                       "message encodings")
                raise IngestError(msg) from err
            except self._errors as err:
                raise self._corrupt(err) from err
            yield MessageRecord(channel.topic, message.log_time, decoded)

    def close(self) -> None:
        """Close the file."""
        self._file.close()

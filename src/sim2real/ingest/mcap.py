"""MCAP recordings (ROS 2 CDR and JSON / Foxglove SDK files) through the ``mcap`` package.

What is read is checked: the data section's and the summary's CRCs (where the writer
stored them, as the official writers do) before anything is used, each chunk's CRC as it
is decompressed, and anything the reader or a decoder raises on a damaged file becomes an
:class:`~sim2real.errors.IngestError` naming the file (and the topic and time of the
message, when one is to blame).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import IO, Any

from sim2real._optional import require
from sim2real.errors import IngestError
from sim2real.ingest._source import MessageRecord, TopicInfo

__all__ = ["McapRecording", "check_crcs"]

_MAGIC = b"\x89MCAP0\r\n"
_FOOTER = 1 + 8 + 8 + 8 + 4  # opcode, length, summary_start, summary_offset_start, summary_crc
_DATA_END = 1 + 8 + 4  # opcode, length, data_section_crc
_BLOCK = 1 << 20


def _json_decoder_factory() -> Any:
    """A decoder factory for ``json`` message encoding (the mcap package ships none)."""
    reader = require("mcap.reader", "ingest")

    class JsonDecoderFactory(reader.DecoderFactory):  # type: ignore[name-defined]
        def decoder_for(self, message_encoding: str, schema: Any) -> Callable[[bytes], Any] | None:
            return json.loads if message_encoding == "json" else None

    return JsonDecoderFactory()


def _crc(f: IO[bytes], start: int, stop: int) -> int:
    f.seek(start)
    crc, left = 0, stop - start
    while left > 0:
        block = f.read(min(_BLOCK, left))
        if not block:
            break
        crc = zlib.crc32(block, crc)
        left -= len(block)
    return crc


def check_crcs(f: IO[bytes], size: int) -> str | None:
    """Check the CRCs an MCAP file stores for its summary and its data section.

    Returns:
        What failed (``None``: both match, or the file stores none).
    """
    if size < 2 * len(_MAGIC) + _FOOTER:
        return "too short to hold a footer"
    footer = size - len(_MAGIC) - _FOOTER
    f.seek(footer)
    record = f.read(_FOOTER)
    if f.read(len(_MAGIC)) != _MAGIC or record[0] != 0x02:
        return "no footer at the end"
    summary_start, _, summary_crc = struct.unpack_from("<QQI", record, 9)
    if summary_start > footer:
        return "the footer points past itself"
    # The summary CRC covers the summary up to the footer's summary_crc field.
    covered = footer + _FOOTER - 4
    if summary_start and summary_crc and _crc(f, summary_start, covered) != summary_crc:
        return "the summary section fails its CRC"
    data_end = (summary_start or footer) - _DATA_END
    if data_end < len(_MAGIC):
        return "no data section"
    f.seek(data_end)
    record = f.read(_DATA_END)
    if record[0] != 0x0F:
        return "no data-end record before the summary"
    (data_crc,) = struct.unpack_from("<I", record, 9)
    if data_crc and _crc(f, 0, data_end) != data_crc:
        return "the data section fails its CRC"
    return None


class McapRecording:
    """An open MCAP file; messages decoded by mcap-ros2-support (CDR) or ``json.loads``.

    Args:
        path: the ``.mcap`` file.

    Raises:
        IngestError: the file is missing, truncated, fails a CRC or is not MCAP.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        reader_mod = require("mcap.reader", "ingest")
        ros2 = require("mcap_ros2.decoder", "ingest")
        try:
            self._file: IO[bytes] = self.path.open("rb")
        except OSError as err:
            msg = f"{self.path}: cannot open the recording ({err.strerror})"
            raise IngestError(msg) from err
        self._factories = [ros2.DecoderFactory(), _json_decoder_factory()]
        self._decoders: dict[int, Callable[[bytes], Any]] = {}
        try:
            problem = check_crcs(self._file, self.path.stat().st_size)
            if problem is not None:
                raise IngestError(f"{self.path}: not a readable MCAP file: {problem}; the file "
                                  "is truncated or corrupt")
            self._file.seek(0)
            self._reader = reader_mod.make_reader(self._file, validate_crcs=True,
                                                  decoder_factories=self._factories)
            self._topics = self._read_topics()
        except IngestError:
            self._file.close()
            raise
        except Exception as err:  # any failure of the reader on this file: it is damaged
            self._file.close()
            raise self._corrupt(err) from err

    def _corrupt(self, err: Exception, where: str = "") -> IngestError:
        return IngestError(f"{self.path}{where}: not a readable MCAP file, truncated or corrupt "
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

    def metadata(self) -> dict[str, dict[str, str]]:
        """The file's metadata records by name (a later record of one name adds to it).

        Raises:
            IngestError: the metadata section is damaged.
        """
        out: dict[str, dict[str, str]] = {}
        try:
            for record in self._reader.iter_metadata():
                out.setdefault(record.name, {}).update(record.metadata)
        except Exception as err:  # the reader on a damaged file
            raise self._corrupt(err, " (metadata)") from err
        return out

    def _decoder(self, schema: Any, channel: Any) -> Callable[[bytes], Any]:
        decoder = self._decoders.get(channel.id)
        if decoder is None:
            for factory in self._factories:
                decoder = factory.decoder_for(channel.message_encoding, schema)
                if decoder is not None:
                    break
            else:
                msg = (f"{self.path}: topic {channel.topic!r} is encoded as "
                       f"{channel.message_encoding!r}; sim2real decodes the 'cdr' (ROS 2) and "
                       "'json' message encodings")
                raise IngestError(msg)
            self._decoders[channel.id] = decoder
        return decoder

    def messages(self, topics: Collection[str]) -> Iterator[MessageRecord]:
        """Decoded messages of ``topics`` in the file's order (recorders write them in about
        time order; merging chunks into exact log-time order costs a third of the read).

        Raises:
            IngestError: a damaged chunk, a message that does not decode (names its topic
                and time), or a message encoding with no decoder.
        """
        stream = self._reader.iter_messages(topics=list(topics), log_time_order=False)
        while True:
            try:
                schema, channel, message = next(stream)
            except StopIteration:
                return
            except Exception as err:  # the reader on a damaged file
                raise self._corrupt(err) from err
            decoder = self._decoder(schema, channel)
            try:
                decoded = decoder(message.data)
            except Exception as err:  # the decoder on a damaged or mis-declared message
                where = f": topic {channel.topic!r} at {message.log_time} ns"
                raise self._corrupt(err, where) from err
            yield MessageRecord(channel.topic, message.log_time, decoded)

    def close(self) -> None:
        """Close the file."""
        self._file.close()

"""What a log read returns: where the offset lies on disk (LogOffsetMetadata) and the file range to send
(FetchDataInfo), as Kafka 0.8.2's kafka.server.LogOffsetMetadata and FetchDataInfo.

The range is a `FileRange` (open segment file, position, size) that the network layer sends with
sendfile; nothing is read into Python. A range may end inside a message when max_bytes cut it (clients
drop the partial message), never past the high watermark the reader asked for.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from zkbroker.protocol.fetch_response import FileRange

UNKNOWN_SEGMENT_BASE_OFFSET = -1
UNKNOWN_FILE_POSITION = -1


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    """An offset, and where it lies: the base offset of its segment and its byte position in that segment."""

    message_offset: int
    segment_base_offset: int = UNKNOWN_SEGMENT_BASE_OFFSET
    relative_position_in_segment: int = UNKNOWN_FILE_POSITION

    @property
    def message_offset_only(self) -> bool:
        return (
            self.segment_base_offset == UNKNOWN_SEGMENT_BASE_OFFSET
            and self.relative_position_in_segment == UNKNOWN_FILE_POSITION
        )

    def on_older_segment(self, that: LogOffsetMetadata) -> bool:
        self._require_position(that)
        return self.segment_base_offset < that.segment_base_offset

    def on_same_segment(self, that: LogOffsetMetadata) -> bool:
        self._require_position(that)
        return self.segment_base_offset == that.segment_base_offset

    def precedes(self, that: LogOffsetMetadata) -> bool:
        return self.message_offset < that.message_offset

    def offset_diff(self, that: LogOffsetMetadata) -> int:
        return self.message_offset - that.message_offset

    def position_diff(self, that: LogOffsetMetadata) -> int:
        """Bytes from `that` to this offset; both must lie on the same segment."""
        if not self.on_same_segment(that):
            raise ValueError(f"{self} cannot compare its segment position with {that}: not on the same segment")
        return self.relative_position_in_segment - that.relative_position_in_segment

    def _require_position(self, that: LogOffsetMetadata) -> None:
        if self.message_offset_only:
            raise ValueError(f"{self} cannot compare its segment info with {that}: it only has the message offset")

    def __str__(self) -> str:
        return f"{self.message_offset} [{self.segment_base_offset} : {self.relative_position_in_segment}]"


#: What 0.8.2 answers for an offset outside the log.
UNKNOWN_OFFSET_METADATA = LogOffsetMetadata(-1, 0, 0)


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """The result of `Log.read`: the fetch offset's metadata and the file range holding the messages."""

    fetch_offset: LogOffsetMetadata
    records: FileRange

    def read_bytes(self) -> bytes:
        """The bytes of the range, read into memory: for tests and tools, never the fetch path."""
        if self.records.size == 0:
            return b""
        return os.pread(self.records.file.fileno(), self.records.size, self.records.position)

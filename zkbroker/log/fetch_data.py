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


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    """An offset, and where it lies: the base offset of its segment and its byte position in that segment."""

    message_offset: int
    segment_base_offset: int
    relative_position_in_segment: int

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

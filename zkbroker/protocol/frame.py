"""Kafka's framing: every request and response is an int32 size followed by that many bytes.

``FrameDecoder`` is the sans-I/O receive side (h11's ``receive_data`` / ``next_event``): feed it
whatever the socket produced, take complete frames out. The size prefix is checked as soon as
its 4 bytes arrive, so an oversized or negative size fails before any of the body is buffered;
the broker then closes that one connection (``socket.request.max.bytes``, default 100 MiB).
"""

from __future__ import annotations

import struct

from .errors import RemoteProtocolError

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "FrameDecoder", "encode_frame"]

#: Kafka's ``socket.request.max.bytes`` default.
DEFAULT_MAX_FRAME_BYTES = 104857600

_SIZE = struct.Struct(">i")


def encode_frame(payload: bytes) -> bytes:
    """``payload`` with its int32 size prefix."""
    return _SIZE.pack(len(payload)) + payload


class FrameDecoder:
    """Split a byte stream into frame payloads (without the 4-byte size).

    Frames come out as fresh ``bytearray`` objects owned by the caller: wrapped in a
    ``memoryview`` they give zero-copy, writable slices (a Produce message set gets its offsets
    assigned in place). Buffering is linear in the bytes received: ``bytearray`` appends are
    amortised and deleting a consumed prefix is O(1) in CPython, and a frame that fills the
    whole buffer is handed over without a copy.
    """

    __slots__ = ("_buffer", "_need", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._need = -1  # size of the frame being assembled, -1 until its prefix is read

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as frames."""
        return len(self._buffer)

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes from the peer. Raises RemoteProtocolError on a bad size prefix."""
        self._buffer += data
        if self._need < 0:
            self._read_size()

    def _read_size(self) -> None:
        if len(self._buffer) < 4:
            return
        (size,) = _SIZE.unpack_from(self._buffer, 0)
        if size < 0:
            raise RemoteProtocolError(f"negative frame size {size}")
        if size > self.max_frame_bytes:
            raise RemoteProtocolError(
                f"frame of {size} bytes is larger than the maximum {self.max_frame_bytes}"
            )
        self._need = size

    def next_frame(self) -> bytearray | None:
        """The next complete frame payload, or None until more data arrives."""
        need = self._need
        if need < 0:
            self._read_size()
            need = self._need
            if need < 0:
                return None
        buffer = self._buffer
        end = 4 + need
        if len(buffer) < end:
            return None
        if len(buffer) == end:
            del buffer[:4]  # O(1): CPython moves the start pointer of a bytearray
            self._buffer = bytearray()
            payload = buffer
        else:
            payload = buffer[4:end]
            del buffer[:end]
        # The next prefix is checked on the next call, so a bad one never costs this frame.
        self._need = -1
        return payload

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
_STAGING_BYTES = 64 * 1024
_DIRECT_BYTES = 16 * 1024  # frames at least this large are received straight into their own buffer
_MIN_RECEIVE = 4 * 1024  # the least room get_buffer offers in staging


def encode_frame(payload: bytes) -> bytes:
    """``payload`` with its int32 size prefix."""
    return _SIZE.pack(len(payload)) + payload


class FrameDecoder:
    """Split a byte stream into frame payloads (without the 4-byte size).

    Frames come out as fresh ``bytearray`` objects owned by the caller: wrapped in a
    ``memoryview`` they give zero-copy, writable slices (a Produce message set gets its offsets
    assigned in place).

    Two ways in. ``receive_data(data)`` copies bytes the caller already has. ``get_buffer()`` /
    ``buffer_updated(n)`` (asyncio's BufferedProtocol protocol) let the caller ``recv_into`` the
    decoder's own memory: size prefixes and small frames land in a staging buffer and are copied
    out, and once a large frame's size is known its body is received straight into the
    ``bytearray`` that becomes the frame -- one copy, kernel to frame, for the bulk of a Produce.
    """

    __slots__ = ("_staging", "_start", "_end", "_need", "_frame", "_filled", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._staging = bytearray(_STAGING_BYTES)
        self._start = 0  # first byte in staging not yet returned
        self._end = 0  # end of the bytes received into staging
        self._need = -1  # size of the frame at _start, -1 until its prefix is read
        self._frame: bytearray | None = None  # a large frame being received in place
        self._filled = 0  # bytes of _frame received so far

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as frames."""
        return self._end - self._start + (self._filled if self._frame is not None else 0)

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes from the peer. Raises RemoteProtocolError on a bad size prefix."""
        view = memoryview(data).cast("B")
        while view:
            target = self.get_buffer()
            n = min(len(target), len(view))
            target[:n] = view[:n]
            self.buffer_updated(n)
            view = view[n:]

    def get_buffer(self) -> memoryview:
        """Where the next bytes from the peer should go (never empty): the rest of the large frame
        being received, or free space in the staging buffer."""
        if self._receiving_frame():
            return memoryview(self._frame)[self._filled :]
        staging = self._staging
        if len(staging) - self._end < _MIN_RECEIVE:
            # Little room left: move the unread bytes to the front of a buffer with room. A new buffer
            # when they fill half of it (frames the caller has not taken yet), as views of the old
            # one may still be alive and a bytearray with views cannot be resized.
            unread = self._end - self._start
            if unread > len(staging) // 2:
                self._staging = bytearray(2 * len(staging))
            self._staging[:unread] = staging[self._start : self._end]
            self._start, self._end = 0, unread
        return memoryview(self._staging)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written into the view ``get_buffer`` returned. Raises RemoteProtocolError
        on a bad size prefix."""
        if self._receiving_frame():
            self._filled += nbytes
        else:
            self._end += nbytes
            if self._need < 0:
                self._read_size()

    def _receiving_frame(self) -> bool:
        # A complete large frame the caller has not taken yet leaves later bytes to staging.
        return self._frame is not None and self._filled < len(self._frame)

    def _read_size(self) -> None:
        if self._end - self._start < 4:
            return
        (size,) = _SIZE.unpack_from(self._staging, self._start)
        if size < 0:
            raise RemoteProtocolError(f"negative frame size {size}")
        if size > self.max_frame_bytes:
            raise RemoteProtocolError(
                f"frame of {size} bytes is larger than the maximum {self.max_frame_bytes}"
            )
        self._need = size
        body = self._start + 4
        if size >= _DIRECT_BYTES and body + size > self._end:
            # Receive the rest of the body in place: take what staging holds of it, and empty it.
            self._frame = bytearray(size)
            held = self._end - body
            self._frame[:held] = self._staging[body : self._end]
            self._filled = held
            self._start = self._end = 0

    def next_frame(self) -> bytearray | None:
        """The next complete frame payload, or None until more data arrives."""
        frame = self._frame
        if frame is not None:
            if self._filled < len(frame):
                return None
            self._frame = None
            self._need = -1
            return frame
        if self._need < 0:
            self._read_size()
            if self._need < 0 or self._frame is not None:
                return None
        body = self._start + 4
        end = body + self._need
        if end > self._end:
            return None
        payload = self._staging[body:end]
        self._start = end
        if end == self._end:
            self._start = self._end = 0
        # The next prefix is checked on the next call, so a bad one never costs this frame.
        self._need = -1
        return payload

"""The client side of one broker connection, without I/O (h11's ``Connection``, for Kafka).

Every client socket loop drives one ``ClientCodec`` per connection: the blocking connection, the
asyncio one, the controller's channel and the producer's sender. The codec numbers the requests,
remembers which are waiting for an answer, splits the bytes received into frames (the server's
``FrameDecoder``) and turns each frame into a typed ``Response`` for the oldest request waiting::

    out = codec.send(ApiKey.METADATA, 1, {"topics": None})   # bytes to write
    codec.receive_data(received)                              # or get_buffer() / buffer_updated(n)
    response = codec.next_response()                          # None until a whole frame is in

Kafka answers a connection's requests in order, so a response's correlation id must be the oldest
waiting request's; anything else is the broker's fault (``RemoteProtocolError``) and the
connection is done for: the driver closes it and ``abandon()`` hands back what was waiting.
A request we cannot encode is ours (``LocalProtocolError``) and leaves the codec as it was.
Produce with acks=0 gets no response at all, so it is never waited for.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass
from typing import Any, NamedTuple

from .api import RESPONSE_SCHEMAS, decode_response, encode_request, expects_response
from .errors import LocalProtocolError, RemoteProtocolError
from .frame import FrameDecoder
from .headers import encode_request_header

__all__ = ["MAX_RESPONSE_BYTES", "ClientCodec", "Response"]

#: A client takes any frame an int32 size allows, as Kafka's clients do: how much a broker may
#: answer is the client's own fetch sizes' business. Drivers may set a lower bound.
MAX_RESPONSE_BYTES = 2**31 - 1

_SIZE = struct.Struct(">i")
_MAX_CORRELATION_ID = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Response:
    """One decoded answer, with the request it answers: ``context`` is what the driver attached
    to that request (the producer's batches, the controller's callback)."""

    correlation_id: int
    api_key: int
    api_version: int
    body: Any
    context: Any


class _Waiting(NamedTuple):
    correlation_id: int
    api_key: int
    api_version: int
    context: Any


class ClientCodec:
    """Requests out, responses in, for one connection; make a new one for a new connection."""

    __slots__ = ("client_id", "_frames", "_waiting", "_correlation_id", "_broken")

    def __init__(self, client_id: str | None, max_response_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self.client_id = client_id
        self._frames = FrameDecoder(max_response_bytes)
        self._waiting: deque[_Waiting] = deque()
        self._correlation_id = 0
        self._broken: RemoteProtocolError | None = None

    # ---- sending --------------------------------------------------------------------------------------------

    def send(self, api_key: int, api_version: int, body: Any, context: Any = None) -> bytes:
        """The complete frame of a request, to be written; it then waits for its response unless it
        gets none (Produce with acks=0). Raises LocalProtocolError if ``body`` cannot be encoded."""
        correlation_id = self._next_correlation_id()
        frame = encode_request(api_key, api_version, correlation_id, self.client_id, body)
        self._correlation_id = correlation_id
        if expects_response(api_key, body):
            self._waiting.append(_Waiting(correlation_id, api_key, api_version, context))
        return frame

    def send_encoded(self, api_key: int, api_version: int, body: bytes | bytearray | memoryview,
                     context: Any = None) -> bytes:
        """The size and header to write just before ``body``, a request body already encoded (one
        encoding shared by several connections). For requests that get a response."""
        if (api_key, api_version) not in RESPONSE_SCHEMAS:
            raise LocalProtocolError(f"no response schema for api_key {api_key} version {api_version}")
        correlation_id = self._next_correlation_id()
        header = encode_request_header(api_key, api_version, correlation_id, self.client_id)
        self._correlation_id = correlation_id
        self._waiting.append(_Waiting(correlation_id, api_key, api_version, context))
        return _SIZE.pack(len(header) + len(body)) + header

    def _next_correlation_id(self) -> int:
        return self._correlation_id + 1 if self._correlation_id < _MAX_CORRELATION_ID else 0

    # ---- what is waiting ------------------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Requests sent and not answered yet."""
        return len(self._waiting)

    def oldest_context(self) -> Any:
        """The context of the request the next response must answer (IndexError if none)."""
        return self._waiting[0].context

    def abandon(self) -> list[Any]:
        """The contexts of every request still waiting, oldest first; none waits any more (the
        connection is being closed)."""
        contexts = [waiting.context for waiting in self._waiting]
        self._waiting.clear()
        return contexts

    # ---- receiving ------------------------------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Bytes from the broker. Raises RemoteProtocolError on a negative or oversized frame size."""
        self._frames.receive_data(data)

    def get_buffer(self) -> memoryview:
        """Where to ``recv_into`` the next bytes from the broker (then call ``buffer_updated``)."""
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were received into ``get_buffer()``. Raises RemoteProtocolError as
        ``receive_data`` does."""
        self._frames.buffer_updated(nbytes)

    def next_response(self) -> Response | None:
        """The answer to the oldest waiting request, or None until its whole frame is in.

        Raises RemoteProtocolError when the broker answers nothing we asked, answers with another
        correlation id, or sends a frame that does not parse; every later call raises it again.
        """
        if self._broken is not None:
            raise self._broken
        frame = self._frames.next_frame()
        if frame is None:
            return None
        try:
            return self._decode(frame)
        except RemoteProtocolError as exc:
            self._broken = exc
            raise

    def _decode(self, frame: bytearray) -> Response:
        if not self._waiting:
            raise RemoteProtocolError(f"a response of {len(frame)} bytes arrived with no request waiting")
        waiting = self._waiting[0]
        correlation_id, body = decode_response(waiting.api_key, waiting.api_version, frame)
        if correlation_id != waiting.correlation_id:
            raise RemoteProtocolError(
                f"correlation id {correlation_id} does not match the request's {waiting.correlation_id}")
        self._waiting.popleft()
        return Response(correlation_id, waiting.api_key, waiting.api_version, body, waiting.context)

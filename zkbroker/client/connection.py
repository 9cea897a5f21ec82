"""BrokerConnection: one blocking connection to a broker, requests answered in order (Kafka's BlockingChannel).

The controller's channel to each broker, the admin tools and tests speak through it. Encoding and decoding
are the sans-I/O codec's; this module only moves frames.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from zkbroker.protocol.api import decode_response, encode_request, expects_response
from zkbroker.protocol.errors import RemoteProtocolError

_SIZE = struct.Struct(">i")


class BrokerConnection:
    def __init__(self, host: str, port: int, client_id: str = "zkbroker", timeout_s: float = 30.0) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._correlation_id = 0

    def connect(self) -> BrokerConnection:
        if self._sock is None:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = sock
        return self

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def abort(self) -> None:
        """Wake a thread blocked on this connection from another thread: a pending send or receive fails."""
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> BrokerConnection:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, api_key: int, api_version: int, body: Any) -> Any:
        """Send one request and return the decoded response (None when the request expects none)."""
        sock = self.connect()._sock
        self._correlation_id += 1
        correlation_id = self._correlation_id
        try:
            sock.sendall(encode_request(api_key, api_version, correlation_id, self.client_id, body))
            if not expects_response(api_key, _AsAttributes(body)):
                return None
            (size,) = _SIZE.unpack(self._recv_exactly(4))
            frame = self._recv_exactly(size)
        except OSError:
            self.close()
            raise
        got, response = decode_response(api_key, api_version, frame)
        if got != correlation_id:
            self.close()
            raise RemoteProtocolError(f"correlation id {got} does not match the request's {correlation_id}")
        return response

    def _recv_exactly(self, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            read = self._sock.recv_into(view[got:])
            if read == 0:
                raise ConnectionError(f"broker {self.host}:{self.port} closed the connection")
            got += read
        return bytes(buf)


class _AsAttributes:
    """Lets `expects_response` read `acks` from a plain dict body."""

    def __init__(self, body: Any) -> None:
        self._body = body

    def __getattr__(self, name: str) -> Any:
        if isinstance(self._body, dict):
            return self._body.get(name)
        return getattr(self._body, name)

"""BrokerConnection: one blocking connection to a broker, requests answered in order (Kafka's BlockingChannel).

The consumers, the metadata client, the broker's controlled shutdown, the admin tools and tests speak through
it. Requests, framing and the correlation-id check are the sans-I/O ClientCodec's; this module only moves bytes,
and `receive_response` is the blocking read the controller's channel uses too.
"""

from __future__ import annotations

import socket
from typing import Any

from zkbroker.client.security import ClientSecurity
from zkbroker.protocol.client_codec import ClientCodec, Response


class BrokerConnection:
    def __init__(self, host: str, port: int, client_id: str = "zkbroker", timeout_s: float = 30.0,
                 security: ClientSecurity | None = None) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.security = security  # TLS and SASL for a secured listener (client/security.py); None: PLAINTEXT
        self._sock: socket.socket | None = None
        self._codec: ClientCodec | None = None

    def connect(self) -> BrokerConnection:
        if self._sock is None:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            codec = ClientCodec(self.client_id)
            if self.security is not None:
                try:
                    sock = self.security.secure(sock, self.host, lambda s, key, version, body: _exchange(
                        s, codec, key, version, body, f"{self.host}:{self.port}"))
                except BaseException:
                    sock.close()
                    raise
            self._sock = sock
            self._codec = codec
        return self

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self._codec = None

    def detach(self) -> socket.socket:
        """Hand the connected (and secured) socket over to its new owner, e.g. the producer's selector loop."""
        sock = self._sock
        if sock is None:
            raise ConnectionError(f"not connected to {self.host}:{self.port}")
        self._sock = self._codec = None
        return sock

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
        self.connect()
        sock, codec = self._sock, self._codec
        out = codec.send(api_key, api_version, body)
        try:
            sock.sendall(out)
            if not codec.in_flight:
                return None
            response = receive_response(sock, codec, f"{self.host}:{self.port}")
        except BaseException:  # interrupted too: an answer left unread would pass for the next request's
            self.close()
            raise
        return response.body


def _exchange(sock: socket.socket, codec: ClientCodec, api_key: int, api_version: int, body: Any, broker: str) -> Any:
    sock.sendall(codec.send(api_key, api_version, body))
    return receive_response(sock, codec, broker).body


def receive_response(sock: socket.socket, codec: ClientCodec, broker: str) -> Response:
    """Block on `sock` until `codec` has the next response whole; ConnectionError if `broker` closes first."""
    while (response := codec.next_response()) is None:
        received = sock.recv_into(codec.get_buffer())
        if not received:
            raise ConnectionError(f"broker {broker} closed the connection")
        codec.buffer_updated(received)
    return response

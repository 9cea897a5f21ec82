"""SocketServer: the broker's network layer (Kafka's SocketServer), on the asyncio loop.

Each connection is a non-blocking socket that this module reads and writes itself, through the loop's
readiness callbacks (`add_reader` / `add_writer`), rather than through an asyncio transport: Fetch
responses are small framing bytes around file ranges of segment files, and those ranges go out with
`os.sendfile` on the socket -- zero copy, at explicit file positions -- which a transport has no way to do
without stopping its own writing first (asyncio's `loop.sendfile` adds and removes watchers on every call;
uvloop has no native sendfile at all). Owning the socket keeps one write path for every response.

Reading: frames are received straight into FrameDecoder's buffers (`recv_into`), and queued; one task per
connection answers them strictly in order, as Kafka guarantees per connection. Reading pauses while a
connection has `queued.max.requests` requests or `_MAX_QUEUED_BYTES` of them waiting, so a client that
does not read its responses (or pipelines without end) cannot make the broker buffer without bound -- and,
the bound being per connection rather than 0.8.2's one queue for all, it stalls only itself. A frame that
is too large or does not parse closes that connection only (after the requests before it are answered);
the broker keeps serving everyone else.

Limits (ConnectionLimits, README "Hardening"): `max.connections.per.ip` (with per-host overrides) closes a
new connection at once when its address already has that many; `connections.max.idle.ms` closes a
connection that has no request in progress and has completed none (received or answered) for that long --
the bytes of an unfinished request do not count, so a client trickling one byte a second is closed too.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import itertools
import logging
import os
import socket
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from zkbroker.protocol.errors import ProtocolError
from zkbroker.protocol.fetch_response import FileRange
from zkbroker.protocol.frame import FrameDecoder
from zkbroker.protocol.headers import RequestHeader, parse_request_header
from zkbroker.security.listeners import SecurityProtocol
from zkbroker.server.sasl_authenticator import AuthenticationFailed, IllegalSaslState, SaslServerAuthenticator

log = logging.getLogger("zkbroker.server.SocketServer")

_BACKLOG = 128
_MAX_QUEUED_BYTES = 4 * 1024 * 1024
_FRAME_OVERHEAD = 64  # counted per queued frame besides its bytes, so a flood of tiny requests is bounded too
# File ranges up to this size are read (pread) into the response instead of sent with sendfile: measured
# here, a 64 KiB pread + one send costs less CPU than a send of the framing plus a sendfile, and a small
# response then leaves in one segment.
_INLINE_RANGE_BYTES = 64 * 1024


# Which client connection the running request came from ("host:port#n"), for log lines; each connection is
# served by its own task, so the variable is per connection.
CONNECTION: contextvars.ContextVar[str] = contextvars.ContextVar("connection", default="-")
_connection_ids = itertools.count(1)

ANONYMOUS = "User:ANONYMOUS"  # Kafka's principal for a connection that did not authenticate


@dataclass(frozen=True)
class Session:
    """Who sent the running request (Kafka's RequestChannel.Session): the principal, the address it came from,
    and the listener it came in on (Metadata answers with that listener's endpoints)."""

    principal: str = ANONYMOUS
    client_address: str = ""
    listener_name: str | None = None  # None: outside any connection (tests calling KafkaApis directly)


# The session of the connection whose request is running: set by the connection's task, like CONNECTION.
NO_SESSION = Session()
SESSION: contextvars.ContextVar[Session] = contextvars.ContextVar("session", default=NO_SESSION)


class Channel:
    """What a request handler may ask of its connection: to stay muted for a while after the response, as
    KIP-219's quota throttling does (the client is answered at once, then its next request waits)."""

    __slots__ = ("mute_ms",)

    def __init__(self) -> None:
        self.mute_ms = 0


CHANNEL: contextvars.ContextVar[Channel | None] = contextvars.ContextVar("channel", default=None)


def mute_after_response(ms: int) -> None:
    """Mute the running request's connection for `ms` once its response is sent (no-op outside a connection)."""
    channel = CHANNEL.get()
    if channel is not None:
        channel.mute_ms = max(channel.mute_ms, ms)


@dataclass(frozen=True)
class Listener:
    """One listening endpoint and how its connections are secured: TLS (an SSL context) and SASL (a factory
    of per-connection authenticators), as its security protocol says."""

    name: str = "PLAINTEXT"
    host: str = ""
    port: int = 0
    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    ssl_context: ssl.SSLContext | None = None
    authenticator: Callable[[], SaslServerAuthenticator] | None = None
    failed_authentication_delay_ms: int = 100
    max_unauthenticated_bytes: int = 524288  # sasl.server.max.receive.size


class RequestHandler(Protocol):
    """What the socket server hands each request to (KafkaApis): the parsed header and the frame holding the
    body from `body_offset`; returns the response (bytes, or pieces with file ranges), or None for none."""

    async def handle(self, header: RequestHeader, frame: bytearray, body_offset: int) -> Any: ...


@dataclass(frozen=True)
class ConnectionLimits:
    """The bounds on clients' connections, from the broker's config (defaults: 0.8.2's)."""

    max_per_ip: int = 2**31 - 1
    max_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)  # host or address -> count
    max_idle_ms: int = 10 * 60 * 1000
    max_queued_requests: int = 500

    @classmethod
    def from_config(cls, config: Any) -> ConnectionLimits:
        return cls(config["max.connections.per.ip"], config["max.connections.per.ip.overrides"],
                   config["connections.max.idle.ms"], config["queued.max.requests"])


class TruncatedDuringSend(Exception):
    """A segment shrank (truncation) while its bytes were being sent; the frame cannot be completed."""


class SocketServer:
    def __init__(self, host: str, port: int, apis: RequestHandler, max_request_bytes: int,
                 limits: ConnectionLimits = ConnectionLimits(), listeners: Sequence[Listener] = ()) -> None:
        self.host = host
        self.port = port  # the first listener's (the one given by host and port when no listeners are)
        self.apis = apis
        self.max_request_bytes = max_request_bytes
        self.limits = limits
        self.listeners = list(listeners) or [Listener(host=host, port=port)]
        self.ports: dict[str, int] = {}  # listener name -> the port bound (a port 0 becomes the system's choice)
        self._listeners: list[socket.socket] = []
        self._connections: set[_Connection] = set()
        self._per_ip: collections.Counter[str] = collections.Counter()
        self._ip_limits: dict[str, int] = {}
        self._idle_sweeper: asyncio.Task | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._ip_limits = await _resolve_overrides(loop, self.limits.max_per_ip_overrides)
        for spec in self.listeners:
            host = spec.host or "0.0.0.0"
            try:
                sockets = await _listen(loop, host, spec.port)
            except OSError as e:
                for listener in self._listeners:
                    listener.close()
                self._listeners = []
                raise OSError(e.errno, f"Socket server failed to bind to {host}:{spec.port}: {e.strerror}.") from e
            for listener in sockets:
                loop.add_reader(listener.fileno(), self._accept, listener, spec)
            self._listeners += sockets
            # an ephemeral port (tests): the one the system chose
            self.ports[spec.name] = spec.port or sockets[0].getsockname()[1]
            log.info("Awaiting socket connections on %s:%d (listener %s, %s).", host, self.ports[spec.name],
                     spec.name, spec.security_protocol.value)
        self.port = self.ports[self.listeners[0].name]
        self._idle_sweeper = loop.create_task(self._close_idle_connections())

    async def stop(self) -> None:
        if not self._listeners:
            return
        loop = asyncio.get_running_loop()
        for listener in self._listeners:
            loop.remove_reader(listener.fileno())
            listener.close()
        self._listeners = []
        if self._idle_sweeper is not None:
            self._idle_sweeper.cancel()
        connections = list(self._connections)
        for connection in connections:
            connection.task.cancel()
        await asyncio.gather(*(c.task for c in connections), return_exceptions=True)
        for connection in connections:  # a task cancelled before it ever ran has not closed its socket
            connection.close()

    def _accept(self, listener: socket.socket, spec: Listener) -> None:
        for _ in range(_BACKLOG):
            try:
                sock, peer = listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as e:  # out of file descriptors, say: the next readiness callback tries again
                log.warning("Error accepting a connection: %s", e)
                return
            address = peer[0] if isinstance(peer, tuple) else str(peer)
            limit = self._ip_limits.get(address, self.limits.max_per_ip)
            if self._per_ip[address] >= limit:
                log.info("Rejected connection from %s, address already has the configured maximum of %d "
                         "connections.", address, limit)
                sock.close()
                continue
            sock.setblocking(False)
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if spec.ssl_context is not None:
                sock = spec.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            self._per_ip[address] += 1
            self._connections.add(_Connection(self, sock, peer, address, spec))

    def connections(self) -> list[dict]:
        """Each open connection: the listener it came in on and its protocol, the principal it acts as (Kafka's
        User:ANONYMOUS until a SASL exchange completes), the client id of its last request and its address --
        for the lab's `state`, as Kafka's per-connection metrics tell an operator who is connected as whom."""
        return [{"listener": c.listener.name, "security_protocol": c.listener.security_protocol.value,
                 "principal": c.session.principal, "authenticated": c.authenticator is None or c.authenticator.complete,
                 "client_id": c.client_id, "address": c.name.rpartition("#")[0]}
                for c in sorted(self._connections, key=lambda c: (c.listener.name, c.name))]

    def _closed(self, connection: _Connection) -> None:
        self._connections.discard(connection)
        self._per_ip[connection.address] -= 1
        if not self._per_ip[connection.address]:
            del self._per_ip[connection.address]

    async def _close_idle_connections(self) -> None:
        idle_s = self.limits.max_idle_ms / 1000.0
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(max(idle_s / 4, 0.01), 10.0))
            now = loop.time()
            for connection in list(self._connections):
                if connection.idle_since(now) >= idle_s:
                    log.info("Closing the connection from %s: idle for more than connections.max.idle.ms "
                             "(%d ms).", connection.name, self.limits.max_idle_ms)
                    connection.task.cancel()


async def _resolve_overrides(loop: asyncio.AbstractEventLoop, overrides: Mapping[str, int]) -> dict[str, int]:
    """max.connections.per.ip.overrides by address: each host stands for every address it resolves to."""
    limits = {}
    for host, count in overrides.items():
        try:
            infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as e:
            raise OSError(f"max.connections.per.ip.overrides names host {host!r}, which does not resolve: {e}") from e
        for info in infos:
            limits[info[4][0]] = count
    return limits


async def _listen(loop: asyncio.AbstractEventLoop, host: str, port: int) -> list[socket.socket]:
    """Listening sockets on every address `host` resolves to, as asyncio.start_server binds them."""
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    listeners: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            listener = socket.socket(family, kind, proto)
            listeners.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            listener.bind(address)
            listener.listen(_BACKLOG)
            listener.setblocking(False)
    except OSError:
        for listener in listeners:
            listener.close()
        raise
    return listeners


class _Connection:
    """One client connection: its socket, the frames received and not yet answered, and the task that
    answers them in order."""

    def __init__(self, server: SocketServer, sock: socket.socket, peer: tuple | str, address: str,
                 listener: Listener) -> None:
        self.server = server
        self.listener = listener
        self.tls = isinstance(sock, ssl.SSLSocket)
        self.authenticator = listener.authenticator() if listener.authenticator is not None else None
        self.sock = sock
        self.fd = sock.fileno()
        self.peer = peer
        self.address = address  # the peer's IP address, as max.connections.per.ip counts it
        self.loop = asyncio.get_running_loop()
        self.last_active = self.loop.time()  # a request received whole, or a response sent
        self.handling = False
        # Before a SASL client authenticates, its requests are bounded by sasl.server.max.receive.size.
        self.decoder = FrameDecoder(server.max_request_bytes if self.authenticator is None
                                    else min(server.max_request_bytes, listener.max_unauthenticated_bytes))
        self.frames: collections.deque[bytearray] = collections.deque()
        self.queued_bytes = 0
        self.reading = False
        self.closed = False
        self.ended = False  # no more frames will come: end of stream, a reset, or a bad frame
        self.error: ProtocolError | None = None  # the bad frame, reported once the frames before it are answered
        self._wakeup: asyncio.Future | None = None
        name = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.name = f"{name}#{next(_connection_ids)}"
        self.session = Session(ANONYMOUS, address, listener.name)
        self.client_id: str | None = None  # its last request's
        if not self.tls:  # a TLS connection reads once its handshake is done
            self._resume_reading()
        self.task = self.loop.create_task(self._serve())

    # -- reading (loop callbacks) ---------------------------------------------------------------------------

    def _resume_reading(self) -> None:
        if not self.reading and not self.ended:
            self.loop.add_reader(self.fd, self._on_readable)
            self.reading = True

    def _pause_reading(self) -> None:
        if self.reading:
            self.loop.remove_reader(self.fd)
            self.reading = False

    def _on_readable(self) -> None:
        while True:
            try:
                n = self.sock.recv_into(self.decoder.get_buffer())
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            except OSError:  # reset by the peer, or a TLS alert: nothing more to read or answer
                self._end()
                return
            if not n:
                self._end()
                return
            try:
                self.decoder.buffer_updated(n)
                while (frame := self.decoder.next_frame()) is not None:
                    self.frames.append(frame)
                    self.queued_bytes += len(frame) + _FRAME_OVERHEAD
                    self.last_active = self.loop.time()
            except ProtocolError as e:
                self.error = e
                self._end()
                return
            # TLS may hold decrypted bytes the socket's readiness will never announce again
            if not (self.tls and self.sock.pending()) or self._queue_full():
                break
        if self._queue_full():
            self._pause_reading()
        self._wake()

    def _queue_full(self) -> bool:
        return (self.queued_bytes >= _MAX_QUEUED_BYTES
                or len(self.frames) >= self.server.limits.max_queued_requests)

    def idle_since(self, now: float) -> float:
        """Seconds without a request in progress or completed; 0 while one is queued or being answered."""
        return 0.0 if self.frames or self.handling else now - self.last_active

    def _end(self) -> None:
        self.ended = True
        self._pause_reading()
        self._wake()

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    # -- answering ------------------------------------------------------------------------------------------

    async def _serve(self) -> None:
        CONNECTION.set(self.name)
        SESSION.set(self.session)
        channel = Channel()
        CHANNEL.set(channel)
        apis = self.server.apis
        try:
            if self.tls:
                await self._tls_handshake()
            while True:
                if not self.frames:
                    if self.ended:
                        if self.error is not None:
                            raise self.error
                        return
                    self._wakeup = self.loop.create_future()
                    await self._wakeup
                    continue
                frame = self.frames.popleft()
                self.queued_bytes -= len(frame) + _FRAME_OVERHEAD
                if not self._queue_full():
                    self._resume_reading()
                if self.authenticator is not None and not self.authenticator.complete:
                    await self._authenticate(frame)
                    continue
                header, body_offset = parse_request_header(frame)
                self.client_id = header.client_id
                self.handling = True
                try:
                    response = await apis.handle(header, frame, body_offset)
                    if self.closed:  # the peer left while the request waited (acks=-1, a lab hold): no one to answer
                        return
                    if response is not None:
                        await self._send(response)
                    if channel.mute_ms:  # throttled (KIP-219): read nothing more until the time is served
                        mute_s, channel.mute_ms = channel.mute_ms / 1000.0, 0
                        self._pause_reading()
                        await asyncio.sleep(mute_s)
                        if not self._queue_full():
                            self._resume_reading()
                finally:
                    self.handling = False
                    self.last_active = self.loop.time()
        except (ProtocolError, TruncatedDuringSend) as e:
            log.warning("Closing socket connection to %s: %s", self.peer, e)
        except (ssl.SSLError, IllegalSaslState) as e:  # a client's failure, not the broker's: no stack trace
            log.info("Closing connection %s (listener %s): %s", self.name, self.listener.name, e)
        except ConnectionError:
            pass
        except Exception:
            log.exception("Closing socket connection to %s after an unexpected error", self.peer)
        finally:
            self.close()

    async def _tls_handshake(self) -> None:
        """The server side of the TLS handshake; a client certificate's subject becomes the principal."""
        sock: ssl.SSLSocket = self.sock
        while True:
            try:
                sock.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._readable()
            except ssl.SSLWantWriteError:
                await self._writable()
        subject = (sock.getpeercert() or {}).get("subject")
        if subject:
            self.session = Session(f"User:{distinguished_name(subject)}", self.address, self.listener.name)
            SESSION.set(self.session)
            log.info("Connection %s on listener %s: principal %s (client certificate)", self.name,
                     self.listener.name, self.session.principal)
        self.last_active = self.loop.time()
        self._resume_reading()

    async def _authenticate(self, frame: bytearray) -> None:
        """One frame of the SASL exchange; the connection's principal once it completes."""
        authenticator = self.authenticator
        self.handling = True
        try:
            try:
                response = await authenticator.receive(frame)
            except AuthenticationFailed as e:
                log.info("Failed authentication with %s (listener %s, %s): %s", self.name, self.listener.name,
                         authenticator.mechanism, e)
                # answered late (KIP-306), so that guessing passwords is slow; then closed
                await asyncio.sleep(self.listener.failed_authentication_delay_ms / 1000.0)
                if e.response is not None:
                    await self._send_bytes(e.response)
                raise ConnectionError("authentication failed") from None
            if response is not None:
                await self._send_bytes(response)
        finally:
            self.handling = False
            self.last_active = self.loop.time()
        if authenticator.complete:
            self.session = Session(authenticator.principal, self.address, self.listener.name)
            SESSION.set(self.session)
            self.decoder.max_frame_bytes = self.server.max_request_bytes
            log.info("Connection %s authenticated as %s with %s (listener %s)", self.name, authenticator.principal,
                     authenticator.mechanism, self.listener.name)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = self.ended = True
        self._pause_reading()
        self.loop.remove_writer(self.fd)
        self.sock.close()  # after the loop forgot the descriptor: its number may be reused at once
        self.server._closed(self)

    # -- writing --------------------------------------------------------------------------------------------

    async def _send(self, response: bytes | list) -> None:
        """Write a response: one frame, or pieces whose FileRange slots are filled from their files."""
        if isinstance(response, (bytes, bytearray)):
            await self._send_bytes(response)
            return
        pending: list[bytes] = []  # framing (and small ranges) to go out before the next sendfile
        for piece in response:
            if isinstance(piece, (bytes, bytearray)):
                pending.append(piece)
            elif piece.size <= _INLINE_RANGE_BYTES or self.tls:  # TLS encrypts in user space: no sendfile
                data = os.pread(piece.file.fileno(), piece.size, piece.position)
                if len(data) != piece.size:
                    raise TruncatedDuringSend(f"read {len(data)} of {piece.size} bytes of {piece.file.name}")
                pending.append(data)
            else:
                if pending:
                    await self._send_bytes(b"".join(pending))
                    pending = []
                await self._sendfile(piece)
        if pending:
            await self._send_bytes(b"".join(pending))

    async def _send_bytes(self, data: bytes | bytearray) -> None:
        view = memoryview(data)
        while True:
            try:
                sent = self.sock.send(view)
            except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                sent = 0
            if sent == len(view):
                return
            view = view[sent:]
            await self._writable()

    async def _sendfile(self, piece: FileRange) -> None:
        # The range's explicit position, never the file object's own: appends and other fetches move that.
        position, end = piece.position, piece.position + piece.size
        in_fd = piece.file.fileno()
        while position < end:
            try:
                sent = os.sendfile(self.fd, in_fd, position, end - position)
            except (BlockingIOError, InterruptedError):
                await self._writable()
                continue
            if sent == 0:
                raise TruncatedDuringSend(
                    f"sent {position - piece.position} of {piece.size} bytes of {piece.file.name}")
            position += sent
            if position < end:  # a short send: the socket buffer is full
                await self._writable()

    async def _writable(self) -> None:
        """Wait until the socket can take more bytes (or the peer is gone: the next send says so)."""
        waiter = self.loop.create_future()
        self.loop.add_writer(self.fd, _resolve, waiter)
        try:
            await waiter
        finally:
            self.loop.remove_writer(self.fd)


    async def _readable(self) -> None:
        """Wait until the socket has bytes (during the TLS handshake, before reading is handed to _on_readable)."""
        waiter = self.loop.create_future()
        self.loop.add_reader(self.fd, _resolve, waiter)
        try:
            await waiter
        finally:
            self.loop.remove_reader(self.fd)


# The short names RFC 2253 gives the attributes of a certificate's subject (X500Principal.getName()'s form).
_RDN_NAMES = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
              "localityName": "L", "stateOrProvinceName": "ST", "streetAddress": "STREET", "domainComponent": "DC",
              "userId": "UID"}


def distinguished_name(subject: tuple) -> str:
    """A certificate subject as Kafka's default SSL principal names it: RFC 2253, most specific first
    (`CN=alice,OU=eng,O=acme,C=FR`); ssl.getpeercert lists the RDNs from the root down."""
    parts = []
    for rdn in reversed(subject):
        parts.append("+".join(f"{_RDN_NAMES.get(k, k)}={_escape_dn(v)}" for k, v in rdn))
    return ",".join(parts)


def _escape_dn(value: str) -> str:
    escaped = "".join("\\" + c if c in ',+"\\<>;=' else c for c in value)
    if escaped[:1] in ("#", " "):
        escaped = "\\" + escaped
    if escaped.endswith(" "):
        escaped = escaped[:-1] + "\\ "
    return escaped


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)

"""The producer's sender thread (the Java client's Sender + NetworkClient): drains ready batches from the
accumulator into Produce requests, one per leader, and completes them from the responses.

One thread owns every socket, non-blocking, through one selector; each broker connection keeps up to
`max.in.flight.requests.per.connection` requests outstanding (Kafka answers a connection's requests in order,
so responses match the oldest in-flight request). acks=0 requests get no response: their batches complete
when the request is written, with offset -1.

A partition error the broker calls retriable (NOT_LEADER_FOR_PARTITION, LEADER_NOT_AVAILABLE,
REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS...) puts the batch back at the head of its partition, after
`retry.backoff.ms`, up to `retries` times; an invalid-metadata error (a leader moved) also marks the
metadata stale, so the next attempt goes to the new leader. A lost connection or a request without an
answer for `request.timeout.ms` counts as a retriable NETWORK_EXCEPTION for each of its batches. As in
Kafka, a retry may reorder a partition's records unless max.in.flight.requests.per.connection is 1.
"""

from __future__ import annotations

import errno
import logging
import selectors
import socket
import ssl
import struct
import threading
import time
import zlib
from dataclasses import dataclass, field

from zkbroker.client.accumulator import ProduceBatch, RecordAccumulator
from zkbroker.client.connection import BrokerConnection
from zkbroker.client.metadata import BrokerInfo, Metadata, NoBrokersAvailable
from zkbroker.client.security import AuthenticationError, ClientSecurity
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.client_codec import ClientCodec
from zkbroker.protocol.compression import CODEC_NONE, CODEC_ZSTD
from zkbroker.protocol.errors import (
    BrokerResponseError,
    NetworkExceptionError,
    RemoteProtocolError,
    RequestTimedOutError,
    for_code,
)
from zkbroker.protocol.message_set import build_message_set
from zkbroker.protocol.record_batch import build_record_batch
from zkbroker.topic_partition import TopicPartition

__all__ = ["Sender", "message_set"]

log = logging.getLogger("zkbroker.client.Sender")

_PRODUCE_VERSION = 0  # 0.8.2's ProducerRequest; the records are magic-0 message sets
_IDLE_POLL_S = 0.1


_ENTRY_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic 0, attributes 0
_INT32 = struct.Struct(">i")
_NULL = b"\xff\xff\xff\xff"
_MAGIC0_CRC = zlib.crc32(b"\x00\x00")  # the CRC of a magic-0 message starts over magic and attributes


def message_set(records: list[tuple[bytes | None, bytes | None]]) -> bytes:
    """An uncompressed magic-0 message set of (key, value) records, offsets 0..n-1 (the broker assigns the
    real ones): byte for byte `build_message_set(records)`, which the unit tests check, written inline
    because this is the producer's per-record hot path."""
    parts = []
    append = parts.append
    crc32 = zlib.crc32
    pack_head = _ENTRY_HEAD.pack
    pack_int = _INT32.pack
    for offset, (key, value) in enumerate(records):
        k = _NULL if key is None else pack_int(len(key)) + key
        v = _NULL if value is None else pack_int(len(value)) + value
        append(pack_head(offset, len(k) + len(v) + 6, crc32(v, crc32(k, _MAGIC0_CRC)), 0, 0))
        append(k)
        append(v)
    return b"".join(parts)


@dataclass
class _InFlight:
    """What the sender attaches to a Produce request in its connection's codec."""

    batches: dict[TopicPartition, ProduceBatch]
    sent_at: float


@dataclass
class _Connection:
    """One non-blocking connection to a broker; its codec holds the in-flight requests."""

    node: BrokerInfo
    sock: socket.socket
    codec: ClientCodec
    connected: bool = False
    out: bytearray = field(default_factory=bytearray)


class Sender(threading.Thread):
    def __init__(self, accumulator: RecordAccumulator, metadata: Metadata, *, client_id: str, acks: int,
                 ack_timeout_ms: int, request_timeout_ms: int, retries: int, max_request_size: int,
                 max_in_flight: int, codec: int, reconnect_backoff_ms: int, send_buffer_bytes: int,
                 receive_buffer_bytes: int, magic: int = 0, security: ClientSecurity | None = None) -> None:
        super().__init__(name=f"kafka-producer-network-thread | {client_id}", daemon=True)
        self.accumulator = accumulator
        self.metadata = metadata
        self.client_id = client_id
        self.acks = acks
        self.ack_timeout_ms = ack_timeout_ms
        self.request_timeout_s = request_timeout_ms / 1000.0
        # An acks=-1 request may rightly wait timeout.ms at the broker before its answer.
        self.in_flight_timeout_s = max(request_timeout_ms, ack_timeout_ms + 1000) / 1000.0
        self.retries = retries
        self.max_request_size = max_request_size
        self.max_in_flight = max_in_flight
        self.codec = codec
        self.magic = magic
        # Produce v0 for 0.8.2's message sets; v3 for record batches, v7 when they are zstd (KIP-110)
        self.produce_version = _PRODUCE_VERSION if magic < 2 else (7 if codec == CODEC_ZSTD else 3)
        self.reconnect_backoff_s = reconnect_backoff_ms / 1000.0
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.security = security  # TLS and SASL to a secured listener (client/security.py); None: PLAINTEXT
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._woken = False
        self._connections: dict[int, _Connection] = {}
        self._backoff_until: dict[int, float] = {}
        self._running = True
        self._force_close = False

    # ---- control, from other threads ----------------------------------------------------------------------

    def wakeup(self) -> None:
        if not self._woken:
            self._woken = True
            try:
                self._wake_w.send(b"\0")
            except (BlockingIOError, OSError):
                pass

    def initiate_close(self) -> None:
        """Stop after sending everything still buffered."""
        self._running = False
        self.wakeup()

    def force_close(self) -> None:
        """Stop now; unsent batches fail."""
        self._force_close = True
        self._running = False
        self.wakeup()

    # ---- the loop -----------------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            while self._running:
                self._run_once()
            while not self._force_close and (self.accumulator.has_unsent() or self._in_flight_count()):
                self._run_once()
        except Exception:
            log.exception("Uncaught error in kafka producer I/O thread")
        finally:
            error = RuntimeError("The producer was closed before the record could be sent.")
            for batch in self.accumulator.abort_all(error):
                self._complete(batch, -1, error)
            for conn in list(self._connections.values()):
                self._close(conn, error, retry=False)
            self._selector.close()
            self._wake_r.close()
            self._wake_w.close()

    def _run_once(self) -> None:
        now = time.monotonic()
        cluster = self.metadata.cluster
        nodes, next_delay, unknown = self.accumulator.ready(cluster, now)
        if unknown:
            self.metadata.request_update()
        if self.metadata.needs_refresh(now):
            try:
                cluster = self.metadata.refresh()
            except NoBrokersAvailable:
                pass
            nodes, next_delay, _ = self.accumulator.ready(cluster, now)
        sendable = [n for n in nodes if self._ready(n, cluster, now)]
        for node, batches in self.accumulator.drain(cluster, sendable, self.max_request_size, now).items():
            self._send(self._connections[node], batches, now)
        for batch in self.accumulator.expired(now, self.request_timeout_s, self._reachable(cluster)):
            self._complete(batch, -1, RequestTimedOutError(
                f"Expiring a batch of {len(batch.records)} records for [{batch.topic},{batch.partition}]: "
                f"no leader to send it to within {self.request_timeout_s * 1000:.0f} ms"))
        self._check_request_timeouts(now)
        timeout = _IDLE_POLL_S if next_delay == float("inf") else min(max(next_delay, 0.0), _IDLE_POLL_S)
        for node in nodes:
            if node not in self._connections:  # waiting out a reconnect backoff
                timeout = min(timeout, max(self._backoff_until.get(node, 0.0) - now, 0.001))
        self._poll(timeout)

    def _reachable(self, cluster):
        def reachable(topic: str, partition: int) -> bool:
            info = cluster.topics.get(topic, {}).get(partition)
            conn = self._connections.get(info.leader) if info is not None else None
            return conn is not None and conn.connected
        return reachable

    def _in_flight_count(self) -> int:
        return sum(c.codec.in_flight for c in self._connections.values())

    # ---- connections --------------------------------------------------------------------------------------

    def _ready(self, node_id: int, cluster, now: float) -> bool:
        conn = self._connections.get(node_id)
        if conn is None:
            if self._backoff_until.get(node_id, 0.0) > now:
                return False
            broker = cluster.brokers.get(node_id)
            if broker is None:
                return False
            self._connect(broker)
            return False
        return conn.connected and conn.codec.in_flight < self.max_in_flight

    def _connect(self, broker: BrokerInfo) -> None:
        if self.security is not None:
            self._connect_secured(broker)
            return
        sock = socket.socket(socket.AF_INET6 if ":" in broker.host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.send_buffer_bytes > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
        if self.receive_buffer_bytes > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
        conn = _Connection(broker, sock, ClientCodec(self.client_id))
        try:
            host = socket.gethostbyname(broker.host) if ":" not in broker.host else broker.host
            code = sock.connect_ex((host, broker.port))
        except OSError as e:
            code = e.errno or errno.ECONNREFUSED
        if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
            log.debug("Connection to broker %s failed: %s", broker, errno.errorcode.get(code, code))
            sock.close()
            self._backoff_until[broker.node_id] = time.monotonic() + self.reconnect_backoff_s
            self.metadata.request_update()
            return
        self._connections[broker.node_id] = conn
        self._selector.register(sock, selectors.EVENT_WRITE, conn)

    def _connect_secured(self, broker: BrokerInfo) -> None:
        """TLS and SASL before the connection joins the selector. Unlike Java's, this thread waits for the
        handshake (at most the request timeout): a console producer's brokers are few and this happens once."""
        handshake = BrokerConnection(broker.host, broker.port, self.client_id, self.request_timeout_s, self.security)
        try:
            sock = handshake.connect().detach()
        except (OSError, RemoteProtocolError) as e:  # refused, unreachable, AuthenticationError: tried after a backoff
            (log.error if isinstance(e, AuthenticationError) else log.debug)(
                "Connection to broker %s failed: %s", broker, e)
            self._backoff_until[broker.node_id] = time.monotonic() + self.reconnect_backoff_s
            self.metadata.request_update()
            return
        sock.setblocking(False)
        conn = _Connection(broker, sock, ClientCodec(self.client_id), connected=True)
        self._connections[broker.node_id] = conn
        self._selector.register(sock, selectors.EVENT_READ, conn)

    def _close(self, conn: _Connection, error: BrokerResponseError | BaseException, retry: bool = True) -> None:
        """Drop a connection; its in-flight batches are retried (if allowed) or failed with `error`."""
        if self._connections.get(conn.node.node_id) is conn:
            del self._connections[conn.node.node_id]
        try:
            self._selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()
        self._backoff_until[conn.node.node_id] = time.monotonic() + self.reconnect_backoff_s
        now = time.monotonic()
        for request in conn.codec.abandon():
            for batch in request.batches.values():
                if retry:
                    self._fail_or_retry(batch, error, now)
                else:
                    self._complete(batch, -1, error)
        if retry:
            self.metadata.request_update()

    # ---- requests -----------------------------------------------------------------------------------------

    def _send(self, conn: _Connection, batches: list[ProduceBatch], now: float) -> None:
        topics: dict[str, list[dict]] = {}
        timestamp = time.time_ns() // 1_000_000
        for batch in batches:
            if self.magic == 2:
                records = build_record_batch(batch.records, codec=self.codec, timestamp=timestamp)
            elif self.codec == CODEC_NONE:
                records = message_set(batch.records)
            else:
                records = build_message_set(batch.records, codec=self.codec)
            topics.setdefault(batch.topic, []).append({"partition": batch.partition, "records": records})
        body = {"acks": self.acks, "timeout_ms": self.ack_timeout_ms, "transactional_id": None,
                "topics": [{"topic": t, "partitions": p} for t, p in topics.items()]}
        request = _InFlight({TopicPartition(b.topic, b.partition): b for b in batches}, now)
        conn.out += conn.codec.send(ApiKey.PRODUCE, self.produce_version, body, request)
        if self.acks == 0:  # no response will come
            for batch in batches:
                self._complete(batch, -1, None)
        self._write(conn)

    def _write(self, conn: _Connection) -> None:
        try:
            while conn.out:
                sent = conn.sock.send(conn.out)
                del conn.out[:sent]
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            pass
        except OSError as e:
            self._close(conn, NetworkExceptionError(f"sending to broker {conn.node} failed: {e}"))
            return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.out else 0)
        try:
            self._selector.modify(conn.sock, events, conn)
        except (KeyError, ValueError):
            pass

    def _poll(self, timeout: float) -> None:
        for key, events in self._selector.select(timeout):
            conn = key.data
            if conn is None:
                self._drain_wakeups()
                continue
            if conn.node.node_id not in self._connections or self._connections[conn.node.node_id] is not conn:
                continue
            if not conn.connected and events & selectors.EVENT_WRITE:
                code = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code:
                    log.debug("Connection to broker %s failed: %s", conn.node, errno.errorcode.get(code, code))
                    self._close(conn, NetworkExceptionError(f"cannot connect to broker {conn.node}"))
                    continue
                conn.connected = True
                self._write(conn)
                continue
            if events & selectors.EVENT_WRITE:
                self._write(conn)
            if events & selectors.EVENT_READ:
                self._read(conn)

    def _drain_wakeups(self) -> None:
        self._woken = False
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _read(self, conn: _Connection) -> None:
        codec = conn.codec
        while True:
            try:
                received = conn.sock.recv_into(codec.get_buffer())
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return
            except OSError as e:
                self._close(conn, NetworkExceptionError(f"receiving from broker {conn.node} failed: {e}"))
                return
            if not received:
                self._close(conn, NetworkExceptionError(f"broker {conn.node} closed the connection"))
                return
            try:
                codec.buffer_updated(received)
                while (response := codec.next_response()) is not None:
                    self._handle_response(response.context, response.body)
            except RemoteProtocolError as e:
                self._close(conn, NetworkExceptionError(f"bad response from broker {conn.node}: {e}"))
                return
            # TLS decrypts whole records: what is left of one is in the SSL object, which the selector cannot see
            if not isinstance(conn.sock, ssl.SSLSocket) or not conn.sock.pending():
                return

    def _handle_response(self, request: _InFlight, response) -> None:
        now = time.monotonic()
        pending = dict(request.batches)
        for topic in response.topics:
            for row in topic.partitions:
                batch = pending.pop((topic.topic, row.partition), None)
                if batch is None:
                    continue
                if row.error_code == 0:
                    self._complete(batch, row.base_offset, None)
                else:
                    error = for_code(row.error_code)(f"[{batch.topic},{batch.partition}]")
                    self._fail_or_retry(batch, error, now)
        for batch in pending.values():
            self._fail_or_retry(batch, NetworkExceptionError(
                f"the response had no entry for [{batch.topic},{batch.partition}]"), now)

    def _fail_or_retry(self, batch: ProduceBatch, error: BaseException, now: float) -> None:
        retriable = isinstance(error, BrokerResponseError) and error.retriable
        if retriable and batch.attempts <= self.retries and not self._force_close:
            log.warning("Got error produce response on topic-partition [%s,%d], retrying (%d attempts left). "
                        "Error: %s", batch.topic, batch.partition, self.retries - batch.attempts + 1, error)
            if getattr(error, "invalid_metadata", False):
                self.metadata.request_update()
            self.accumulator.reenqueue(batch, now)
        else:
            if getattr(error, "invalid_metadata", False):
                self.metadata.request_update()
            self._complete(batch, -1, error)

    def _check_request_timeouts(self, now: float) -> None:
        for conn in list(self._connections.values()):
            if conn.codec.in_flight and now - conn.codec.oldest_context().sent_at > self.in_flight_timeout_s:
                self._close(conn, NetworkExceptionError(
                    f"no response from broker {conn.node} within {self.in_flight_timeout_s * 1000:.0f} ms"))

    def _complete(self, batch: ProduceBatch, base_offset: int, error: BaseException | None) -> None:
        self.accumulator.release(batch)
        batch.complete(base_offset, error)

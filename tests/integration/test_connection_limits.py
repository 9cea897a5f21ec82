"""Connection limits against a real broker with real sockets (issue 15, item 2): max.connections.per.ip and its
overrides, connections.max.idle.ms, and a slow-loris client that does not hold up real clients.

The broker's own controller and replica connections come from 127.0.0.1, so the limited clients here connect
from other loopback addresses (127.0.0.2, 127.0.0.3), which Linux routes like 127.0.0.1."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from tests.integration.clients import PYTHON_CLIENTS
from tests.integration.harness import create_topic, wait_for
from zkbroker.protocol.frame import encode_frame
from zkbroker.protocol.headers import encode_request_header

pytestmark = pytest.mark.integration

METADATA = 3


def metadata_request(correlation_id: int) -> bytes:
    return encode_frame(encode_request_header(METADATA, 0, correlation_id, "limits-test") + struct.pack(">i", 0))


def connect_from(source: str, port: int) -> socket.socket:
    sock = socket.socket()
    sock.settimeout(10)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def answered(sock: socket.socket, correlation_id: int) -> bool:
    """Whether a Metadata request on this connection gets its answer (False: the broker closed it)."""
    try:
        sock.sendall(metadata_request(correlation_id))
        head = _read(sock, 8)
    except OSError:
        return False
    if head is None:
        return False
    size, answered_id = struct.unpack(">ii", head)
    return _read(sock, size - 4) is not None and answered_id == correlation_id


def closed_by_broker(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _read(sock: socket.socket, n: int) -> bytes | None:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def test_a_connection_past_max_connections_per_ip_is_closed_while_the_others_are_served(brokers):
    (broker,) = brokers(1, max_connections_per_ip=3,
                        max_connections_per_ip_overrides="127.0.0.1:1000,127.0.0.3:1")
    wait_for(lambda: broker.log_lines("Awaiting socket connections"), 30, "the broker to listen")
    first_three = [connect_from("127.0.0.2", broker.port) for _ in range(3)]
    extra = []
    try:
        assert all(answered(sock, n) for n, sock in enumerate(first_three))
        fourth = connect_from("127.0.0.2", broker.port)
        extra.append(fourth)
        assert closed_by_broker(fourth)
        assert broker.log_lines("Rejected connection from 127.0.0.2, address already has the configured maximum "
                                "of 3 connections")
        assert all(answered(sock, 10 + n) for n, sock in enumerate(first_three))  # still served

        only_one = connect_from("127.0.0.3", broker.port)  # the override: one connection for 127.0.0.3
        second = connect_from("127.0.0.3", broker.port)
        extra += [only_one, second]
        assert answered(only_one, 20)
        assert closed_by_broker(second)

        first_three.pop().close()  # a slot frees up once the broker has seen the close
        def a_new_one_is_served() -> bool:
            sock = connect_from("127.0.0.2", broker.port)
            extra.append(sock)
            return answered(sock, 30)
        wait_for(a_new_one_is_served, 10, "a new connection from 127.0.0.2 once one closed")
    finally:
        for sock in first_three + extra:
            sock.close()


def test_an_idle_connection_is_closed_after_connections_max_idle_ms_and_a_busy_one_is_not(brokers):
    # 3 s idle against a request every 0.3 s: the busy connection survives a stall of 2.7 s (a loaded machine).
    (broker,) = brokers(1, connections_max_idle_ms=3000)
    wait_for(lambda: broker.log_lines("Awaiting socket connections"), 30, "the broker to listen")
    idle = connect_from("127.0.0.2", broker.port)
    busy = connect_from("127.0.0.2", broker.port)
    try:
        assert answered(idle, 1)
        idle.settimeout(30)
        for n in range(25):  # 7.5 s of a request every 0.3 s: two idle timeouts, never idle itself
            assert answered(busy, 100 + n)
            time.sleep(0.3)
        assert closed_by_broker(idle)
        assert answered(busy, 200)
        assert broker.log_lines(r"Closing the connection from 127\.0\.0\.2:\d+#\d+: idle for more than "
                                r"connections.max.idle.ms \(3000 ms\)")
    finally:
        idle.close()
        busy.close()


class SlowLoris:
    """Connections that each trickle a Metadata request one byte a second, never completing it in time."""

    def __init__(self, port: int, connections: int) -> None:
        self.socks = [connect_from("127.0.0.2", port) for _ in range(connections)]
        self.closed = [False] * connections
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _trickle(self) -> None:
        request = metadata_request(1)
        for byte in range(len(request)):
            for i, sock in enumerate(self.socks):
                if not self.closed[i]:
                    try:
                        sock.send(request[byte:byte + 1])
                    except OSError:
                        self.closed[i] = True
            if self.stopping.wait(1.0):
                return

    def all_closed_by_broker(self) -> bool:
        for i, sock in enumerate(self.socks):
            if not self.closed[i]:
                sock.setblocking(False)
                try:
                    self.closed[i] = sock.recv(1) == b""
                except BlockingIOError:
                    pass
                except OSError:
                    self.closed[i] = True
        return all(self.closed)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(5)
        for sock in self.socks:
            sock.close()


@pytest.mark.timeout(240)
def test_a_slow_loris_client_does_not_hold_up_kafka_python_or_confluent_kafka(brokers, zk_connect):
    (broker,) = brokers(1, connections_max_idle_ms=5000)
    create_topic(zk_connect, "loris", 1, 1, [broker])
    loris = SlowLoris(broker.port, connections=20)
    try:
        kafka_python, _, confluent, _ = PYTHON_CLIENTS
        records = [(b"k%d" % i, b"v%d" % i) for i in range(2000)]
        acked = kafka_python.produce(broker.bootstrap, "loris", records, timeout_s=60)
        assert [offset for _, offset in acked] == list(range(2000))
        received = confluent.consume(broker.bootstrap, "loris", {0: 0}, 2000, timeout_s=60)
        assert [(r.key, r.value) for r in received] == records
        # The broker's limit on idleness ends the trickling connections too: a partial request is not activity.
        wait_for(loris.all_closed_by_broker, 60, "the broker to close every slow-loris connection")
    finally:
        loris.stop()

"""A broker process registers in ZooKeeper exactly as Kafka 0.8.2 did, and answers real clients."""

from __future__ import annotations

import json
import socket
import struct
import time

import pytest

from tests.integration.harness import SESSION_TIMEOUT_MS, wait_for

pytestmark = pytest.mark.integration


def test_broker_registers_exact_0_8_2_json_under_a_created_chroot(brokers, zk):
    (b1,) = brokers(1)
    wait_for(lambda: zk.get("/brokers/ids/1"), 15, "broker 1 to register")
    data = zk.get("/brokers/ids/1")
    reg = json.loads(data)
    assert list(reg) == ["version", "host", "port", "jmx_port", "timestamp"]
    assert reg == {"version": 1, "host": "127.0.0.1", "port": b1.port, "jmx_port": -1, "timestamp": reg["timestamp"]}
    assert isinstance(reg["timestamp"], str) and abs(int(reg["timestamp"]) - time.time() * 1000) < 60_000
    assert b" " not in data  # compact JSON, as Kafka's Json.encode writes it
    assert zk.stat("/brokers/ids/1").ephemeralOwner != 0
    for path in ("/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/config/topics",
                 "/admin/delete_topics"):
        assert zk.stat(path) is not None, path


def test_advertised_host_and_port_are_what_is_registered(brokers, zk):
    brokers(1, advertised_port=19999, advertised_host_name="broker-one.example")
    wait_for(lambda: zk.get("/brokers/ids/1"), 15, "broker 1 to register")
    reg = json.loads(zk.get("/brokers/ids/1"))
    assert (reg["host"], reg["port"]) == ("broker-one.example", 19999)


def test_kafka_python_and_confluent_kafka_see_brokers_and_controller(brokers, zk):
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient

    b1, b2 = brokers(1, 2)
    wait_for(lambda: zk.registered() == {1, 2} and zk.controller(), 15, "both brokers and a controller")
    controller = zk.controller()

    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{b1.port}", request_timeout_ms=10000)
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    assert cluster["controller_id"] == controller
    assert sorted((b["broker_id"], b["port"]) for b in cluster["brokers"]) == [(1, b1.port), (2, b2.port)]

    metadata = AdminClient({"bootstrap.servers": f"127.0.0.1:{b2.port}"}).list_topics(timeout=10)
    assert metadata.controller_id == controller
    assert {i: (m.host, m.port) for i, m in metadata.brokers.items()} == {
        1: ("127.0.0.1", b1.port), 2: ("127.0.0.1", b2.port)}


def test_a_starting_broker_never_names_a_controller_its_metadata_does_not_list(brokers):
    # The broker learns that it is the controller (/controller) a moment before it sees its own registration
    # (/brokers/ids): an answer naming controller 1 with no broker 1 would leave librdkafka's admin client
    # waiting for a broker it was never told about, until its request timed out.
    (b1,) = brokers(1)
    views = []

    def settled() -> bool:
        try:
            with b1.connection(timeout_s=5.0) as conn:
                answer = conn.send(3, 1, {"topics": []})
        except OSError:  # not listening yet
            return False
        view = (answer.controller_id, sorted(b.node_id for b in answer.brokers))
        if not views or views[-1] != view:
            views.append(view)  # each change once
        return view == (1, [1])

    wait_for(settled, 30, "broker 1 to list itself as the controller", interval_s=0.002)
    assert all(controller == -1 or controller in listed for controller, listed in views), views


def _request(sock: socket.socket, api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    client = b"test"
    payload = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client + body
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    (size,) = struct.unpack(">i", _recv(sock, 4))
    return _recv(sock, size)


def _recv(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def test_api_versions_newer_than_v3_gets_v0_error_35_with_the_table(brokers, zk):
    (b1,) = brokers(1)
    wait_for(lambda: zk.registered() == {1}, 15, "broker 1 to register")
    with socket.create_connection(("127.0.0.1", b1.port), timeout=5) as sock:
        # A v4 request uses header v2: client id then an empty tagged-field section; the body is compact (two
        # empty compact strings and no tags).
        reply = _request(sock, 18, 4, 7, b"\x00" + b"\x01\x01\x00")
        correlation_id, error_code, count = struct.unpack_from(">ihi", reply)
        assert (correlation_id, error_code) == (7, 35)
        table = {struct.unpack_from(">hhh", reply, 10 + 6 * i)[0]: struct.unpack_from(">hhh", reply, 10 + 6 * i)[1:]
                 for i in range(count)}
        assert table[18] == (0, 3) and table[3] == (0, 7)  # Kafka 2.1's Metadata maximum
        # The same connection then works at v0, as clients retry.
        reply = _request(sock, 18, 0, 8)
        assert struct.unpack_from(">ih", reply) == (8, 0)


def test_malformed_frame_closes_only_that_connection(brokers, zk):
    (b1,) = brokers(1)
    wait_for(lambda: zk.registered() == {1}, 15, "broker 1 to register")
    with socket.create_connection(("127.0.0.1", b1.port), timeout=5) as bad:
        bad.sendall(struct.pack(">i", 2**31 - 1) + b"garbage")  # larger than socket.request.max.bytes
        assert bad.recv(10) == b""  # closed by the broker
    with socket.create_connection(("127.0.0.1", b1.port), timeout=5) as bad:
        bad.sendall(struct.pack(">i", 3) + b"\x00\x03\x00")  # a header cut short
        assert bad.recv(10) == b""
    with socket.create_connection(("127.0.0.1", b1.port), timeout=5) as good:
        assert struct.unpack_from(">ih", _request(good, 18, 0, 1)) == (1, 0)
    assert b1.alive()


def test_second_live_broker_with_the_same_id_refuses_to_start(brokers, zk):
    (first,) = brokers(1)
    wait_for(lambda: zk.registered() == {1}, 15, "broker 1 to register")
    (second,) = brokers(1, dir_name="broker-1-second")  # its own log dir: only the id collides
    code = second.wait_exit(20)
    assert code != 0
    assert second.log_lines(r"Broker id 1 is already registered at /brokers/ids/1 by a live broker at "
                            rf"127\.0\.0\.1:{first.port}")
    assert json.loads(zk.get("/brokers/ids/1"))["port"] == first.port
    assert first.alive()


LONG_SESSION_MS = 10000


def test_fast_restart_registers_exactly_once_after_the_old_session_expires(brokers, zk, zookeeper):
    # A 10 s session, not the suite's 2 s: the restart must land while the killed process's session lives, and on a
    # loaded machine a broker's start (its imports alone) can take longer than 2 s.
    (b1,) = brokers(1, zookeeper_session_timeout_ms=LONG_SESSION_MS)
    # The znode appears a moment before the broker logs it (on a loaded machine, long enough for a kill to land
    # in between): wait for both, so that the first process's line is in the log.
    wait_for(lambda: zk.registered() == {1} and b1.log_lines("Registered broker 1 at path"), 15,
             "broker 1 to register")
    old_owner = zk.stat("/brokers/ids/1").ephemeralOwner
    b1.kill()  # its session lives on in ZooKeeper for up to the session timeout
    b1.start()
    wait_for(lambda: b1.log_lines("I wrote this conflicted ephemeral node"), 10, "the restarted broker to back off")
    # The log file holds both processes' lines: the first registered once, the restarted one once.
    try:
        wait_for(lambda: len(b1.log_lines("Registered broker 1 at path")) == 2, LONG_SESSION_MS / 1000 + 10,
                 "the restarted broker to register")
    except AssertionError as e:
        stat = zk.stat("/brokers/ids/1")
        owner = f"0x{stat.ephemeralOwner:x}" if stat else "nobody"
        raise AssertionError(
            f"{e}; /brokers/ids/1 is held by session {owner} (the killed broker's was 0x{old_owner:x}); the broker "
            f"is {'alive' if b1.alive() else 'dead'}, its log ends:\n" + "\n".join(b1.log().splitlines()[-15:])
            + "\nZooKeeper's log ends:\n" + zookeeper.log_tail(15)) from None
    stat = zk.stat("/brokers/ids/1")
    assert stat is not None and stat.ephemeralOwner != old_owner
    time.sleep(0.5)
    assert len(b1.log_lines("Registered broker 1 at path")) == 2
    assert b1.alive()


def test_broker_re_registers_after_its_session_expires(brokers, zk):
    b1, b2 = brokers(1, 2)
    wait_for(lambda: zk.registered() == {1, 2}, 15, "both brokers to register")
    b2.pause()
    try:
        wait_for(lambda: zk.registered() == {1}, SESSION_TIMEOUT_MS / 1000 + 10, "broker 2's node to vanish")
    finally:
        b2.resume()
    wait_for(lambda: zk.registered() == {1, 2}, 15, "broker 2 to register again")
    assert b2.log_lines("re-registering broker info in ZK for broker 2")


def test_sigterm_shuts_down_cleanly_and_deregisters_at_once(brokers, zk):
    (b1,) = brokers(1)
    wait_for(lambda: zk.registered() == {1}, 15, "broker 1 to register")
    assert b1.terminate() == 0
    assert zk.registered() == set()  # the closed session removed the node: nobody waits for a timeout
    assert b1.log_lines(r"\[Kafka Server 1\], shut down completed")

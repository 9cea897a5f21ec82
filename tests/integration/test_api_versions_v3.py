"""ApiVersions v3 (KIP-511, the first flexible version) against a real broker: confluent-kafka, kafka-python and
kcat each open their connections with it (kafka-python after a v4 that gets the v0-format UNSUPPORTED_VERSION
answer), the broker logs the client software each names, per connection, and the client then produces and
consumes as before; a v3 request whose software name breaks Kafka's rule gets INVALID_REQUEST on a connection
that stays open."""

from __future__ import annotations

import re
import socket
import struct
import subprocess
import uuid

import pytest

from tests.integration.clients import ClientConfig, Received
from tests.integration.harness import Broker, create_topic
from tests.real_tools import require
from zkbroker.protocol.api import decode_response, encode_request

pytestmark = pytest.mark.integration

RECORDS = [(b"key-%03d" % i, b"value-%03d" % i) for i in range(200)]

#: The software each client names in its ApiVersions v3 request (as recorded in tests/unit/protocol/client_frames.py).
SOFTWARE = {
    "confluent-kafka": r"confluent-kafka-python \S+-rdkafka-\S+",
    "kafka-python": r"kafka-python \d\S*",
    "kcat": r"librdkafka \d\S*",
}


def software_logged(broker: Broker) -> list[str]:
    """What the broker logged of each connection's ApiVersions v3 request: 'name version'."""
    pattern = re.compile(r"Connection \S+: client software (\S+ \S+) \(client id .*, ApiVersions v3\)")
    return [match.group(1) for line in broker.log().splitlines() if (match := pattern.search(line))]


@pytest.fixture
def broker_and_topic(brokers, zk_connect) -> tuple[Broker, str]:
    (broker,) = brokers(1)
    topic = f"v3-{uuid.uuid4().hex[:8]}"
    create_topic(zk_connect, topic, 2, 1, [broker])
    return broker, topic


def round_trip_python(library: str, broker: Broker, topic: str) -> None:
    client = ClientConfig(library, library, {})
    acked = client.produce(broker.bootstrap, topic, RECORDS, timeout_s=60)
    assert len(acked) == len(RECORDS)
    received = client.consume(broker.bootstrap, topic, {0: 0, 1: 0}, len(RECORDS), timeout_s=60)
    assert sorted((r.key, r.value) for r in received) == sorted(RECORDS)


def round_trip_kcat(broker: Broker, topic: str) -> None:
    kcat = require("kcat")
    lines = b"".join(key + b"\t" + value + b"\n" for key, value in RECORDS)
    done = subprocess.run([kcat, "-P", "-b", broker.bootstrap, "-t", topic, "-K", "\t"], input=lines,
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    done = subprocess.run([kcat, "-C", "-b", broker.bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
                           "-f", "%p\t%o\t%k\t%s\n"], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    received = [Received(int(p), int(o), k, v) for p, o, k, v in
                (line.split(b"\t") for line in done.stdout.splitlines())]
    assert sorted((r.key, r.value) for r in received) == sorted(RECORDS)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("client", sorted(SOFTWARE))
def test_client_negotiates_api_versions_v3_then_produces_and_consumes(client, broker_and_topic):
    broker, topic = broker_and_topic
    if client == "kcat":
        round_trip_kcat(broker, topic)
    else:
        round_trip_python(client, broker, topic)
    logged = software_logged(broker)
    assert logged, "no connection sent ApiVersions v3"
    # Every connection the client opened named its software in a v3 request, and each was accepted.
    assert all(re.fullmatch(SOFTWARE[client], software) for software in logged), logged
    assert not broker.log_lines("Invalid ApiVersions request")


def _exchange(sock: socket.socket, frame: bytes) -> bytes:
    sock.sendall(frame)
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    return sock.recv(size, socket.MSG_WAITALL)


@pytest.mark.timeout(60)
def test_invalid_client_software_gets_invalid_request_and_keeps_the_connection(broker_and_topic):
    broker, _ = broker_and_topic
    with socket.create_connection((broker.host, broker.port), timeout=30) as sock:
        bad = encode_request(18, 3, 1, "probe", {"client_software_name": "my client", "client_software_version": "1"})
        correlation_id, body = decode_response(18, 3, _exchange(sock, bad))
        assert (correlation_id, body.error_code, body.api_keys) == (1, 42, [])
        good = encode_request(18, 3, 2, "probe", {"client_software_name": "probe", "client_software_version": "1.0"})
        correlation_id, body = decode_response(18, 3, _exchange(sock, good))
        assert correlation_id == 2 and body.error_code == 0 and (18, 0, 3) in [tuple(k)[:3] for k in body.api_keys]
    assert broker.log_lines(r"Invalid ApiVersions request from client 'probe'")
    assert "probe 1.0" in software_logged(broker)

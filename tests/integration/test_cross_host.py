"""Brokers on distinct hosts, as docs/operations.md's "Running across machines" deploys them: every client finds every
leader through the advertised addresses alone.

On Linux all of 127.0.0.0/8 is loopback, so 127.0.0.2, 127.0.0.3 and 127.0.0.4 stand in for three machines.
Each broker binds its own alias (`host.name`) and registers it (`advertised.host.name`), all on the SAME port,
as brokers on separate machines would; nothing listens on 127.0.0.1 at that port. A client that is
bootstrapped from one broker and then ignored the registered hosts (connecting to its bootstrap address, or to
127.0.0.1) could not reach the other leaders; one that follows them produces to and reads back every partition.
"""

from __future__ import annotations

import json
import socket
import subprocess
import uuid

import pytest

from consumer.simple import SimpleConsumer
from tests.integration.clients import PYTHON_CLIENTS, Received
from tests.integration.harness import Broker, create_topic, free_port
from tests.integration.test_real_clients import assert_read_back, kcat_read_all, keyed_records
from tests.real_tools import require
from zkbroker.client.producer import Producer

pytestmark = pytest.mark.integration

HOSTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
PARTITIONS = 6
N_RECORDS = 600


def port_free_on_every_host() -> int:
    """One port that each alias can bind, so the brokers differ by host only."""
    for _ in range(20):
        port = free_port(HOSTS[0])
        try:
            for host in HOSTS:
                with socket.socket() as other:
                    other.bind((host, port))
        except OSError:
            continue
        return port
    raise AssertionError(f"no port free on all of {HOSTS}")


@pytest.fixture
def cluster(brokers, zk_connect):
    """Three brokers, one per alias, one port; a replicated topic whose leaders are spread over all three."""
    port = port_free_on_every_host()
    serving: list[Broker] = []
    for broker_id, host in enumerate(HOSTS, start=1):
        serving += brokers(broker_id, port=port, host_name=host, advertised_host_name=host, advertised_port=port)
    topic = f"xhost-{uuid.uuid4().hex[:8]}"
    leaders = create_topic(zk_connect, topic, PARTITIONS, 2, serving)
    assert set(leaders.values()) == {1, 2, 3}, leaders
    return serving, topic


def test_brokers_register_their_advertised_addresses(cluster, zk):
    serving, _ = cluster
    for broker, host in zip(serving, HOSTS):
        registration = json.loads(zk.get(f"/brokers/ids/{broker.id}"))
        assert (registration["host"], registration["port"]) == (host, broker.port)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("client", PYTHON_CLIENTS, ids=str)
def test_python_client_bootstrapped_from_one_broker_reaches_every_leader(client, cluster):
    serving, topic = cluster
    records = keyed_records(N_RECORDS, seed=11)
    acked = client.produce(serving[0].bootstrap, topic, records, timeout_s=60)
    assert {p for p, _ in acked} == set(range(PARTITIONS))
    received = client.consume(serving[1].bootstrap, topic, dict.fromkeys(range(PARTITIONS), 0), N_RECORDS,
                              timeout_s=60)
    assert_read_back(records, received, acked)


@pytest.mark.timeout(120)
def test_our_producer_and_simple_consumer_reach_every_leader(cluster, zk_connect):
    serving, topic = cluster
    records = keyed_records(N_RECORDS, seed=12)  # acks=all: the high watermark, where reads stop, is past them
    with Producer({"bootstrap.servers": serving[2].bootstrap, "acks": "all", "linger.ms": 5}) as producer:
        futures = [producer.send(topic, value, key=key) for key, value in records]
        acked = [(md.partition, md.offset) for md in (f.get(timeout=60) for f in futures)]
    assert {p for p, _ in acked} == set(range(PARTITIONS))
    for consumer in (SimpleConsumer(serving[0].bootstrap), SimpleConsumer.from_zookeeper(zk_connect)):
        with consumer:
            assert {(b.host, b.port) for b in (consumer.find_leader(topic, p) for p in range(PARTITIONS))} == {
                (host, serving[0].port) for host in HOSTS}
            received = [Received(p, m.offset, m.key, m.value)
                        for p in range(PARTITIONS) for m in consumer.iter_messages(topic, p, 0)]
        assert_read_back(records, received, acked)


@pytest.mark.timeout(120)
def test_kcat_bootstrapped_from_one_broker_reaches_every_leader(cluster):
    kcat = require("kcat")
    serving, topic = cluster
    records = keyed_records(N_RECORDS, seed=13, text=True)
    lines = b"".join(k + b"\t" + v + b"\n" for k, v in records)
    # acks=all: the reader's -e stops at the high watermark, which must be past every record.
    done = subprocess.run([kcat, "-P", "-b", serving[0].bootstrap, "-t", topic, "-K", "\t", "-X", "acks=all"],
                          input=lines, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    received = kcat_read_all(kcat, serving[1].bootstrap, topic)
    assert {r.partition for r in received} == set(range(PARTITIONS))
    assert_read_back(records, received)

"""Which version of each group API every real client picks now that the broker advertises Kafka 2.1's (README, The
group coordinator): a relay in front of the broker, which the broker advertises as its address, notes the header of
every request the clients send; each client then joins a group, reads a record, commits, reads its committed
offset back and leaves (and, where the client has an admin API, lists and describes groups)."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
import uuid

import pytest

from tests.integration.group_support import Member
from tests.integration.harness import create_topic, wait_for
from zkbroker.protocol.api import ApiKey, advertised_versions

pytestmark = pytest.mark.integration

GROUP_APIS = (ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP,
              ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP, ApiKey.SYNC_GROUP, ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS)

#: What each client picked against this broker (the README's table, by api key): the highest version both sides
#: know -- the broker's maximum, or the client's own where it stops lower (librdkafka's LeaveGroup v1, KafkaJS's
#: OffsetCommit v5 and OffsetFetch v4, aiokafka's 0.11-era versions). None: the client sends no such request here.
EXPECTED = {
    "confluent-kafka": {8: 6, 9: 7, 10: 2, 11: 3, 12: 2, 13: 1, 14: 2, 15: 2, 16: 2},
    "kafka-python": {8: 6, 9: 7, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2, 16: 2},
    "aiokafka": {8: 3, 9: 3, 10: 1, 11: 2, 12: 1, 13: 1, 14: 1, 15: 2, 16: 1},
    "kafkajs": {8: 5, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: None, 16: None},
}


class RecordingRelay:
    """A TCP relay to one broker that records (client_id, api_key, api_version) of each request passing through."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target_port: int | None = None
        self.seen: set[tuple[str, int, int]] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def versions(self, client_id: str) -> dict[int, set[int]]:
        with self._lock:
            out: dict[int, set[int]] = {}
            for cid, key, version in self.seen:
                if cid == client_id:
                    out.setdefault(key, set()).add(version)
            return out

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            broker = socket.create_connection(("127.0.0.1", self.target_port))
            threading.Thread(target=self._requests, args=(client, broker), daemon=True).start()
            threading.Thread(target=self._copy, args=(broker, client), daemon=True).start()

    def _requests(self, source: socket.socket, sink: socket.socket) -> None:
        pending = b""
        while data := self._recv(source):
            pending += data
            while len(pending) >= 4 and len(pending) >= 4 + struct.unpack_from(">i", pending)[0]:
                size = struct.unpack_from(">i", pending)[0]
                key, version, _, length = struct.unpack_from(">hhih", pending, 4)
                client_id = pending[14:14 + length].decode() if length >= 0 else ""
                with self._lock:
                    self.seen.add((client_id, key, version))
                pending = pending[4 + size:]
            # Forwarded once noted: a request is in `seen` before its answer can reach the client.
            sink.sendall(data)
        sink.close()

    def _copy(self, source: socket.socket, sink: socket.socket) -> None:
        while data := self._recv(source):
            sink.sendall(data)
        sink.close()

    @staticmethod
    def _recv(sock: socket.socket) -> bytes:
        try:
            return sock.recv(65536)
        except OSError:
            return b""

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def relayed_broker(brokers, zk_connect):
    relay = RecordingRelay()
    (broker,) = brokers(1, start=False, advertised_port=relay.port)
    relay.target_port = broker.port
    broker.start()
    create_topic(zk_connect, "versions", 1, 1, [broker])
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("versions", b"v")
    assert producer.flush(30) == 0
    yield relay
    relay.close()


def heartbeated(relay: RecordingRelay, client_id: str) -> bool:
    return ApiKey.HEARTBEAT in relay.versions(client_id)


def confluent_kafka_flow(relay: RecordingRelay, bootstrap: str, client_id: str) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    group = f"versions-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "heartbeat.interval.ms": 100, "session.timeout.ms": 6000})
    consumer.subscribe(["versions"])
    message = wait_for(lambda: consumer.poll(0.2), 60, "confluent-kafka to read the record")
    consumer.commit(message, asynchronous=False)
    assert consumer.committed([TopicPartition("versions", 0)], timeout=30)[0].offset == 1
    # Until a heartbeat went out (a fixed second could pass without one on a loaded machine).
    deadline = time.monotonic() + 30
    while not heartbeated(relay, client_id) and time.monotonic() < deadline:
        consumer.poll(0.1)
    consumer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": client_id})
    admin.list_consumer_groups().result(30)
    admin.describe_consumer_groups([group])[group].result(30)


def kafka_python_flow(relay: RecordingRelay, bootstrap: str, client_id: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

    group = f"versions-{uuid.uuid4().hex[:6]}"
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=client_id,
                             auto_offset_reset="earliest", enable_auto_commit=False, heartbeat_interval_ms=100,
                             session_timeout_ms=6000, max_poll_interval_ms=6000)
    # The topic's metadata first: a kafka-python member that joins before it has any assigns itself nothing ("No
    # partition metadata for topic") and waits for the next rebalance, minutes away (seen on a loaded machine).
    wait_for(lambda: consumer.partitions_for_topic("versions"), 30, "kafka-python to learn the topic")
    consumer.subscribe(["versions"])
    wait_for(lambda: consumer.poll(200), 60, "kafka-python to read the record")
    consumer.commit()
    assert consumer.committed(TopicPartition("versions", 0)) == 1
    # A heartbeat from its heartbeat thread (waited for: a fixed second could pass without one under load).
    wait_for(lambda: heartbeated(relay, client_id), 30, "a heartbeat from kafka-python")
    consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=client_id)
    admin.list_groups()
    admin.describe_groups([group])
    admin.close()


def aiokafka_flow(relay: RecordingRelay, bootstrap: str, client_id: str) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient

    group = f"versions-{uuid.uuid4().hex[:6]}"

    async def run() -> None:
        consumer = AIOKafkaConsumer("versions", bootstrap_servers=bootstrap, group_id=group, client_id=client_id,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    heartbeat_interval_ms=100, session_timeout_ms=6000)
        await consumer.start()
        try:
            read = {}
            deadline = time.monotonic() + 60
            while not read and time.monotonic() < deadline:
                read = await consumer.getmany(timeout_ms=200)
            assert read, "aiokafka read nothing"
            await consumer.commit()
            assert await consumer.committed(TopicPartition("versions", 0)) == 1
            deadline = time.monotonic() + 30  # until a heartbeat went out (a fixed second may not do under load)
            while not heartbeated(relay, client_id) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        finally:
            await consumer.stop()
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id=client_id)
        await admin.start()
        try:
            await admin.list_consumer_groups()
            await admin.describe_consumer_groups([group])
        finally:
            await admin.close()

    asyncio.run(asyncio.wait_for(run(), 120))


def kafkajs_flow(relay: RecordingRelay, bootstrap: str, client_id: str, workdir) -> None:
    member = Member(workdir, "kafkajs", bootstrap, f"versions-{uuid.uuid4().hex[:6]}", client_id,
                    topics=["versions"])
    try:
        wait_for(lambda: member.records(), 60, "KafkaJS to read the record")
        # A heartbeat (every second) and an auto-commit: waited for, as 1.5 s may not do on a loaded machine.
        wait_for(lambda: {ApiKey.HEARTBEAT, ApiKey.OFFSET_COMMIT} <= set(relay.versions(client_id)), 30,
                 "a heartbeat and an auto-commit from KafkaJS")
    finally:
        member.stop()
    assert member.events()[-1]["event"] == "closed"


def test_each_client_picks_kafka_2_1_group_api_versions(relayed_broker, tmp_path, capsys):
    relay = relayed_broker
    bootstrap = f"127.0.0.1:{relay.port}"
    confluent_kafka_flow(relay, bootstrap, "versions-confluent-kafka")
    kafka_python_flow(relay, bootstrap, "versions-kafka-python")
    aiokafka_flow(relay, bootstrap, "versions-aiokafka")
    kafkajs_flow(relay, bootstrap, "versions-kafkajs", tmp_path)
    advertised = advertised_versions()
    picked = {}
    for client in EXPECTED:
        seen = relay.versions(f"versions-{client}")
        for key in GROUP_APIS:  # (ApiVersions is probed above its range on purpose: librdkafka starts at v3)
            versions = seen.get(key, set())
            low, high = advertised[key]
            assert all(low <= v <= high for v in versions), (client, key, versions)
        picked[client] = {int(key): max(seen[key]) if key in seen else None for key in GROUP_APIS}
    with capsys.disabled():
        print("\nGroup API versions picked:", picked)
    assert picked == EXPECTED

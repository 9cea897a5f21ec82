"""Durability under churn: with the safe settings (RF 3, acks=-1, min.insync.replicas=2, unclean election off,
leader-epoch truncation) no acknowledged record is lost or duplicated by the brokers while leaders are
killed, paused past their session and restarted again and again, and every replica ends byte-identical up
to the high watermark.

One thing the brokers cannot prevent: librdkafka without idempotence sends a message set again when its
first attempt went to a leader that then stalled, even with retries=0 — and the first attempt may have
reached the new leader through replication. Such a record is stored twice. The brokers log, at DEBUG, which
produce request (connection and correlation id) appended which offsets, so the test tells a client's resend
(two requests carried the record) from a duplicate the brokers made (one request's records stored twice, or
copied by replication: that fails the test). With enable.idempotence=true (record batches, InitProducerId and
the brokers' producer state, KIP-98) a resend is recognised by its sequence numbers and answered with the
offsets it was stored at: nothing may be stored twice at all.
"""

from __future__ import annotations

import glob
import json
import random
import re
import struct
import threading

import pytest

from tests.integration.harness import SESSION_TIMEOUT_MS, wait_for
from zkbroker import admin
from zkbroker.client.connection import BrokerConnection
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode
from zkbroker.zk.client import ZkClient

pytestmark = pytest.mark.integration

TOPIC = "churn"
PARTITIONS = 3
EVENTS = 10
SESSION_S = SESSION_TIMEOUT_MS / 1000


def states(zk) -> dict[int, dict]:
    out = {}
    for p in range(PARTITIONS):
        data = zk.get(f"/brokers/topics/{TOPIC}/partitions/{p}/state")
        if data:
            out[p] = json.loads(data)
    return out


def healthy(zk) -> bool:
    """Every broker registered, every partition led by a live broker with a full ISR."""
    live = zk.registered()
    s = states(zk)
    return live == {1, 2, 3} and len(s) == PARTITIONS and all(
        st["leader"] in live and len(st["isr"]) == 3 for st in s.values())


def raw_entries(broker, partition: int, below: int) -> bytes:
    """The bytes of every log entry with an offset below `below`, from the broker's segment files."""
    out = bytearray()
    for path in sorted(glob.glob(str(broker.dir / "data" / f"{TOPIC}-{partition}" / "*.log"))):
        with open(path, "rb") as f:
            data = f.read()
        position = 0
        while position + 12 <= len(data):
            offset, size = struct.unpack_from(">qi", data, position)
            if offset >= below or position + 12 + size > len(data):
                break
            out += data[position:position + 12 + size]
            position += 12 + size
    return bytes(out)


def latest_offset(broker, partition: int, replica_id: int = -1) -> int | None:
    """The high watermark as a consumer sees it (replica_id -1), or the leader's log end (a replica's view); None
    while the broker does not lead the partition yet (ZooKeeper's state moves before its LeaderAndIsr arrives)."""
    with BrokerConnection("127.0.0.1", broker.port, timeout_s=10) as conn:
        response = conn.send(ApiKey.LIST_OFFSETS, 0, {"replica_id": replica_id, "topics": [
            {"topic": TOPIC, "partitions": [{"partition": partition, "timestamp": -1, "max_num_offsets": 1}]}]})
    entry = response.topics[0].partitions[0]
    if entry.error_code == ErrorCode.NOT_LEADER_FOR_PARTITION:
        return None
    assert entry.error_code == ErrorCode.NONE
    return entry.offsets[0]


def settled(zk, by_id) -> tuple[dict, dict[int, int]] | None:
    """Each partition's leader as ZooKeeper names it, once each one leads and its HW has reached its log end (a
    new leader's HW trails until its followers fetch again): (leaders, high watermarks), else None."""
    leaders = {p: by_id[s["leader"]] for p, s in states(zk).items()}
    hws = {}
    for p in range(PARTITIONS):
        hw = latest_offset(leaders[p], p)
        if hw is None or hw != latest_offset(leaders[p], p, replica_id=0):
            return None
        hws[p] = hw
    return leaders, hws


APPENDED = re.compile(r"on connection (\S+) \(correlation id (\d+)\): \[churn,(\d+)\] appended at offsets "
                      r"(\d+)-(\d+)")


def appending_requests(trio) -> dict[tuple[int, int], set[tuple]]:
    """(partition, offset) -> every produce request (broker, connection, correlation id) that any leader
    appended over that offset, from the brokers' DEBUG logs."""
    out: dict[tuple[int, int], set[tuple]] = {}
    for broker in trio:
        for line in broker.log_lines("appended at offsets"):
            m = APPENDED.search(line)
            if m:
                request = (broker.id, m[1], int(m[2]))
                for offset in range(int(m[4]), int(m[5]) + 1):
                    out.setdefault((int(m[3]), offset), set()).add(request)
    return out


class Producer(threading.Thread):
    """confluent-kafka with acks=all and no retries: a record is acknowledged once, or not at all; or idempotent
    (which retries, each resend carrying the batch's sequence numbers).

    An idempotent producer may acknowledge a record without an offset: when a request failed with an
    uncertain outcome (REQUEST_TIMED_OUT from a leader that lost its leadership) and the next batch of the
    same partition then succeeds, its sequence number proves the earlier batch was written, and librdkafka
    reports the earlier records delivered "implicitly", at offset -1001 (rd_kafka_dr_implicit_ack)."""

    def __init__(self, bootstrap: str, idempotent: bool = False) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer as KafkaProducer
        config = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000,
                  "log_level": 0}
        config.update({"enable.idempotence": True} if idempotent else {"message.send.max.retries": 0})
        self.producer = KafkaProducer(config)
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed = 0
        self.stop = threading.Event()

    def _delivered(self, err, message) -> None:
        if err is None:
            self.acked[message.value()] = (message.partition(), message.offset())
        else:
            self.failed += 1

    def run(self) -> None:
        seq = 0
        while not self.stop.is_set():
            self.producer.produce(TOPIC, value=b"record-%08d" % seq, on_delivery=self._delivered)
            seq += 1
            self.producer.poll(0.002)
        self.producer.flush(30)


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_durability_under_churn_no_acknowledged_record_is_lost_and_replicas_agree(idempotent, brokers, zk,
                                                                                  zk_connect):
    trio = brokers(1, 2, 3, start=False, replication_truncation="leader-epoch", replica_lag_time_max_ms=3000)
    for b in trio:
        b.start(verbose=True)
    by_id = {b.id: b for b in trio}
    wait_for(lambda: zk.registered() == {1, 2, 3}, 15, "three brokers")
    client = ZkClient(zk_connect)
    client.start()
    try:
        admin.create_topic(client, TOPIC, PARTITIONS, 3,
                           {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"})
    finally:
        client.close()
    wait_for(lambda: healthy(zk), 20, "all partitions led with a full ISR")

    producer = Producer(",".join(f"127.0.0.1:{b.port}" for b in trio), idempotent)
    producer.start()
    rng = random.Random(1211)
    try:
        wait_for(lambda: len(producer.acked) > 100, 20, "the producer to get going")
        for event in range(EVENTS):
            partition = rng.randrange(PARTITIONS)
            victim = by_id[states(zk)[partition]["leader"]]
            if event % 3 == 2:
                victim.pause()  # past the session timeout: to ZooKeeper it is dead
                try:
                    wait_for(lambda v=victim: v.id not in zk.registered(), SESSION_S + 15,
                             "the paused victim's session to expire")
                finally:
                    victim.resume()
            else:
                victim.kill()
                wait_for(lambda v=victim: v.id not in zk.registered(), SESSION_S + 15,  # expiry: generous under load
                         "the victim to expire")
                victim.start(verbose=True)
            wait_for(lambda: healthy(zk), 40, f"the cluster to heal after event {event + 1}")
            acked_before = len(producer.acked)
            wait_for(lambda n=acked_before: len(producer.acked) > n + 50, 30, "writes to be acknowledged again")
    finally:
        producer.stop.set()
        producer.join(60)

    assert len(producer.acked) > 1000
    leaders, hws = wait_for(lambda: settled(zk, by_id), 30, "every leader to lead and its HW to reach its log end")
    wait_for(lambda: all(len({raw_entries(b, p, hws[p]) for b in trio}) == 1 for p in range(PARTITIONS)), 30,
             "every replica to hold the same bytes up to the high watermark")

    from zkbroker.protocol.message_set import iter_messages
    seen: dict[bytes, list[tuple[int, int]]] = {}
    for p in range(PARTITIONS):
        for m in iter_messages(raw_entries(leaders[p], p, hws[p])):
            seen.setdefault(m.value, []).append((p, m.offset))
    lost = [v for v in producer.acked if v not in seen]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:3]}"
    duplicated = {v: places for v, places in seen.items() if len(places) > 1}
    requests = appending_requests(trio)

    def resent_by_the_client(places) -> bool:
        first, second = (requests.get(place, set()) for place in places[:2])
        return any(a != b for a in first for b in second)

    made_by_brokers = [v for v, places in duplicated.items() if idempotent or not resent_by_the_client(places)]
    print(f"{len(producer.acked)} records acknowledged, {producer.failed} failed; {len(duplicated)} resent by the "
          "client and stored twice")
    assert not made_by_brokers, f"{len(made_by_brokers)} records duplicated by the brokers, e.g. " + ", ".join(
        f"{v!r} at {seen[v]}" for v in made_by_brokers[:4])
    # Each acknowledged record sits where its acknowledgement said (or, resent, where its last ack said); one
    # acknowledged implicitly, without an offset (confluent-kafka's offset() is None then, or a negative
    # sentinel), sits in the partition it was sent to.
    implicit = {v for v, (_, offset) in producer.acked.items() if offset is None or offset < 0}
    assert not implicit or idempotent, "only an idempotent producer acknowledges without an offset"
    misplaced = [v for v, place in producer.acked.items()
                 if (place[0] not in {p for p, _ in seen[v]} if v in implicit else place not in seen[v])]
    print(f"{len(implicit)} records acknowledged implicitly (no offset)")
    assert not misplaced, f"{len(misplaced)} records are not where they were acknowledged, e.g. " + ", ".join(
        f"{v!r} acknowledged at {producer.acked[v]}, stored at {seen[v]}" for v in misplaced[:3])

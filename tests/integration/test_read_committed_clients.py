"""Unmodified read_committed consumers against a partition holding transactions (Kafka 0.11's last stable
offset and aborted transactions). The log is written beside a stopped broker through its own Log, with the
coordinator's markers, so that an open transaction stays open whatever timeout a coordinator keeps (the
coordinator's side is tests/integration/test_transactions.py), then served:
confluent-kafka, kafka-python and kcat reading read_committed see the committed records and the plain ones,
never the aborted ones nor those of the transaction still open; read_uncommitted readers see all of them, and
ListOffsets answers the LSO as read_committed's end."""

from __future__ import annotations

import subprocess

import pytest

from tests.integration.clients import ClientConfig
from tests.integration.harness import create_topic, wait_for_leaders
from tests.real_tools import require
from zkbroker.log.log import Log
from zkbroker.protocol.record_batch import (
    ControlRecordType,
    EndTxnMarker,
    build_end_txn_marker_batch,
    build_record_batch,
)

T0 = 1_700_000_000_000
TOPIC = "txn"
COMMITTED = [b"a0", b"a1", b"c0", b"c1", b"z"]  # plain, then producer 7's committed transaction, then plain
EVERYTHING = [b"a0", b"a1", b"c0", b"c1", b"x0", b"x1", b"z", b"o0"]
LSO = 9  # producer 9's transaction, open at offset 9


def _batch(values, pid=-1, seq=-1):
    return bytearray(build_record_batch([(None, v, T0) for v in values], producer_id=pid, producer_epoch=0,
                                        base_sequence=seq, transactional=pid >= 0))


def _marker(pid, kind):
    return bytearray(build_end_txn_marker_batch(EndTxnMarker(kind, 0), producer_id=pid, producer_epoch=0,
                                                timestamp=T0))


def write_transactions(log_dir) -> None:
    log = Log(str(log_dir))
    log.append(_batch([b"a0", b"a1"]))  # 0-1
    log.append(_batch([b"c0", b"c1"], pid=7, seq=0))  # 2-3
    log.append(_batch([b"x0", b"x1"], pid=8, seq=0))  # 4-5
    log.append(_marker(7, ControlRecordType.COMMIT), coordinator=True)  # 6
    log.append(_marker(8, ControlRecordType.ABORT), coordinator=True)  # 7
    log.append(_batch([b"z"]))  # 8
    log.append(_batch([b"o0"], pid=9, seq=0))  # 9, left open
    assert log.log_end_offset == 10
    log.close()


@pytest.fixture
def served(brokers, zk_connect):
    broker = brokers(1)[0]
    create_topic(zk_connect, TOPIC, 1, 1, [broker])
    assert broker.terminate() == 0
    write_transactions(broker.dir / "data" / f"{TOPIC}-0")
    broker.start()
    wait_for_leaders([broker], TOPIC, 1)
    return broker


@pytest.mark.parametrize(("library", "config"), [
    ("confluent-kafka", {"isolation.level": "read_committed"}),
    ("kafka-python", {"isolation_level": "read_committed"}),
])
def test_read_committed_consumers_skip_aborted_records_and_stop_at_the_lso(served, library, config):
    client = ClientConfig(library, library, config)
    read = client.consume(served.bootstrap, TOPIC, {0: 0}, len(COMMITTED), timeout_s=60)
    assert [r.value for r in read] == COMMITTED


@pytest.mark.parametrize(("library", "config"), [
    ("confluent-kafka", {"isolation.level": "read_uncommitted"}),
    ("kafka-python", {}),
])
def test_read_uncommitted_consumers_see_every_data_record(served, library, config):
    client = ClientConfig(library, library, config)
    read = client.consume(served.bootstrap, TOPIC, {0: 0}, len(EVERYTHING), timeout_s=60)
    assert [r.value for r in read] == EVERYTHING


def test_kcat_read_committed_and_the_ends_listoffsets_answers(served):
    from confluent_kafka import Consumer, TopicPartition

    kcat = require("kcat")
    done = subprocess.run([kcat, "-C", "-b", served.bootstrap, "-t", TOPIC, "-o", "beginning", "-e", "-q",
                           "-X", "isolation.level=read_committed", "-f", "%s\n"], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert done.stdout.splitlines() == COMMITTED
    for level, end in (("read_committed", LSO), ("read_uncommitted", 10)):
        consumer = Consumer({"bootstrap.servers": served.bootstrap, "group.id": "ends", "isolation.level": level})
        try:
            assert consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30, cached=False) == (0, end)
        finally:
            consumer.close()


def test_a_follower_replicates_markers_and_serves_read_committed_after_failover(brokers, zk_connect, zk):
    """The transactions written into the leader's log (which its unclean restart recovers, rebuilding the
    `.txnindex`) reach the follower through replication like any batch: its `.txnindex` matches the leader's, and
    once the leader is gone it serves read_committed readers the same committed records and LSO."""
    import json

    from confluent_kafka import Consumer, TopicPartition

    from tests.integration.harness import wait_for
    from zkbroker.log.transaction_index import TransactionIndex, transaction_index_filename

    pair = {b.id: b for b in brokers(1, 2)}
    create_topic(zk_connect, TOPIC, 1, 2, list(pair.values()))
    state_path = f"/brokers/topics/{TOPIC}/partitions/0/state"

    def state() -> dict:
        return json.loads(zk.get(state_path))

    leader_id = state()["leader"]
    follower_id = 3 - leader_id
    leader, follower = pair[leader_id], pair[follower_id]
    follower.kill()  # the follower first: the leader stays in the ISR, alone
    wait_for(lambda: state()["isr"] == [leader_id], 30, "the ISR to shrink to the leader")
    leader.kill()
    write_transactions(leader.partition_dir(TOPIC, 0))
    leader.start()
    wait_for_leaders([leader], TOPIC, 1)
    follower.start()
    wait_for(lambda: sorted(state()["isr"]) == [1, 2], 60, "the follower to catch up and rejoin the ISR")
    for broker in (leader, follower):
        [txn] = TransactionIndex(transaction_index_filename(str(broker.partition_dir(TOPIC, 0)), 0)).entries
        assert (txn.producer_id, txn.first_offset, txn.last_offset) == (8, 4, 7)
        # The LSO the abort left: 8 appended alone (the leader's recovery replays batch by batch); 9 when producer
        # 9's batch came in the same fetch, since Kafka's log computes it over the whole appended set -- both
        # bound every transaction still open then, which is all a fetch's search needs of it
        assert txn.last_stable_offset in (8, 9)
    leader.kill()
    wait_for(lambda: state()["leader"] == follower_id, 30, "the follower to lead")
    wait_for_leaders([follower], TOPIC, 1)
    client = ClientConfig("confluent-kafka", "confluent-kafka", {"isolation.level": "read_committed"})
    assert [r.value for r in client.consume(follower.bootstrap, TOPIC, {0: 0}, len(COMMITTED))] == COMMITTED
    consumer = Consumer({"bootstrap.servers": follower.bootstrap, "group.id": "ends"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30, cached=False) == (0, LSO)
    finally:
        consumer.close()

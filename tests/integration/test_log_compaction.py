"""Log compaction end to end: a real broker process with log.cleaner.enable on a real ZooKeeper, a
cleanup.policy=compact topic with small segments, keyed records (plain and gzip) from unmodified kafka-python,
and an unmodified consumer that then reads from offset 0 exactly one record per key -- the last one sent, at
the offset the producer was acknowledged with. Also after a SIGKILL in the middle of a swap, where the lab's
fault point hold_cleaner_at stopped the cleaner; and a topic written by confluent-kafka's transactional producer
(record batches, committed and aborted transactions), whose aborted records the cleaner removes."""

from __future__ import annotations

import os
import uuid

import pytest

from tests.integration.clients import ClientConfig
from tests.integration.harness import Broker, create_topic, wait_for
from zkbroker.control_protocol import fault_request
from zkbroker.log.checkpoint import OffsetCheckpoint
from zkbroker.topic_partition import TopicPartition

pytestmark = pytest.mark.integration

# Pinned to 0.10.1's API versions, so it writes message sets of format 1 (gzip wrappers included); the
# transactional test below writes record batches (magic 2).
KAFKA_PYTHON = ClientConfig("kafka-python-0.10.1", "kafka-python", {"api_version": (0, 10, 1)})
CONFLUENT = ClientConfig("confluent-kafka", "confluent-kafka", {})
KEYS = 40
ROUNDS = 24
FILLERS = 400  # unique keys after the last round: they fill the active segment, which is never cleaned
SEGMENT_BYTES = 8192  # a round (one produce request of 40 records) is about 2 KB


def produce_rounds(broker: Broker, topic: str) -> tuple[dict[bytes, tuple[int, bytes | None]], int]:
    """ROUNDS of the same KEYS (gzip every other one, a tombstone in the last), then FILLERS unique keys; returns
    each key's last (offset, value) and the first filler's offset."""
    last: dict[bytes, tuple[int, bytes | None]] = {}
    for n in range(ROUNDS):
        records = [(f"key-{k}".encode(), f"round-{n}-of-{k}".encode()) for k in range(KEYS)]
        if n == ROUNDS - 1:
            records[0] = (records[0][0], None)  # a tombstone: kept for delete.retention.ms (a day by default)
        acked = KAFKA_PYTHON.produce(broker.bootstrap, topic, records, compression="gzip" if n % 2 else "none")
        last |= {key: (offset, value) for (key, value), (_, offset) in zip(records, acked)}
    first_filler = None
    for start in range(0, FILLERS, 50):  # in requests below segment.bytes
        fillers = [(f"filler-{i}".encode(), b"x" * 20) for i in range(start, start + 50)]
        acked = KAFKA_PYTHON.produce(broker.bootstrap, topic, fillers)
        last |= {key: (offset, value) for (key, value), (_, offset) in zip(fillers, acked)}
        first_filler = acked[0][1] if first_filler is None else first_filler
    return last, first_filler


def wait_until_cleaned_and_read_back(broker: Broker, topic: str, last: dict, first_filler: int) -> None:
    checkpoint = OffsetCheckpoint(str(broker.dir / "data" / "cleaner-offset-checkpoint"))
    wait_for(lambda: checkpoint.read().get(TopicPartition(topic, 0), -1) > first_filler, 60,
             "the cleaner to clean past the last round of keyed records")
    received = CONFLUENT.consume(broker.bootstrap, topic, {0: 0}, count=len(last), timeout_s=60)
    assert sorted((r.key, r.offset, r.value) for r in received) == sorted(
        (key, offset, value) for key, (offset, value) in last.items()
    )


def compacted_topic(zk_connect: str, broker: Broker, topic: str) -> None:
    create_topic(zk_connect, topic, 1, 1, [broker],
                 config={"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
                         "min.cleanable.dirty.ratio": "0.01"})


def test_a_compacted_topic_reads_back_only_the_last_value_of_each_key(brokers, zk_connect):
    (broker,) = brokers(1, log_cleaner_enable="true", log_cleaner_backoff_ms=100)
    topic = "compacted"
    compacted_topic(zk_connect, broker, topic)
    last, first_filler = produce_rounds(broker, topic)
    wait_until_cleaned_and_read_back(broker, topic, last, first_filler)
    assert broker.log_lines(r"Log cleaner finished cleaning log compacted-0")
    assert len(broker.log_lines(r"Cleaning segment \d+ in log compacted-0")) > 5  # small segments, many cleaned


def test_a_broker_killed_in_the_middle_of_a_swap_recovers_it_and_loses_nothing(brokers, zk_connect):
    """The cleaner held (fault point hold_cleaner_at) right after its `.cleaned` files became `.swap` -- the swap
    committed, the old segments still in place -- and the broker SIGKILLed there: the restarted broker completes
    the swap, cleans on, and reads back exactly the last value of each key."""
    (broker,) = brokers(1, start=False, control=True, log_cleaner_enable="true", log_cleaner_backoff_ms=100)
    # Held before it writes anything while the records go in (the swap's phases would hold the log's lock, and
    # with it every append to the partition); moved to the swap once they are all in.
    broker.start(faults=[fault_request("hold_cleaner_at", phase="offset-map-built")])
    topic = "compacted"
    compacted_topic(zk_connect, broker, topic)
    last, first_filler = produce_rounds(broker, topic)
    with broker.control() as control:
        wait_for(lambda: control.faults()[0].get("held") == 1, 60, "the cleaner to build an offset map")
        control.fault("hold_cleaner_at", phase="swap-renamed")
        wait_for(lambda: control.faults() == [{"point": "hold_cleaner_at", "phase": "swap-renamed", "held": 1}], 60,
                 "the cleaner to reach its swap")
    swapping = [p.name for p in broker.partition_dir(topic, 0).iterdir() if p.name.endswith(".swap")]
    assert swapping, "a .swap file: the swap committed, the segments it replaces not yet renamed"
    broker.kill()
    broker.start()
    wait_until_cleaned_and_read_back(broker, topic, last, first_filler)
    assert not [p for p in broker.partition_dir(topic, 0).iterdir() if p.name.endswith((".swap", ".cleaned"))]


def test_a_transactional_compacted_topic_keeps_the_last_committed_value_and_loses_aborted_records(brokers, zk_connect):
    """confluent-kafka's transactional producer writes rounds of the same keys, each committed round followed by an
    aborted one, then unique keys in small transactions: once cleaned, read_committed and read_uncommitted
    consumers alike read one record per key, the last committed -- the aborted records are gone from the log,
    not just hidden."""
    from confluent_kafka import Producer

    (broker,) = brokers(1, log_cleaner_enable="true", log_cleaner_backoff_ms=100,
                        transaction_state_log_num_partitions=1, offsets_topic_num_partitions=1)
    topic = "compacted-txn"
    create_topic(zk_connect, topic, 1, 1, [broker],
                 config={"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:6]}",
                         "linger.ms": 5, "compression.type": "gzip"})
    producer.init_transactions(60)

    def transaction(records, commit):
        producer.begin_transaction()
        for key, value in records:
            producer.produce(topic, key=key, value=value, partition=0)
        assert producer.flush(60) == 0
        (producer.commit_transaction if commit else producer.abort_transaction)(60)

    last = {}
    for n in range(8):
        committed = [(f"key-{k}".encode(), f"round-{n}-of-{k}".encode()) for k in range(20)]
        transaction(committed, commit=True)
        last |= dict(committed)
        transaction([(key, b"aborted-" + value) for key, value in committed], commit=False)
    for start in range(0, 240, 40):  # unique keys, below segment.bytes a transaction: the active segment's
        fillers = [(f"filler-{i}".encode(), os.urandom(40)) for i in range(start, start + 40)]  # incompressible
        transaction(fillers, commit=True)
        last |= dict(fillers)
    end_of_rounds = 8 * 2 * 21  # 20 records and a marker a transaction

    checkpoint = OffsetCheckpoint(str(broker.dir / "data" / "cleaner-offset-checkpoint"))
    try:
        wait_for(lambda: checkpoint.read().get(TopicPartition(topic, 0), -1) >= end_of_rounds, 60,
                 "the cleaner to clean past the committed and aborted rounds")
    except AssertionError as e:  # once seen in a loaded fresh-clone run: the cleaner's and markers' lines say why
        said = broker.log_lines(r"[Cc]lean|ERROR|Exception|marker|stable")
        raise AssertionError(f"{e}; checkpoint {checkpoint.read()}; the broker's log: {said[-15:]}") from None
    for isolation in ("read_committed", "read_uncommitted"):
        client = ClientConfig("confluent-kafka", "confluent-kafka", {"isolation.level": isolation})
        received = client.consume(broker.bootstrap, topic, {0: 0}, count=len(last), timeout_s=60)
        assert {r.key: r.value for r in received} == last, isolation
        assert len(received) == len(last), isolation
        assert not any(r.value.startswith(b"aborted-") for r in received), isolation
    assert broker.log_lines(r"Log cleaner finished cleaning log compacted-txn-0")

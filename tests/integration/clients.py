"""Unmodified real clients driven the same way: kafka-python and confluent-kafka, each in its default
configuration and in the legacy 0.8.2 one (wire-protocol.md §1 says what each sends).

Every call is bounded: producers flush with a timeout, consumers poll against a deadline, and a client that
cannot finish raises AssertionError saying what it got instead of hanging.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

KeyValue = tuple[bytes, "bytes | None"]


class Received(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class ClientConfig:
    """One client library in one configuration; `id` names the pytest parameter."""

    id: str
    library: str  # "kafka-python" | "confluent-kafka"
    config: dict

    def __str__(self) -> str:
        return self.id

    def produce(self, bootstrap: str, topic: str, records: Sequence[KeyValue], compression: str = "none",
                timeout_s: float = 60.0) -> list[tuple[int, int]]:
        """Send keyed records with acks=1; returns the (partition, offset) the broker acknowledged for each."""
        if self.library == "kafka-python":
            return _kp_produce(self.config, bootstrap, topic, records, compression, timeout_s)
        return _ck_produce(self.config, bootstrap, topic, records, compression, timeout_s)

    def consume(self, bootstrap: str, topic: str, starts: dict[int, int], count: int, timeout_s: float = 60.0,
                group: str | None = None, reset: str = "earliest") -> list[Received]:
        """assign() the partitions at the given offsets (None: the committed offset) and read `count`
        records, in the order the client delivers them."""
        if self.library == "kafka-python":
            return _kp_consume(self.config, bootstrap, topic, starts, count, timeout_s, group, reset)
        return _ck_consume(self.config, bootstrap, topic, starts, count, timeout_s, group, reset)

    def commit(self, bootstrap: str, group: str, topic: str, offsets: dict[int, int], timeout_s: float = 30.0) -> None:
        """Commit {partition: next offset} for the group through the client's own commit call."""
        if self.library == "kafka-python":
            _kp_commit(self.config, bootstrap, group, topic, offsets, timeout_s)
        else:
            _ck_commit(self.config, bootstrap, group, topic, offsets, timeout_s)

    def committed(self, bootstrap: str, group: str, topic: str, partitions: Sequence[int],
                  timeout_s: float = 30.0) -> dict[int, int]:
        """What a new consumer of the group reads back with OffsetFetch ({partition: offset})."""
        if self.library == "kafka-python":
            return _kp_committed(self.config, bootstrap, group, topic, partitions, timeout_s)
        return _ck_committed(self.config, bootstrap, group, topic, partitions, timeout_s)


PYTHON_CLIENTS = [
    ClientConfig("kafka-python", "kafka-python", {}),
    ClientConfig("kafka-python-0.8.2", "kafka-python", {"api_version": (0, 8, 2)}),
    ClientConfig("confluent-kafka", "confluent-kafka", {}),
    ClientConfig("confluent-kafka-0.8.2", "confluent-kafka",
                 {"api.version.request": False, "broker.version.fallback": "0.8.2"}),
]

#: The one configuration that commits with OffsetCommit v0, whose offsets live in ZooKeeper (0.8.1's API; every
#: client above sends v1 or v2, whose offsets live in __consumer_offsets).
ZOOKEEPER_OFFSETS_CLIENT = ClientConfig("kafka-python-0.8.1", "kafka-python", {"api_version": (0, 8, 1)})


def _deadline(timeout_s: float) -> float:
    return time.monotonic() + timeout_s


# ---- kafka-python -------------------------------------------------------------------------------------------

_KP_TIMEOUTS = {"request_timeout_ms": 15000, "bootstrap_timeout_ms": 15000}


def _kp_produce(config, bootstrap, topic, records, compression, timeout_s):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=64 * 1024,
                             compression_type=None if compression == "none" else compression,
                             max_block_ms=int(timeout_s * 1000), delivery_timeout_ms=int(timeout_s * 1000),
                             **_KP_TIMEOUTS, **config)
    try:
        futures = [producer.send(topic, key=key, value=value) for key, value in records]
        producer.flush(timeout=timeout_s)
        acked = []
        for future in futures:
            metadata = future.get(timeout=0)  # flush() returned, so every future is done; raises its error
            acked.append((metadata.partition, metadata.offset))
        return acked
    finally:
        producer.close(timeout=5)


def _kp_consumer(config, bootstrap, group, reset):
    from kafka import KafkaConsumer

    return KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                         auto_offset_reset=reset, fetch_max_wait_ms=100, **_KP_TIMEOUTS, **config)


def _kp_consume(config, bootstrap, topic, starts, count, timeout_s, group, reset):
    from kafka import TopicPartition

    consumer = _kp_consumer(config, bootstrap, group, reset)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(starts)]
        consumer.assign(tps)
        for tp in tps:
            if starts[tp.partition] is not None:
                consumer.seek(tp, starts[tp.partition])
        out: list[Received] = []
        deadline = _deadline(timeout_s)
        while len(out) < count and time.monotonic() < deadline:
            for tp, batch in consumer.poll(timeout_ms=500, max_records=20000).items():
                out += [Received(tp.partition, r.offset, r.key, r.value) for r in batch]
        assert len(out) >= count, f"kafka-python {config} read {len(out)} of {count} records in {timeout_s} s"
        return out
    finally:
        consumer.close(autocommit=False, timeout_ms=5000)


def _kp_commit(config, bootstrap, group, topic, offsets, timeout_s):
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = _kp_consumer(config, bootstrap, group, "earliest")
    try:
        consumer.assign([TopicPartition(topic, p) for p in sorted(offsets)])
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()},
                        timeout_ms=int(timeout_s * 1000))
    finally:
        consumer.close(autocommit=False, timeout_ms=5000)


def _kp_committed(config, bootstrap, group, topic, partitions, timeout_s):
    from kafka import TopicPartition

    consumer = _kp_consumer(config, bootstrap, group, "earliest")
    try:
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        return {p: consumer.committed(TopicPartition(topic, p), timeout_ms=int(timeout_s * 1000))
                for p in partitions}
    finally:
        consumer.close(autocommit=False, timeout_ms=5000)


# ---- confluent-kafka ----------------------------------------------------------------------------------------


def _ck_produce(config, bootstrap, topic, records, compression, timeout_s):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                         "compression.codec": compression, "message.timeout.ms": int(timeout_s * 1000),
                         **config})
    acked: list[tuple[int, int] | None] = [None] * len(records)
    errors: list[str] = []

    def delivered(i):
        def callback(err, msg):
            if err is not None:
                errors.append(f"record {i}: {err}")
            else:
                acked[i] = (msg.partition(), msg.offset())
        return callback

    deadline = _deadline(timeout_s)
    for i, (key, value) in enumerate(records):
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=delivered(i))
                break
            except BufferError:  # the local queue is full: serve delivery reports, then retry
                producer.poll(0.05)
                assert time.monotonic() < deadline, f"confluent-kafka {config}: queue stayed full"
        producer.poll(0)
    left = producer.flush(max(deadline - time.monotonic(), 1.0))
    assert left == 0 and not errors, (f"confluent-kafka {config}: {left} records undelivered; "
                                      f"{len(errors)} failed, first: {errors[:3]}")
    return acked


def _ck_consumer(config, bootstrap, group, reset):
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": group or f"reader-{uuid.uuid4().hex[:8]}",
                     "enable.auto.commit": False, "auto.offset.reset": reset, "fetch.wait.max.ms": 100,
                     "socket.timeout.ms": 15000, **config})


def _ck_consume(config, bootstrap, topic, starts, count, timeout_s, group, reset):
    from confluent_kafka import OFFSET_INVALID, TopicPartition

    consumer = _ck_consumer(config, bootstrap, group, reset)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_INVALID if o is None else o) for p, o in starts.items()])
        out: list[Received] = []
        errors: list[str] = []
        deadline = _deadline(timeout_s)
        while len(out) < count and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=20000, timeout=0.5):
                if m.error() is not None:
                    errors.append(str(m.error()))
                    continue
                out.append(Received(m.partition(), m.offset(), m.key(), m.value()))
        assert len(out) >= count, (f"confluent-kafka {config} read {len(out)} of {count} records in {timeout_s} s; "
                                   f"errors: {errors[:3]}")
        return out
    finally:
        consumer.close()


def _ck_commit(config, bootstrap, group, topic, offsets, timeout_s):
    from confluent_kafka import Consumer, TopicPartition

    results: list = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "socket.timeout.ms": 15000, "on_commit": lambda err, tps: results.append((err, tps)),
                         **config})
    try:
        tps = [TopicPartition(topic, p, o) for p, o in sorted(offsets.items())]
        consumer.assign(tps)
        # Asynchronous, so the wait has a deadline: a synchronous commit() takes no timeout.
        consumer.commit(offsets=tps, asynchronous=True)
        deadline = _deadline(timeout_s)
        while not results and time.monotonic() < deadline:
            consumer.poll(0.1)
        assert results, f"confluent-kafka {config}: no commit result within {timeout_s} s"
        err, committed = results[0]
        failed = [tp for tp in committed if tp.error is not None]
        assert err is None and not failed, f"confluent-kafka {config}: commit failed: {err} {failed}"
    finally:
        consumer.close()


def _ck_committed(config, bootstrap, group, topic, partitions, timeout_s):
    from confluent_kafka import TopicPartition

    consumer = _ck_consumer(config, bootstrap, group, "earliest")
    try:
        result = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=timeout_s)
        return {tp.partition: tp.offset for tp in result}
    finally:
        consumer.close()

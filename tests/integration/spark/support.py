"""Records for the Spark tests: produced with hand-built Produce requests straight to each partition's leader
(so every record's partition and offset are known), and read back as comparable rows."""

from __future__ import annotations

import uuid

from tests.integration.harness import Broker, create_topic
from zkbroker.protocol.compression import CODEC_NONE
from zkbroker.protocol.message_set import build_message_set
from zkbroker.protocol.record_batch import build_record_batch

PRODUCE_CHUNK = 200


def new_topic(prefix: str = "spark") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def record(topic: str, partition: int, i: int) -> tuple[bytes | None, bytes | None]:
    """The i-th record of a partition: every 7th key null, every 11th value empty, every 13th value null."""
    key = None if i % 7 == 0 else b"key-%d" % i
    value = b"" if i % 11 == 0 else None if i % 13 == 0 else f"{topic}/{partition}/{i}".encode() * (1 + i % 3)
    return key, value


def produce(brokers: list[Broker], leaders: dict[int, int], topic: str, per_partition: int, first: int = 0,
            magic: int = 0, timestamp: int = 1_700_000_000_000, codec: int = CODEC_NONE) -> None:
    """Records first..first+per_partition-1 of every partition, acks=-1, in order; magic-1 records carry
    timestamp + i ms. With a codec each request is one compressed wrapper of up to PRODUCE_CHUNK records."""
    by_id = {b.id: b for b in brokers}
    for partition, leader in sorted(leaders.items()):
        with by_id[leader].connection() as conn:
            for start in range(first, first + per_partition, PRODUCE_CHUNK):
                items = [(*record(topic, partition, i), timestamp + i)
                         for i in range(start, min(start + PRODUCE_CHUNK, first + per_partition))]
                if magic == 2:  # one record batch per request (Produce v3), each record with a header
                    records = build_record_batch(
                        [(*item, [("i", b"%d" % (start + n))]) for n, item in enumerate(items)], codec=codec)
                else:
                    records = build_message_set(items, magic=magic, codec=codec)
                body = {"acks": -1, "timeout_ms": 10000, "transactional_id": None, "topics": [
                    {"topic": topic, "partitions": [{"partition": partition, "records": records}]}]}
                row = conn.send(0, {0: 0, 1: 2, 2: 3}[magic], body).topics[0].partitions[0]
                assert (row.error_code, row.base_offset) == (0, start), (topic, partition, row)


def make_topic(zk_connect: str, brokers: list[Broker], partitions: int = 6, replication_factor: int = 1,
               per_partition: int = 0, topic: str | None = None, magic: int = 0,
               codec: int = CODEC_NONE) -> tuple[str, dict[int, int]]:
    topic = topic or new_topic()
    leaders = create_topic(zk_connect, topic, partitions, replication_factor, brokers)
    if per_partition:
        produce(brokers, leaders, topic, per_partition, magic=magic, codec=codec)
    return topic, leaders


def expected_rows(topic: str, partitions, offsets) -> list[tuple]:
    """(topic, partition, offset, key, value) of the records at these offsets of these partitions."""
    return [(topic, p, i, *record(topic, p, i)) for p in partitions for i in offsets]


def rows(df) -> list[tuple]:
    """A DataFrame's (topic, partition, offset, key, value), sorted."""
    return sorted((r.topic, r.partition, r.offset, r.key and bytes(r.key), r.value and bytes(r.value))
                  for r in df.select("topic", "partition", "offset", "key", "value").collect())


def run_available_now(df, out, checkpoint) -> list[dict]:
    """Run the stream to what is there now (Trigger.AvailableNow) into Parquet; the progress of each batch."""
    query = (df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(150), "the AvailableNow query did not finish"
    assert query.exception() is None, query.exception()
    return [p for p in query.recentProgress if p["numInputRows"] or p["sources"][0]["endOffset"]]

"""One zkkafka task reading its range through a stand-in for the simple consumer's leader."""

from __future__ import annotations

import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from consumer.spark import DataLossError, kafka_schema, parse_options
from zkbroker.protocol.message_set import build_message_set

ZK = "127.0.0.1:2181/kafka"
SCHEMA = to_arrow_schema(kafka_schema(), timezone="UTC")


def options(**extra: str) -> dict[str, str]:
    return {"zookeeper.connect": ZK, **extra}


# ---- reading one range through the simple consumer --------------------------------------------------------------


class FakeLeader:
    """A partition's leader as the simple consumer sees it: a log from `start` to `end`, fetches of max_bytes, and
    scripted trouble (no leader for a few fetches, retention or truncation after a number of fetches)."""

    def __init__(self, start: int, end: int, value_size: int = 10) -> None:
        self.start, self.end, self.value_size = start, end, value_size
        self.fetches: list[tuple[int, int]] = []
        self.leaderless = 0
        self.after: dict[int, tuple[int, int]] = {}  # fetch number -> new (start, end)

    def fetch(self, offset: int, max_bytes: int):
        from consumer.simple import LeaderNotFound
        from zkbroker.protocol.errors import OffsetOutOfRangeError

        if self.leaderless:
            self.leaderless -= 1
            raise LeaderNotFound("no leader yet")
        self.fetches.append((offset, max_bytes))
        self.start, self.end = self.after.get(len(self.fetches), (self.start, self.end))
        if not self.start <= offset <= self.end:
            raise OffsetOutOfRangeError(f"offset {offset}")
        records = build_message_set([(None, b"%0*d" % (self.value_size, o)) for o in range(offset, self.end)],
                                    base_offset=offset)
        return records[:max_bytes], self.end


@pytest.fixture
def leader(monkeypatch):
    import consumer.simple
    import consumer.spark.source

    fake = FakeLeader(0, 100)

    class Consumer:
        def __init__(self, *args, **kwargs) -> None:
            pass

        def earliest_offset(self, topic: str, partition: int) -> int:
            return fake.start

        def latest_offset(self, topic: str, partition: int, isolation_level: int = 0) -> int:
            return fake.end

        def close(self) -> None:
            pass

    monkeypatch.setattr(consumer.simple, "SimpleConsumer", Consumer)
    monkeypatch.setattr(consumer.spark.source, "_fetch_raw",
                        lambda c, t, p, offset, max_bytes: fake.fetch(offset, max_bytes))
    return fake


def read(start: int, end: int, **extra: str) -> list[int]:
    from consumer.spark.source import ZkKafkaPartition, read_range

    opts = parse_options(options(subscribe="t", **extra))
    part = ZkKafkaPartition("t", 0, start, end, 1, (("127.0.0.1", 9092),), opts)
    return [o for batch in read_range(part, SCHEMA) for o in batch.column("offset").to_pylist()]


TEN = {"fetch.message.max.bytes": "360"}  # ten 36-byte messages a fetch


def test_a_range_is_read_in_fetches_of_fetch_message_max_bytes(leader):
    assert read(10, 90, **TEN) == list(range(10, 90))
    assert leader.fetches == [(offset, 360) for offset in range(10, 90, 10)]


def test_a_message_larger_than_a_fetch_doubles_the_fetch_size(leader):
    leader.value_size = 700
    assert read(0, 3, **{"fetch.message.max.bytes": "300"}) == [0, 1, 2]
    assert [size for _, size in leader.fetches][:3] == [300, 600, 1200]


def test_no_leader_for_a_while_is_waited_out(leader):
    leader.leaderless = 3
    assert read(0, 100) == list(range(100))


def test_retention_overtaking_the_read_is_data_loss_failed_or_skipped(leader):
    leader.after = {2: (50, 100)}  # after the first fetch, retention deletes offsets below 50
    with pytest.raises(DataLossError, match=r"Could not read records in offset \[10, 50\) for topic partition t-0"):
        read(0, 100, **TEN)
    leader.fetches, leader.start = [], 0
    assert read(0, 100, failOnDataLoss="false", **TEN) == [*range(10), *range(50, 100)]


@pytest.mark.parametrize("new_end, read_first", [(5, 10), (30, 30)])
def test_a_log_truncated_below_the_range_is_data_loss(leader, new_end, read_first):
    """An unclean leader election: the new leader's log ends at new_end, before (5) or after (30) the offset the
    read had reached (OFFSET_OUT_OF_RANGE, or a high watermark that stays below the range's end)."""
    quick = {"kafkaConsumer.pollTimeoutMs": "200", **TEN}
    leader.after = {2: (0, new_end)}
    assert read(0, 100, failOnDataLoss="false", **quick) == list(range(read_first))
    leader.fetches, leader.end = [], 100
    with pytest.raises(DataLossError, match=rf"offset \[{read_first}, 100\)"):
        read(0, 100, **quick)


def test_a_broker_that_answers_nothing_below_its_high_watermark_times_out(leader, monkeypatch):
    import consumer.spark.source

    monkeypatch.setattr(consumer.spark.source, "_fetch_raw", lambda *args: (b"", 100))
    with pytest.raises(TimeoutError, match="Cannot fetch record for offset 0 of t-0 in 300 milliseconds"):
        read(0, 10, **{"kafkaConsumer.pollTimeoutMs": "300"})


def test_a_stored_bomb_fails_the_task_naming_topic_partition_and_offset(leader, monkeypatch):
    """A gzip set stored by an older broker that inflates past the task's bound (16 x its fetch size of 1 MiB)
    fails the task with the topic, partition and offset, without inflating it."""
    import consumer.spark.source
    from zkbroker.protocol.compression import CODEC_GZIP
    from zkbroker.protocol.message_set import InflationBoundError, read_inflation_bound

    bound = read_inflation_bound(1024 * 1024)
    bomb = build_message_set([(None, bytes(bound + 1))], codec=CODEC_GZIP, base_offset=7)
    records = build_message_set([(None, b"fine")], base_offset=6) + bomb
    monkeypatch.setattr(consumer.spark.source, "_fetch_raw", lambda *args: (records, 100))
    with pytest.raises(InflationBoundError, match=rf"offset 7 of \[t,0\] inflates past {bound} bytes"):
        read(6, 10)

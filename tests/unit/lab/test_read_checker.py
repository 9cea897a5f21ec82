"""The checker on hand-made batch reads (a Spark read of an offsets range during a failover): a clean read is ok;
a row the final log no longer holds, a row read twice, and an acknowledged record the read's range covered but
the read did not return are each found, named and counted in the run's verdict."""

from __future__ import annotations

from zkbroker.lab.checker import Attempt, PartitionState, Read, check, check_read
from zkbroker.lab.narration import clock
from zkbroker.topic_partition import TopicPartition

T0 = 1_795_000_000_000.0
TP = TopicPartition("t", 0)


def acked(value: bytes, offset: int, at: float = T0) -> Attempt:
    return Attempt("t", 0, value, sent_at=at, acked_at=at + 5, offset=offset)


def log_of(*values: bytes) -> dict[int, bytes]:
    return dict(enumerate(values))


def state(log: dict[int, bytes], hw: int | None = None, leader: int | None = 1) -> PartitionState:
    return PartitionState("t", 0, len(log) if hw is None else hw, leader, {1: log})


def read(rows: list[tuple[int, bytes | None]], start: int = 0, end: int = 3, error: str | None = None) -> Read:
    return Read("r", {TP: (start, end)}, [("t", 0, offset, value) for offset, value in rows], error)


def test_a_read_of_what_the_log_holds_is_ok_and_records_after_its_range_are_not_missed():
    attempts = [acked(b"m1", 0), acked(b"m2", 1), acked(b"m3", 2), acked(b"m4", 3)]
    report = check(attempts, [state(log_of(b"m1", b"m2", b"m3", b"m4"))], reads=[read([(0, b"m1"), (1, b"m2"),
                                                                                      (2, b"m3")])])
    assert report.verdict() == "ok" and report.losses == report.duplicates == report.read_divergences == []
    assert report.as_json()["divergent"] == 0


def test_a_row_read_then_truncated_diverges_from_the_log_and_the_record_written_in_its_place_is_lost_to_the_read():
    # KAFKA-1211 seen by a reader: m2 (acknowledged at offset 1) was read from the old leader; the new one had
    # truncated it and wrote m3 at offset 1, inside the read's range, which the read never returned.
    attempts = [acked(b"m1", 0), acked(b"m2", 1), acked(b"m3", 1, T0 + 9000)]
    truncation = {"ts": T0 + 5000, "source": "broker:1", "kind": "truncated", "topic": "t", "partition": 0,
                  "from": 2, "to": 1, "reason": "high-watermark truncation on becoming a follower"}
    final = state(log_of(b"m1", b"m3"))
    losses, duplicates, divergences = check_read(read([(0, b"m1"), (1, b"m2")]), attempts, [final], [truncation])
    (divergence,) = divergences
    assert (divergence.read, divergence.offset, divergence.value) == ("r", 1, b"m2")
    assert divergence.cause == (f"t-0 offset 1 read by r as 'm2' (acknowledged), but the log now holds 'm3' there; "
                                f"truncated on broker 1 at {clock(T0 + 5000)}: high-watermark truncation on becoming "
                                f"a follower")
    (loss,) = losses
    assert (loss.offset, loss.value) == (1, b"m3")
    assert loss.cause == ("t-0 offset 1 acknowledged and in the log, inside r's range [0, 3), but not in what it read "
                          "(it returned 'm2' there)")
    assert duplicates == []
    report = check(attempts, [final], [truncation], reads=[read([(0, b"m1"), (1, b"m2")])])
    assert report.verdict() == "lost"
    j = report.as_json()
    assert (j["lost"], j["divergent"]) == (2, 1)  # m2 lost from the log, m3 lost to the read; the read diverges
    assert len(j["losses"]) == j["lost"]


def test_a_row_beyond_what_the_log_keeps_that_was_never_acknowledged_diverges():
    attempts = [acked(b"m1", 0), Attempt("t", 0, b"x", sent_at=T0, failed_at=T0 + 3000, error="REQUEST_TIMED_OUT")]
    report = check(attempts, [state(log_of(b"m1"))], reads=[read([(0, b"m1"), (1, b"x")])])
    (divergence,) = report.read_divergences
    assert divergence.cause == "t-0 offset 1 read by r as 'x' (never acknowledged), but the log now ends at offset 1"
    assert report.losses == [] and report.verdict() == "divergent"


def test_a_row_the_log_holds_above_its_high_watermark_only_was_read_beyond_the_high_watermark():
    report = check([acked(b"m1", 0)], [state(log_of(b"m1", b"m2"), hw=1)], reads=[read([(0, b"m1"), (1, b"m2")])])
    assert [d.offset for d in report.read_divergences] == [1]


def test_a_row_read_twice_is_a_duplicate():
    attempts = [acked(b"m1", 0), acked(b"m2", 1)]
    report = check(attempts, [state(log_of(b"m1", b"m2"))], reads=[read([(0, b"m1"), (1, b"m2"), (1, b"m2")], 0, 2)])
    (duplicate,) = report.duplicates
    assert (duplicate.value, duplicate.offsets) == (b"m2", (1, 1))
    assert report.verdict() == "duplicated"


def test_an_acknowledged_record_the_range_covered_that_the_read_skipped_is_lost_to_the_read():
    attempts = [acked(b"m1", 0), acked(b"m2", 1), acked(b"m3", 2)]
    losses, _, divergences = check_read(read([(0, b"m1")], 0, 2), attempts, [state(log_of(b"m1", b"m2", b"m3"))])
    assert [(loss.offset, loss.value) for loss in losses] == [(1, b"m2")]  # m3 lies after the range
    assert losses[0].cause == ("t-0 offset 1 acknowledged and in the log, inside r's range [0, 2), but not in what it "
                               "read")
    assert divergences == []


def test_a_read_that_failed_or_a_partition_with_no_leader_has_nothing_to_judge():
    attempts = [acked(b"m1", 0), acked(b"m2", 1)]
    failed = read([], error="KAFKA_DATA_LOSS")
    assert check_read(failed, attempts, [state(log_of(b"m1", b"m2"))]) == ([], [], [])
    leaderless = check_read(read([(0, b"zz")]), attempts, [state({}, hw=0, leader=None)])
    assert leaderless == ([], [], [])


def test_reads_of_other_partitions_are_judged_apart():
    other = TopicPartition("t", 1)
    rows = [("t", 0, 0, b"m1"), ("t", 1, 0, b"n1")]
    two = Read("r", {TP: (0, 1), other: (0, 1)}, rows)
    states = [state(log_of(b"m1")), PartitionState("t", 1, 1, 1, {1: {0: b"n1"}})]
    assert check_read(two, [acked(b"m1", 0), Attempt("t", 1, b"n1", T0, T0 + 5, 0)], states) == ([], [], [])

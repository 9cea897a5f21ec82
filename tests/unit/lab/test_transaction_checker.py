"""The checker's transaction verdicts (DESIGN §18, Jepsen's Kafka workload terms), on hand-made histories: a
read_committed reader that returned records of a transaction that did not commit is an aborted read; one that
returned a committed transaction in part saw it torn; a read_uncommitted reader may see anything; the gravity
order puts both after lost and before divergent."""

from __future__ import annotations

from zkbroker.lab.checker import Attempt, PartitionState, Read, Transaction, check
from zkbroker.lab.runner import gravest
from zkbroker.topic_partition import TopicPartition

TP = TopicPartition("out", 0)
FIRST = Transaction("first", "out", 0, (b"f0", b"f1"), "committed")
ZOMBIE = Transaction("zombie", "out", 0, (b"z0", b"z1"), "failed: PRODUCER_FENCED")
ABORTED = Transaction("aborted", "out", 0, (b"a0",), "aborted")
LOG = {0: b"f0", 1: b"f1", 3: b"z0", 4: b"z1", 6: b"a0"}  # markers at 2, 5, 7


def run(*reads: Read):
    attempts = [Attempt("out", 0, b"f0", 1.0, acked_at=2.0, offset=0), Attempt("out", 0, b"f1", 1.0, acked_at=2.0,
                                                                               offset=1)]
    state = PartitionState("out", 0, 8, 1, {1: LOG})
    return check(attempts, [state], reads=reads, transactions=[FIRST, ZOMBIE, ABORTED])


def read(name: str, values: list[bytes], level: str = "read_committed", end: int = 8) -> Read:
    offsets = {v: o for o, v in LOG.items()}
    return Read(name, {TP: (0, end)}, [("out", 0, offsets[v], v) for v in values], isolation_level=level)


def test_a_reader_of_committed_transactions_only_is_ok():
    report = run(read("committed", [b"f0", b"f1"]))
    assert report.verdict() == "ok" and not report.aborted_reads and not report.torn


def test_a_zombies_or_an_aborted_transactions_record_read_committed_is_an_aborted_read():
    report = run(read("committed", [b"f0", b"f1", b"z1"]))
    assert report.verdict() == "aborted_read"
    assert [a.describe() for a in report.aborted_reads] == [
        "committed read 1 record(s) of transaction zombie, which did not commit"]
    assert run(read("committed", [b"f0", b"f1", b"a0"])).verdict() == "aborted_read"


def test_a_committed_transaction_seen_in_part_is_torn():
    # a reader whose end fell inside the transaction (a last stable offset that passed its first record): the
    # rest lies past what it read, so it lost nothing -- it saw the transaction torn
    report = run(read("committed", [b"f0"], end=1))
    assert report.verdict() == "torn"
    assert [t.describe() for t in report.torn] == ["committed read 1 of the 2 records of committed transaction first"]
    assert run(read("committed", [b"f1"])).verdict() == "lost"  # f0 inside its range, not read: lost to it


def test_read_uncommitted_readers_see_everything_without_a_verdict():
    assert run(read("everything", [b"f0", b"f1", b"z0", b"z1", b"a0"], "read_uncommitted")).verdict() == "ok"


def test_the_gravity_order_of_the_transaction_verdicts():
    assert gravest("torn", "aborted_read", "divergent") == "aborted_read"
    assert gravest("torn", "duplicated") == "torn"
    assert gravest("lost", "aborted_read") == "lost"

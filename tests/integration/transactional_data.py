"""A partition as transactions leave it, for the read_committed tests of our own readers: confluent-kafka's
transactional producer commits c0-c2, aborts a0-a2, a plain producer writes p0, the transaction commits d0-d2,
then one is left open (o0-o2) and a plain p1 follows it."""

from __future__ import annotations

TIMEOUT_S = 60
#: what read_committed readers see (p1 lies past the open transaction, beyond the last stable offset)
COMMITTED = [b"c0", b"c1", b"c2", b"p0", b"d0", b"d1", b"d2"]
#: what read_uncommitted readers see
EVERYTHING = [b"c0", b"c1", b"c2", b"a0", b"a1", b"a2", b"p0", b"d0", b"d1", b"d2", b"o0", b"o1", b"o2", b"p1"]
#: the first offset of the open transaction: the last stable offset (3 records and a marker a transaction)
OPEN_AT = 4 + 4 + 1 + 4


def write_transactions(bootstrap: str, topic: str):
    """Write the partition (partition 0 of `topic`); returns the producer whose transaction is still open (abort it
    at the end). The open transaction outlives the reads: the coordinator aborts one older than its timeout."""
    from confluent_kafka import Producer

    plain = Producer({"bootstrap.servers": bootstrap})
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}",
                    "message.timeout.ms": 60000, "transaction.timeout.ms": 600000})
    txn.init_transactions(TIMEOUT_S)

    def transaction(prefix: str, end) -> None:
        txn.begin_transaction()
        for i in range(3):
            txn.produce(topic, value=f"{prefix}{i}".encode(), partition=0)
        assert txn.flush(TIMEOUT_S) == 0
        if end is not None:
            end(TIMEOUT_S)

    transaction("c", txn.commit_transaction)
    transaction("a", txn.abort_transaction)
    plain.produce(topic, value=b"p0", partition=0)
    assert plain.flush(TIMEOUT_S) == 0
    transaction("d", txn.commit_transaction)
    transaction("o", None)  # left open: beyond the last stable offset
    plain.produce(topic, value=b"p1", partition=0)
    assert plain.flush(TIMEOUT_S) == 0
    return txn

"""TxnOffsetCommit in the group state machine (KIP-98, KIP-447): offsets written in a transaction stay pending
-- invisible to OffsetFetch, UNSTABLE_OFFSET_COMMIT to require_stable -- until the transaction's marker commits
them or aborts them; a reloaded offsets partition rebuilds them from the log's batches and markers."""

from __future__ import annotations

from tests.unit.coordinator.test_group_state_machine import Harness
from zkbroker.coordinator.group_coordinator import Append, GroupCoordinator, resolve_transactional_records
from zkbroker.coordinator.record_formats import OffsetKey, OffsetValue, encode_offset_key, encode_offset_value
from zkbroker.protocol.errors import ErrorCode
from zkbroker.topic_partition import TopicPartition

TP = TopicPartition("in", 0)


def txn_commit(h: Harness, producer_id: int, offset: int, group: str = "g") -> dict:
    token = next(h.tokens)
    h.gc.commit_txn_offsets(h.now, token, group, producer_id, 0, {TP: (offset, "")})
    appends = [e for e in h.gc._outbox if isinstance(e, Append)]
    assert [(a.producer_id, a.producer_epoch) for a in appends] == [(producer_id, 0)]
    h.drain()
    return h.replies[token]


def test_transactional_offsets_are_pending_until_the_commit_marker():
    h = Harness()
    assert txn_commit(h, 7, 40)["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
    assert h.gc.fetch_offsets("g", [TP]) == (ErrorCode.NONE, {TP: None})
    assert h.gc.unstable_offsets("g", [TP]) == {TP}
    h.gc.complete_txn(h.gc.partition_for("g"), 7, commit=True)
    assert h.gc.fetch_offsets("g", [TP])[1][TP].offset == 40
    assert h.gc.unstable_offsets("g", [TP]) == set()


def test_an_aborted_transaction_leaves_the_committed_offset():
    h = Harness()
    txn_commit(h, 7, 40)
    h.gc.complete_txn(h.gc.partition_for("g"), 7, commit=True)
    txn_commit(h, 7, 55)
    h.gc.complete_txn(h.gc.partition_for("g"), 7, commit=False)
    assert h.gc.fetch_offsets("g", [TP])[1][TP].offset == 40
    assert h.gc.unstable_offsets("g", [TP]) == set()


def test_a_marker_of_another_offsets_partition_completes_nothing():
    h = Harness()
    txn_commit(h, 7, 40)
    other = (h.gc.partition_for("g") + 1) % h.gc.config.offsets_topic_partitions
    h.gc.complete_txn(other, 7, commit=True)
    assert h.gc.unstable_offsets("g", [TP]) == {TP}


def record(offset: int) -> tuple[bytes, bytes]:
    return (encode_offset_key(OffsetKey("g", "in", 0)), encode_offset_value(OffsetValue(offset, "", 1, -1, -1)))


def test_loading_applies_committed_transactions_at_their_marker_and_keeps_open_ones_pending():
    k1, v1 = record(10)
    k2, v2 = record(20)
    k3, v3 = record(30)
    k4, v4 = record(40)
    items = [(k1, v1, -1, None), (k2, v2, 5, None), (k3, v3, 6, None), (None, None, 6, False),
             (None, None, 5, True), (k4, v4, 8, None)]
    records, pending = resolve_transactional_records(items)
    assert records == [(k1, v1), (k2, v2)]  # producer 5's commit joins at its marker; 6's abort vanishes
    assert pending == {8: [(k4, v4)]}
    gc = GroupCoordinator(Harness().gc.config)
    partition = gc.partition_for("g")
    gc.begin_loading(partition)
    gc.finish_loading(partition, records, 0, pending)
    assert gc.fetch_offsets("g", [TP])[1][TP].offset == 20
    assert gc.unstable_offsets("g", [TP]) == {TP}
    gc.complete_txn(partition, 8, commit=True)
    assert gc.fetch_offsets("g", [TP])[1][TP].offset == 40


def test_a_marker_written_while_the_partition_loads_completes_at_the_end_of_the_load():
    k, v = record(30)
    gc = GroupCoordinator(Harness().gc.config)
    partition = gc.partition_for("g")
    gc.begin_loading(partition)
    gc.complete_txn(partition, 9, commit=True)  # the load read the log before this marker
    gc.finish_loading(partition, [], 0, {9: [(k, v)]})
    assert gc.fetch_offsets("g", [TP])[1][TP].offset == 30
    assert gc.unstable_offsets("g", [TP]) == set()


def test_txn_offset_commit_v3_fences_a_member_of_an_older_generation_or_gone():
    """KIP-447: the consumer's generation and member id come with TxnOffsetCommit v3."""
    h = Harness()
    joined = h.join()
    member, generation = h.replies[joined]["member_id"], h.replies[joined]["generation_id"]
    h.sync(member, generation, {member: b""})

    def commit(gen: int, who: str) -> int:
        token = next(h.tokens)
        h.gc.commit_txn_offsets(h.now, token, "g", 7, 0, {TP: (5, "")}, None, gen, who)
        h.drain()
        return h.replies[token]["topics"][0]["partitions"][0]["error_code"]

    assert commit(generation - 1, member) == ErrorCode.ILLEGAL_GENERATION
    assert commit(generation, "someone-else") == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(generation, member) == ErrorCode.NONE
    assert commit(-1, "") == ErrorCode.NONE  # outside any member (v0-v2, or a producer of its own)

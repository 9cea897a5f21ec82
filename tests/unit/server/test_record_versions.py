"""What the record-batch versions add to the client APIs' handlers: Produce v3+'s one batch and v7's zstd,
Fetch's down-conversion and zstd refusal by version (a range without batches untouched: sendfile), KIP-320's
fencing, ListOffsets by time within the HW, OffsetsForLeaderEpoch in both truncation modes. A Partition over a
real Log in a tmp dir."""

from __future__ import annotations

from zkbroker.log.leader_epoch import LeaderEpochCache
from zkbroker.log.log import Log
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.fetch_response import FileRange
from zkbroker.protocol.message_set import build_message_set, entry_starts, iter_messages
from zkbroker.protocol.record_batch import build_record_batch
from zkbroker.server import record_versions
from zkbroker.server.partition import Partition

T = 1_500_000_000_000


def leader(tmp_path, epoch_cache=False) -> Partition:
    p = Partition("t", 0, 1, Log(str(tmp_path / "t-0")))
    if epoch_cache:
        p.epoch_cache = LeaderEpochCache(p.log.dir)
    p.make_leader(leader_epoch=3, isr=(1,), replicas=(1,), zk_version=0, controller_epoch=1)
    return p


def test_produce_v3_carries_exactly_one_batch_and_zstd_needs_v7():
    batch = build_record_batch([(None, b"v", T)])
    zstd = build_record_batch([(None, b"v", T)], codec=4)
    assert record_versions.produce_error(3, batch) is None
    assert record_versions.produce_error(3, batch + batch)[0] == ErrorCode.CORRUPT_MESSAGE
    assert record_versions.produce_error(3, build_message_set([(None, b"v")], magic=1))[0] == ErrorCode.CORRUPT_MESSAGE
    assert record_versions.produce_error(2, build_message_set([(None, b"v")], magic=1)) is None
    assert record_versions.produce_error(6, zstd)[0] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert record_versions.produce_error(7, zstd) is None


def test_produce_takes_transactional_batches_only_with_a_transactional_id():
    batch = build_record_batch([(None, b"v", T)], producer_id=1, producer_epoch=0, base_sequence=0,
                               transactional=True)
    assert record_versions.produce_error(3, batch)[0] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert record_versions.produce_error(3, batch, "tx") is None


def test_fetch_versions_get_what_they_can_carry(tmp_path):
    p = leader(tmp_path)
    p.append_messages_to_leader(bytearray(build_message_set([(None, b"m1", T)], magic=1)), 1)
    old_only = p.read(0, 1 << 20, from_follower=False)
    for version in (0, 3, 4, 10):  # no batches in the segment: the range itself, for sendfile
        assert record_versions.records_for_fetch(p.log, old_only, version, 0, 1 << 20) == (ErrorCode.NONE, old_only)
    p.append_messages_to_leader(bytearray(build_record_batch([(None, b"b", T, [("h", b"")])])), 1)
    p.append_messages_to_leader(bytearray(build_record_batch([(None, b"z", T)], codec=4)), 1)
    whole = p.read(0, 1 << 20, from_follower=False)
    assert record_versions.records_for_fetch(p.log, whole, 10, 0, 1 << 20) == (ErrorCode.NONE, whole)
    for version in (0, 3, 9):
        assert record_versions.records_for_fetch(p.log, whole, version, 0, 1 << 20)[0] == 76
    zstd_at = entry_starts(p.log.read(0, 1 << 20).read_bytes())[-1]  # the zstd batch is the last entry
    without_zstd = FileRange(whole.file, whole.position, zstd_at)
    error, converted = record_versions.records_for_fetch(p.log, without_zstd, 2, 0, 1 << 20)
    assert error == ErrorCode.NONE and [(m.value, m.magic) for m in iter_messages(converted)] == [
        (b"m1", 1), (b"b", 1)]
    assert record_versions.records_for_fetch(p.log, without_zstd, 4, 0, 1 << 20) == (ErrorCode.NONE, without_zstd)


def test_a_current_leader_epoch_fences_or_is_unknown(tmp_path):
    p = leader(tmp_path)
    assert [record_versions.leader_epoch_error(p, e) for e in (-1, 3, 2, 4)] == [
        ErrorCode.NONE, ErrorCode.NONE, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH]


def test_offsets_by_time_stay_below_the_high_watermark_for_consumers(tmp_path):
    p = leader(tmp_path)
    assert record_versions.offset_by_time(p, -1, False) == (-1, 0, -1)  # an empty log: no epoch to tell
    p.append_messages_to_leader(bytearray(build_record_batch([(None, b"a", T), (None, b"b", T + 10)])), 1)
    assert record_versions.offset_by_time(p, T + 5, False) == (T + 10, 1, 3)  # the epoch of the batch (v4)
    assert record_versions.offset_by_time(p, -1, False) == (-1, 2, 3)
    assert record_versions.offset_by_time(p, -2, False) == (-1, 0, 3)
    p.high_watermark = 1
    assert record_versions.offset_by_time(p, T + 5, False) == (-1, -1, -1)
    assert record_versions.offset_by_time(p, T + 5, True) == (T + 10, 1, 3)
    p.append_messages_to_leader(bytearray(build_message_set([(None, b"m", T + 20)], magic=1)), 1)
    assert record_versions.offset_by_time(p, T + 15, True) == (T + 20, 2, -1)  # magic 1 carries no epoch


def test_offsets_for_leader_epoch_in_both_truncation_modes(tmp_path):
    cached = leader(tmp_path / "a", epoch_cache=True)
    cached.append_messages_to_leader(bytearray(build_record_batch([(None, b"a", T)])), 1)
    cached.make_leader(leader_epoch=5, isr=(1,), replicas=(1,), zk_version=1, controller_epoch=1)
    cached.append_messages_to_leader(bytearray(build_record_batch([(None, b"b", T)])), 1)
    assert record_versions.epoch_end(cached, 3) == (3, 1)  # epoch 3 ended where 5 began
    assert record_versions.epoch_end(cached, 4) == (3, 1)  # 4 was never used: 3 is the largest below
    assert record_versions.epoch_end(cached, 5) == (5, 2)
    assert record_versions.epoch_end(cached, 1) == (-1, -1)
    plain = leader(tmp_path / "b")  # 0.8.2's high-watermark mode keeps no epochs: the log end
    plain.append_messages_to_leader(bytearray(build_record_batch([(None, b"a", T)])), 1)
    assert record_versions.epoch_end(plain, 2) == (2, 1)


def test_a_fetch_too_small_for_the_first_batch_gets_its_partial_bytes_as_0_8_2_did(tmp_path):
    p = leader(tmp_path)
    p.append_messages_to_leader(bytearray(build_record_batch([(None, b"x" * 500, T)])), 1)
    cut = p.read(0, 100, from_follower=False)  # a fetch size below the batch
    assert cut.size == 100
    assert record_versions.records_for_fetch(p.log, cut, 0, 0, 100) == (ErrorCode.NONE, cut)


def test_a_produce_request_is_authorized_by_its_transactional_and_idempotent_batches():
    plain = build_record_batch([(None, b"v", T)])
    idempotent = build_record_batch([(None, b"v", T)], producer_id=4, producer_epoch=0, base_sequence=0)
    transactional = build_record_batch([(None, b"v", T)], producer_id=4, producer_epoch=0, base_sequence=1,
                                       transactional=True)
    assert record_versions.producer_kinds(None) == (False, False)
    assert record_versions.producer_kinds(build_message_set([(b"k", b"v")])) == (False, False)
    assert record_versions.producer_kinds(plain) == (False, False)
    assert record_versions.producer_kinds(idempotent) == (False, True)
    assert record_versions.producer_kinds(plain + transactional) == (True, True)

"""read_committed on a partition leader (Kafka 0.11): reads capped at the last stable offset, the aborted
transactions answered for the range read, ListOffsets by isolation level, and a follower's own LSO. A
Partition over a real Log in a tmp dir."""

from __future__ import annotations

import os

import pytest

from zkbroker.log.log import EARLIEST_TIME, LATEST_TIME, Log
from zkbroker.protocol.message_set import iter_messages
from zkbroker.protocol.record_batch import (
    ControlRecordType,
    EndTxnMarker,
    build_end_txn_marker_batch,
    build_record_batch,
)
from zkbroker.server import record_versions
from zkbroker.server.partition import Partition

T = 1_700_000_000_000


def data(pid, seq, count=2, transactional=True):
    return bytearray(build_record_batch([(None, b"v%d" % i, T) for i in range(count)], producer_id=pid,
                                        producer_epoch=0, base_sequence=seq, transactional=transactional))


def marker(pid, kind):
    return bytearray(build_end_txn_marker_batch(EndTxnMarker(kind, 0), producer_id=pid, producer_epoch=0,
                                                timestamp=T))


def leader(tmp_path) -> Partition:
    p = Partition("t", 0, 1, Log(str(tmp_path / "t-0")))
    p.make_leader(leader_epoch=0, isr=(1,), replicas=(1,), zk_version=0, controller_epoch=1)
    return p


def offsets(p, offset, read_committed):
    records = p.read(offset, 1 << 20, from_follower=False, read_committed=read_committed)
    return [m.offset for m in iter_messages(os.pread(records.file.fileno(), records.size, records.position))]


def test_read_committed_stops_at_the_lso_and_lists_the_aborted_transactions(tmp_path):
    p = leader(tmp_path)
    p.append_messages_to_leader(data(-1, -1, transactional=False), 1)  # 0-1
    p.append_messages_to_leader(data(7, 0), 1)  # 2-3, open
    p.append_messages_to_leader(data(8, 0), 1)  # 4-5, open
    assert (p.high_watermark, p.last_stable_offset) == (6, 2)
    assert offsets(p, 0, read_committed=False) == [0, 1, 2, 3, 4, 5]
    assert offsets(p, 0, read_committed=True) == [0, 1]
    assert p.offset_for_timestamp(LATEST_TIME, False, read_committed=True) == 2
    assert record_versions.offset_by_time(p, T, False, read_committed=True)[1] == 0
    assert record_versions.offset_by_time(p, T, False, read_committed=False)[1] == 0
    p.log.append(marker(7, ControlRecordType.ABORT), coordinator=True)  # 6
    p.maybe_increment_high_watermark()
    assert p.last_stable_offset == 4  # producer 8's transaction still open
    records = p.read(0, 1 << 20, from_follower=False, read_committed=True)
    assert p.aborted_transactions(0, records) == [(7, 2)]
    p.log.append(marker(8, ControlRecordType.COMMIT), coordinator=True)  # 7
    p.maybe_increment_high_watermark()
    assert p.last_stable_offset == 8
    assert offsets(p, 0, read_committed=True) == [0, 1, 2, 3, 4, 5]  # the markers at 6 and 7 are no records
    assert p.offset_for_timestamp(LATEST_TIME, False, read_committed=True) == 8
    assert p.offset_for_timestamp(EARLIEST_TIME, False, read_committed=True) == 0
    assert p.aborted_transactions(7, p.read(7, 1 << 20, False, True)) == []  # the abort's marker lies before 7


def test_a_followers_lso_comes_from_its_own_producer_state_and_the_leaders_hw(tmp_path):
    source = leader(tmp_path / "leader")
    source.append_messages_to_leader(data(7, 0), 1)
    source.log.append(marker(7, ControlRecordType.COMMIT), coordinator=True)
    follower = Partition("t", 0, 2, Log(str(tmp_path / "follower" / "t-0")))
    follower.make_follower(1, 0, (1, 2), (1, 2), 0, 1)
    fetched = source.read(0, 1 << 20, from_follower=True)
    follower.append_as_follower(os.pread(fetched.file.fileno(), fetched.size, fetched.position))
    follower.high_watermark = 2  # the leader's HW has not passed the marker yet
    assert follower.last_stable_offset == 0
    follower.high_watermark = 3
    assert follower.last_stable_offset == 3


def test_the_leaders_side_of_write_txn_markers(tmp_path):
    from zkbroker.log.producer_state import ProducerStateError
    from zkbroker.protocol.errors import ErrorCode

    p = leader(tmp_path)
    p.append_messages_to_leader(data(7, 0), 1)  # 0-1, open
    info = p.append_txn_marker(7, 0, commit=False, coordinator_epoch=2, now_ms=T + 5)  # 2
    assert (info.first_offset, info.last_offset, p.high_watermark, p.last_stable_offset) == (2, 2, 3, 3)
    records = p.read(0, 1 << 20, from_follower=False, read_committed=True)
    assert p.aborted_transactions(0, records) == [(7, 0)]
    [batch] = info.batches
    assert (batch.control, batch.partition_leader_epoch, batch.end_txn_marker.coordinator_epoch) == (True, 0, 2)
    with pytest.raises(ProducerStateError) as raised:
        p.append_txn_marker(7, 0, commit=True, coordinator_epoch=1, now_ms=T + 6)
    assert raised.value.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert p.log_end_offset == 3

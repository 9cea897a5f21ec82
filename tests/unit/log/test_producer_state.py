"""The idempotent producer's state (KIP-98): Kafka's sequence rules, duplicates answered with their original
offsets and not written again, snapshots at roll in Kafka's format, and the state rebuilt from snapshots and the
log after a restart, a crash and a truncation."""

import os
import struct
import time

import pytest

from zkbroker.log.log import Log
from zkbroker.log.producer_state import ProducerStateError, ProducerStateManager, snapshot_filename
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.message_set import BatchInfo, iter_messages
from zkbroker.protocol.record_batch import build_record_batch, crc32c, last_sequence

PID = 4000


def batch(seq, count=2, epoch=0, pid=PID, value=b"v"):
    now = time.time_ns() // 1_000_000  # retention goes by the largest timestamp
    return bytearray(build_record_batch([(None, value, now)] * count, producer_id=pid, producer_epoch=epoch,
                                        base_sequence=seq))


def info(seq, count=1, epoch=0, pid=PID, base_offset=0):
    return BatchInfo(base_offset, base_offset + count - 1, 0, pid, epoch, seq, last_sequence(seq, count - 1), 1,
                     False)


def offsets(log):
    return [m.offset for s in log.segments for m in iter_messages(s.read(s.base_offset, None, 1 << 30).read_bytes())]


# -- the rules, on the manager alone ---------------------------------------------------------------------


@pytest.mark.parametrize(("known", "incoming", "code"), [
    ([], info(5), ErrorCode.UNKNOWN_PRODUCER_ID),  # an unknown producer must start at 0
    ([info(0, 3)], info(4), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),  # a gap
    ([info(0, 3), info(3, 2)], info(2), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),  # not the last batch again
    ([info(0, 3, epoch=2)], info(3, epoch=1), ErrorCode.INVALID_PRODUCER_EPOCH),  # fenced
    ([info(0, 3, epoch=1)], info(3, epoch=2), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),  # new epoch, not at 0
])
def test_sequence_rules(known, incoming, code, tmp_path):
    state = ProducerStateManager(str(tmp_path))
    state.update(known)
    with pytest.raises(ProducerStateError) as raised:
        state.check([incoming])
    assert raised.value.error_code == code


def test_in_sequence_batches_pass_and_sequences_wrap(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    assert state.check([info(0, 3), info(3, 2)]) is None  # two batches of one set, in order
    state.update([info(2**31 - 2, 2, base_offset=10)])
    assert state.check([info(0)]) is None  # Integer.MAX_VALUE wraps to 0
    assert state.check([info(0, epoch=1)]) is None  # a new epoch starts at 0
    assert state.check([BatchInfo(0, 0, 0, -1, -1, -1, -1, 1, False)]) is None  # no producer id: no rule


def test_one_of_the_last_five_batches_again_is_a_duplicate(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    state.update([info(i, base_offset=i) for i in range(6)])
    assert state.check([info(1)]).first_offset == 1
    with pytest.raises(ProducerStateError):  # the first batch is no longer among the last five
        state.check([info(0)])


def test_a_plain_batch_while_the_producers_transaction_is_open_is_refused(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    assert state.check([info(0)._replace(transactional=True)]) is None
    state.update([info(0)._replace(transactional=True)])
    with pytest.raises(ProducerStateError) as raised:
        state.check([info(1, base_offset=1)])
    assert raised.value.error_code == ErrorCode.INVALID_TXN_STATE


# -- through the log --------------------------------------------------------------------------------------


def test_a_retried_batch_gets_its_original_offsets_and_is_not_written_twice(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    first = log.append(batch(0))
    log.append(batch(2))
    again = log.append(batch(0))
    assert (again.first_offset, again.last_offset, again.count) == (first.first_offset, first.last_offset, 0)
    assert offsets(log) == [0, 1, 2, 3]
    with pytest.raises(ProducerStateError) as raised:
        log.append(batch(7))
    assert raised.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.log_end_offset == 4


def test_snapshots_at_roll_in_kafkas_format_and_only_for_logs_with_producers(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    log.append(bytearray(build_record_batch([(None, b"plain", 1)])))
    log.roll()
    assert not [n for n in os.listdir(log.dir) if n.endswith(".snapshot")]
    log.append(batch(0, count=3))
    log.roll()
    with open(snapshot_filename(log.dir, 4), "rb") as f:
        data = f.read()
    version, crc = struct.unpack_from(">hI", data)
    assert (version, crc) == (1, crc32c(data[6:]))
    assert struct.unpack_from(">iqhiqiqiq", data, 6)[:6] == (1, PID, 0, 2, 3, 2)  # then timestamp, -1, -1


def test_the_state_survives_a_clean_restart_a_crash_and_a_truncation(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    log.append(batch(0))
    log.roll()  # snapshot at 2
    log.append(batch(2))
    log.append(batch(4))
    log.flush()
    # a crash: the snapshot at 2, then the log replayed
    crashed = Log(log.dir, recovery_point=0)
    assert crashed.append(batch(4)).first_offset == 4  # a duplicate, found again
    crashed.append(batch(6))
    crashed.close()
    reopened = Log(log.dir)  # a clean restart: the snapshot at the log end
    assert reopened.append(batch(6)).count == 0
    reopened.truncate_to(4)  # the follower's cut: the state goes back to sequence 3
    assert reopened.append(batch(4)).count == 2
    assert offsets(reopened) == [0, 1, 2, 3, 4, 5]


def test_retention_forgets_the_producers_of_deleted_segments(tmp_path):
    log = Log(str(tmp_path / "t-0"), {"retention.bytes": 1})
    log.append(batch(0, pid=1))
    log.roll()
    log.append(batch(0, pid=2))
    log.roll()
    log.delete_old_segments()
    assert log.log_start_offset == 2 and set(log.producer_state.producers) == {2}
    assert all(offset >= log.log_start_offset for offset in log.producer_state.snapshot_offsets())


def test_idle_producers_expire_after_transactional_id_expiration_ms(tmp_path):
    from zkbroker.log.manager import LogManager

    manager = LogManager([str(tmp_path / "logs")], clock=lambda: 10_000_000_000_000)
    log = manager.get_or_create_log("t", 0)
    log.append(batch(0, pid=1))
    log.producer_state.update([info(0, pid=2)._replace(max_timestamp=10_000_000_000_000 - 10)])
    # producer 1's batch is stamped with today's time, long before this clock's "now"; producer 2's 10 ms before it
    assert manager.remove_expired_producers(1000) == 1
    assert set(log.producer_state.producers) == {2}
    manager.shutdown()

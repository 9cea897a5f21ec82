"""The log start offset DeleteRecords moves (KIP-107): reads below it are out of range, whole segments below it
go, it never moves back or past the log end, truncation below it starts the log afresh, and the LogManager
keeps it across a restart in log-start-offset-checkpoint."""

import os

import pytest

from zkbroker.log.checkpoint import OffsetCheckpoint
from zkbroker.log.log import EARLIEST_TIME
from zkbroker.log.manager import LogManager
from zkbroker.protocol.errors import OffsetOutOfRangeError

MESSAGE = 36


def test_moving_the_start_into_a_segment_hides_the_records_below_it(make_log, records):
    log = make_log(segment_bytes=10 * MESSAGE)
    for start in range(0, 30, 5):
        log.append(records(start, 5))
    assert log.number_of_segments == 3
    assert log.maybe_increment_log_start_offset(15)
    assert log.log_start_offset == 15
    assert [s.base_offset for s in log.segments] == [10, 20]  # the segment wholly below 15 is gone
    with pytest.raises(OffsetOutOfRangeError):
        log.read(12, 1000)
    assert log.read(15, 1000).read_bytes()
    assert log.offsets_before(EARLIEST_TIME) == [15]


def test_the_start_never_moves_back_nor_past_the_log_end(make_log, records):
    log = make_log()
    log.append(records(0, 10))
    assert log.maybe_increment_log_start_offset(4)
    assert not log.maybe_increment_log_start_offset(3)
    assert log.log_start_offset == 4
    assert log.maybe_increment_log_start_offset(99)
    assert log.log_start_offset == 10 == log.log_end_offset
    assert not log.read(10, 1000).read_bytes()  # the end is still readable (nothing there yet)


def test_truncating_below_the_start_starts_the_log_afresh(make_log, records):
    log = make_log()
    log.append(records(0, 10))
    log.maybe_increment_log_start_offset(8)
    log.truncate_to(5)
    assert (log.log_start_offset, log.log_end_offset) == (5, 5)


def test_the_log_manager_keeps_a_moved_start_across_a_restart(tmp_path, clock, records):
    dirs = [str(tmp_path / "a")]
    manager = LogManager(dirs, clock=clock)
    manager.get_or_create_log("t", 0).append(records(0, 10))
    manager.get_or_create_log("t", 1).append(records(0, 10))
    manager.get_log("t", 0).maybe_increment_log_start_offset(6)
    manager.checkpoint_log_start_offsets()
    assert OffsetCheckpoint(os.path.join(dirs[0], "log-start-offset-checkpoint")).read() == {("t", 0): 6}
    manager.shutdown()
    restarted = LogManager(dirs, clock=clock)
    try:
        assert restarted.get_log("t", 0).log_start_offset == 6
        assert restarted.get_log("t", 1).log_start_offset == 0
    finally:
        restarted.shutdown()

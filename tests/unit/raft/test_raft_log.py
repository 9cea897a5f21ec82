"""The in-memory model of the replicated log: what the Raft node relies on from any RaftLog."""

from __future__ import annotations

import pytest

from tests.unit.raft.helpers import log_of
from zkbroker.raft.log import InMemoryLog, entry_size
from zkbroker.raft.messages import LogEntry, OffsetAndEpoch


def test_end_offset_for_epoch_names_the_largest_epoch_not_above_and_where_it_ends():
    log = log_of(1, 1, 3, 3, 5)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(4, 3)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(5, 5)
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(5, 5)
    assert InMemoryLog().end_offset_for_epoch(4) == OffsetAndEpoch(0, 0)


def test_an_empty_log_ends_at_zero_in_epoch_zero():
    log = InMemoryLog()
    assert (log.end_offset, log.last_fetched_epoch, log.start_offset) == (0, 0, 0)


def test_append_refuses_a_gap_and_a_lower_epoch():
    log = log_of(1, 2)
    with pytest.raises(ValueError, match="does not continue"):
        log.append([LogEntry(3, 2, b"x")])
    with pytest.raises(ValueError, match="epoch 1 below 2"):
        log.append([LogEntry(2, 1, b"x")])
    assert log.end_offset == 2


def test_truncation_forgets_the_epochs_it_removes():
    log = log_of(1, 1, 3, 3, 5)
    log.truncate_to(3)
    assert (log.end_offset, log.last_fetched_epoch) == (3, 3)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(3, 3)
    log.truncate_to(2)
    assert log.last_fetched_epoch == 1 and log.end_offset_for_epoch(3) == OffsetAndEpoch(2, 1)
    log.append([LogEntry(2, 4, b"y")])
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(2, 1) and log.end_offset_for_epoch(4) == OffsetAndEpoch(3, 4)


def test_read_returns_at_least_one_entry_then_what_fits():
    log = InMemoryLog([LogEntry(i, 1, b"x" * 100) for i in range(5)])
    assert len(log.read(0, 1)) == 1
    assert len(log.read(1, 2 * entry_size(log.entries[0]))) == 2
    assert len(log.read(0, 1 << 20)) == 5 and log.read(5, 1 << 20) == ()

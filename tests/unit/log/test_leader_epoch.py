"""LeaderEpochCache: KIP-101's (epoch, start offset) history and its OffsetsForLeaderEpoch answers."""

from __future__ import annotations

import pytest

from zkbroker.log.checkpoint import CheckpointError
from zkbroker.log.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILE, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache


def test_end_offset_is_the_start_of_the_next_epoch_or_the_log_end(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))
    cache.assign(0, 0)
    cache.assign(1, 5)
    cache.assign(3, 12)
    assert cache.end_offset_for(0, log_end_offset=20) == 5
    assert cache.end_offset_for(1, 20) == 12
    assert cache.end_offset_for(2, 20) == 12  # an epoch this log never saw ends where the next known one starts
    assert cache.end_offset_for(3, 20) == 20
    assert cache.end_offset_for(7, 20) == 20


def test_an_epoch_older_than_the_history_is_undefined(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))
    assert cache.end_offset_for(0, 10) == UNDEFINED_EPOCH_OFFSET
    cache.assign(2, 4)
    assert cache.end_offset_for(1, 10) == UNDEFINED_EPOCH_OFFSET


def test_assign_ignores_older_or_equal_epochs_and_survives_a_restart(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))
    cache.assign(1, 0)
    cache.assign(1, 7)
    cache.assign(0, 9)
    cache.assign(2, 7)
    assert cache.entries == [(1, 0), (2, 7)]
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).read_text() == "0\n2\n1 0\n2 7\n"
    assert LeaderEpochCache(str(tmp_path)).entries == [(1, 0), (2, 7)]


def test_truncation_forgets_epochs_that_start_at_or_after_the_new_end(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))
    for epoch, offset in ((0, 0), (1, 5), (2, 9)):
        cache.assign(epoch, offset)
    cache.truncate_from_end(9)
    assert cache.entries == [(0, 0), (1, 5)]
    cache.clear()
    assert cache.entries == [] and cache.latest_epoch == -1


def test_a_malformed_checkpoint_names_the_file(tmp_path):
    (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).write_text("0\n3\n1 0\n")
    with pytest.raises(CheckpointError, match=LEADER_EPOCH_CHECKPOINT_FILE):
        LeaderEpochCache(str(tmp_path))


def test_a_deferred_write_is_whole_at_once_and_synced_later_by_its_owner(tmp_path, monkeypatch):
    import os

    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    cache = LeaderEpochCache(str(tmp_path), defer_sync=True)
    cache.assign(3, 0)
    cache.truncate_from_end(0)
    cache.assign(4, 0)
    assert synced == [] and cache.unsynced
    assert LeaderEpochCache(str(tmp_path)).entries == [(4, 0)]  # renamed into place, readable at once
    cache.sync()
    assert len(synced) == 1 and not cache.unsynced
    cache.sync()  # nothing left to sync
    cache.defer_sync = False
    cache.assign(5, 2)
    assert len(synced) == 2 and not cache.unsynced

"""The log cleaner on real segments holding record batches and transactions: committed records compact, aborted
ones go, their ABORT marker and its `.txnindex` entry move to the cleaned segment, producers keep their state
through a recovery, and the cleaner stops before the segment of a transaction still open."""

import os

from zkbroker.log.cleaner import CleanerConfig
from zkbroker.log.cleaner_manager import CLEANER_CHECKPOINT_FILE
from zkbroker.log.log import Log
from zkbroker.log.log_cleaner import LogCleaner
from zkbroker.log.log_config import LogConfig
from zkbroker.protocol.message_set import iter_entries, iter_messages
from zkbroker.protocol.record_batch import (
    ControlRecordType,
    EndTxnMarker,
    build_end_txn_marker_batch,
    build_record_batch,
)
from zkbroker.topic_partition import TopicPartition

T0 = 1_700_000_000_000
COMPACT = {"cleanup_policy": "compact", "segment_bytes": 400, "min_cleanable_dirty_ratio": 0.0}
CLEANER = CleanerConfig(enable_cleaner=True, dedupe_buffer_size=1024 * 1024, io_buffer_size=4096)


class Producer:
    """A transactional producer's batches, sequences counted."""

    def __init__(self, pid):
        self.pid, self.seq = pid, 0

    def send(self, log, *items, txn=True):
        info = log.append(bytearray(build_record_batch([(k, v, T0) for k, v in items], producer_id=self.pid,
                                                       producer_epoch=0, base_sequence=self.seq, transactional=txn)))
        self.seq += len(items)
        return info

    def end(self, log, kind):
        batch = build_end_txn_marker_batch(EndTxnMarker(kind, 0), producer_id=self.pid, producer_epoch=0,
                                           timestamp=T0)
        return log.append(bytearray(batch), coordinator=True)


def read_all(log):
    """The log's bytes, segment after segment, through Log.read."""
    data, offset = b"", log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 20).read_bytes()
        entries = list(iter_entries(chunk))
        if not entries:
            break
        data += chunk
        offset = entries[-1].batch.last_offset + 1
    return data


def committed_view(log):
    """(offset, key, value) of what a read_committed consumer reads below the LSO (the log end here)."""
    aborted = log.collect_aborted_transactions(0, log.log_end_offset)
    data = read_all(log)
    skipped = set()
    for entry in iter_entries(data):
        header = entry.batch
        if header and not header.is_control and header.is_transactional and any(
            t.producer_id == header.producer_id and t.first_offset <= header.base_offset <= t.last_offset
            for t in aborted
        ):
            skipped.update(range(header.base_offset, header.last_offset + 1))
    return [(m.offset, m.key, m.value) for m in iter_messages(data) if m.offset not in skipped]


def latest(view):
    return {key: (offset, value) for offset, key, value in view}


def test_compaction_keeps_what_read_committed_readers_see_and_drops_aborted_data(tmp_path):
    log = Log(str(tmp_path / "logs" / "t-0"), LogConfig(**COMPACT), clock=lambda: T0)
    a, b = Producer(7), Producer(8)
    for round_ in range(3):
        a.send(log, (b"k1", b"c%d" % round_), (b"k2", b"c%d" % round_))
        a.end(log, ControlRecordType.COMMIT)
        b.send(log, (b"k1", b"aborted%d" % round_), (b"k3", b"aborted%d" % round_))
        b.end(log, ControlRecordType.ABORT)
        a.send(log, (b"k4", b"plain%d" % round_), txn=False)
    open_at = b.send(log, (b"k5", b"open")).first_offset  # a transaction still open
    log.roll()
    a.send(log, (b"k6", b"after"), txn=False)
    before_view = committed_view(log)
    before = latest(before_view)
    segments_from_open = [s.base_offset for s in log.segments if s.base_offset >= open_at]
    open_segment = max(s.base_offset for s in log.segments if s.base_offset <= open_at)
    assert len(log.segments) > 3 and open_segment > 0
    log.on_high_watermark(log.log_end_offset)  # every marker replicated
    indexed_below = [t for s in log.segments if s.base_offset < open_segment for t in s.txn_index.entries]
    assert len(indexed_below) >= 2

    cleaner = LogCleaner(CLEANER, [str(tmp_path / "logs")], lambda: {TopicPartition("t", 0): log}, clock=lambda: T0)
    assert cleaner.clean_or_sleep(cleaner.cleaners[0])
    cleaner.shutdown()

    after = committed_view(log)
    assert latest(after) == before
    assert all(not value.startswith(b"aborted") for _, _, value in after if value)
    everything = [(m.offset, m.value) for m in iter_messages(read_all(log))]
    cleaned_part = [value for offset, value in everything if offset < open_segment]
    assert not any(value.startswith(b"aborted") for value in cleaned_part)  # gone, not just hidden
    # the cleaned part holds the last committed value of each key below it
    assert sorted(cleaned_part) == sorted(v for o, v in latest(m for m in before_view if m[0] < open_segment).values())
    # the cleaner stopped at the open transaction's segment: that one and the later ones are as they were
    assert [s.base_offset for s in log.segments if s.base_offset >= open_at] == segments_from_open
    with open(os.path.join(tmp_path / "logs", CLEANER_CHECKPOINT_FILE)) as f:
        assert f.read().splitlines()[-1] == f"t 0 {open_segment}"
    # producer 8's last data batch is its open one: its aborted batches went whole, and their ABORT markers stay
    # (their batches were met in this cleaning) with their index entries, now the cleaned segments'
    assert [t for s in log.segments if s.base_offset < open_segment for t in s.txn_index.entries] == indexed_below
    assert all(t.producer_id == 8 for t in indexed_below)

    # a recovery without snapshots rebuilds the producer state from the cleaned log: the same LSO and view
    log.close()
    for name in os.listdir(log.dir):
        if name.endswith(".snapshot"):
            os.remove(os.path.join(log.dir, name))
    reopened = Log(str(tmp_path / "logs" / "t-0"), LogConfig(**COMPACT), clock=lambda: T0)
    assert reopened.last_stable_offset(reopened.log_end_offset) == open_at
    assert latest(committed_view(reopened)) == before
    reopened.close()

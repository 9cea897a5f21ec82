"""Opening a log after a crash: re-validation from the recovery point, cutting torn and corrupt data, rebuilding
indexes, cleaning up files of interrupted operations; and what the clean-shutdown marker skips."""

import logging
import os
import struct

import pytest

from zkbroker.log import segment as segment_module
from zkbroker.log.log import CLEAN_SHUTDOWN_FILE
from zkbroker.protocol.compression import CODEC_GZIP
from zkbroker.protocol.message_set import iter_entries, iter_messages

MESSAGE = 36
CONFIG = {"segment_bytes": 5 * MESSAGE, "index_interval_bytes": MESSAGE}


@pytest.fixture(params=[50, 8 * 1024 * 1024], ids=["tiny-chunks", "default-chunks"])
def recovery_chunk(request, monkeypatch):
    """Recovery reads the file in chunks; tiny ones make every message span a chunk boundary."""
    monkeypatch.setattr(segment_module, "_RECOVERY_CHUNK", request.param)
    return request.param


def write_log(make_log, records, messages=15):
    """A closed log of `messages` single-message sets, 5 to a segment (CONFIG), without a marker."""
    log = make_log(**CONFIG)
    for i in range(messages):
        log.append(records(i, 1))
    log.close()
    return log


def segment_file(log, base, suffix=".log"):
    return os.path.join(log.dir, f"{base:020d}{suffix}")


def mark_clean(log):
    open(os.path.join(os.path.dirname(log.dir), CLEAN_SHUTDOWN_FILE), "w").close()


def all_offsets(log):
    offsets, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        batch = [m.offset for m in iter_messages(log.read(offset, 10_000).read_bytes())]  # CRCs checked
        offsets += batch
        offset = batch[-1] + 1
    return offsets


def test_a_torn_tail_is_cut(make_log, records, recovery_chunk, caplog):
    log = write_log(make_log, records, messages=8)
    path = segment_file(log, 5)
    os.truncate(path, 3 * MESSAGE - 10)
    with caplog.at_level(logging.WARNING):
        reopened = make_log(**CONFIG)
    assert reopened.log_end_offset == 7
    assert os.path.getsize(path) == 2 * MESSAGE
    assert all_offsets(reopened) == list(range(7))
    assert "Corruption found in segment 5 of log t-0, truncating to offset 7: 26 bytes cut." in caplog.text
    assert "torn message of 24 bytes at the end of the file" in caplog.text
    assert reopened.append(records(7, 1)).first_offset == 7


def test_a_corrupt_message_cuts_the_log_there(make_log, records, recovery_chunk, caplog):
    log = write_log(make_log, records)
    with open(segment_file(log, 5), "r+b") as f:  # flip a byte in the value of offset 7
        f.seek(2 * MESSAGE + 30)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x01]))
    with caplog.at_level(logging.WARNING):
        reopened = make_log(**CONFIG)
    assert (reopened.log_end_offset, [s.base_offset for s in reopened.segments]) == (7, [0, 5])
    assert all_offsets(reopened) == list(range(7))
    assert sorted(os.listdir(reopened.dir)) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
        "00000000000000000005.index", "00000000000000000005.log", "00000000000000000005.timeindex",
    ]
    assert "message fails its CRC" in caplog.text
    assert (
        "Corruption found in segment 5 of log t-0, truncating to offset 7: 108 bytes cut, and deleting the 1 later "
        "segments (180 bytes) starting at offsets 10" in caplog.text
    )


def test_the_clean_shutdown_marker_skips_recovery(make_log, records):
    log = write_log(make_log, records)
    with open(segment_file(log, 5), "r+b") as f:
        f.seek(2 * MESSAGE + 30)
        f.write(b"X")
    mark_clean(log)
    reopened = make_log(**CONFIG)
    assert reopened.log_end_offset == 15  # not re-validated: 0.8.2 trusts a cleanly shut down log
    assert reopened.recovery_point == 15
    assert [e.valid for e in iter_entries(reopened.read(5, 10_000).read_bytes())] == [True, True, False, True, True]


def test_segments_below_the_recovery_point_are_not_revalidated(make_log, records):
    log = write_log(make_log, records)
    with open(segment_file(log, 5), "r+b") as f:
        f.seek(2 * MESSAGE + 30)
        f.write(b"X")
    trusting = make_log(recovery_point=10, **CONFIG)
    assert trusting.log_end_offset == 15
    trusting.close()
    assert make_log(recovery_point=9, **CONFIG).log_end_offset == 7  # the segment holding offset 9 is recovered


def test_an_offset_that_does_not_increase_cuts_the_log(make_log, records, recovery_chunk):
    log = write_log(make_log, records, messages=5)
    with open(segment_file(log, 0), "r+b") as f:  # offsets are not covered by the CRC
        f.seek(3 * MESSAGE)
        f.write(struct.pack(">q", 1))
    assert make_log(**CONFIG).log_end_offset == 3


def test_zeros_at_the_end_of_a_segment_are_cut(make_log, records, recovery_chunk, caplog):
    log = write_log(make_log, records, messages=3)
    os.truncate(segment_file(log, 0), 1000)  # a file extended by a crash (metadata written, data not)
    with caplog.at_level(logging.WARNING):
        reopened = make_log(**CONFIG)
    assert (reopened.log_end_offset, reopened.size) == (3, 3 * MESSAGE)
    assert "at byte offset 108: message with corrupt size 0." in caplog.text


def test_a_corrupt_size_cuts_the_log(make_log, records, recovery_chunk):
    log = write_log(make_log, records, messages=5)
    with open(segment_file(log, 0), "r+b") as f:
        f.seek(4 * MESSAGE + 8)
        f.write(struct.pack(">i", 10**9))
    reopened = make_log(**CONFIG)
    assert reopened.log_end_offset == 4 and reopened.size == 4 * MESSAGE


def test_messages_above_max_message_bytes_are_cut_as_in_0_8_2(make_log, records):
    write_log(make_log, records, messages=3)
    assert make_log(max_message_bytes=MESSAGE - 13, **CONFIG).log_end_offset == 0


def test_recovery_rebuilds_indexes_of_compressed_sets(make_log, records, recovery_chunk):
    log = make_log(index_interval_bytes=50)
    for i in range(10):
        log.append(records(0, i % 3 + 1, codec=CODEC_GZIP if i % 2 else 0))
    end = log.log_end_offset
    log.close()
    os.truncate(segment_file(log, 0, ".index"), 0)
    reopened = make_log(index_interval_bytes=50)
    assert reopened.log_end_offset == end
    assert reopened.active_segment.index.entries > 0
    for offset in range(end):
        assert next(iter_messages(reopened.read(offset, 10_000).read_bytes())).offset <= offset
        assert offset in [m.offset for m in iter_messages(reopened.read(offset, 10_000).read_bytes())]


def test_a_missing_index_is_rebuilt(make_log, records, caplog):
    log = write_log(make_log, records)
    mark_clean(log)
    os.remove(segment_file(log, 0, ".index"))
    with caplog.at_level(logging.ERROR):
        reopened = make_log(**CONFIG)
    assert "Could not find index file corresponding to log file" in caplog.text
    assert reopened.segments[0].index.entries == 2
    assert all_offsets(reopened) == list(range(15))


@pytest.mark.parametrize("garbage", [b"\x01\x02\x03", struct.pack(">ii", 0, 0), struct.pack(">ii", 3, 10**6)])
def test_a_corrupt_index_is_rebuilt(make_log, records, caplog, garbage):
    log = write_log(make_log, records)
    mark_clean(log)
    with open(segment_file(log, 5, ".index"), "wb") as f:
        f.write(garbage)
    with caplog.at_level(logging.WARNING):
        reopened = make_log(**CONFIG)
    assert "Found a corrupt index file" in caplog.text
    assert reopened.segments[1].index.entries == 2
    assert all_offsets(reopened) == list(range(15))


def test_an_untrimmed_active_index_after_a_crash_is_rebuilt(make_log, records):
    log = make_log(index_interval_bytes=MESSAGE)
    for i in range(6):
        log.append(records(i, 1))
    # crash: nothing closed, the index stays preallocated
    log.active_segment.flush()
    reopened = make_log(index_interval_bytes=MESSAGE)
    assert reopened.log_end_offset == 6
    assert reopened.active_segment.index.entries == 2  # positions 72 and 144: more than 36 bytes apart
    assert all_offsets(reopened) == list(range(6))


def test_a_crash_while_recovery_drops_the_segments_after_corruption_leaves_a_prefix(make_log, records, monkeypatch):
    # crash torture: segment 5 is corrupt, so recovery cuts it and deletes segment 10; killed in between, the
    # next recovery must not find segment 5 cut and segment 10 still there (a hole at offsets 7-9)
    log = write_log(make_log, records, messages=20)
    with open(segment_file(log, 5), "r+b") as f:  # flip a byte in the value of offset 7
        f.seek(2 * MESSAGE + 30)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    renamed = []
    real_rename = segment_module.LogSegment.change_file_suffixes

    def crash_on_the_second(segment, old, new):
        if renamed:
            raise KeyboardInterrupt("killed")
        renamed.append(segment.base_offset)
        real_rename(segment, old, new)

    monkeypatch.setattr(segment_module.LogSegment, "change_file_suffixes", crash_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        make_log(**CONFIG)
    monkeypatch.undo()
    reopened = make_log(**CONFIG)
    assert reopened.log_end_offset == 7
    assert all_offsets(reopened) == list(range(7))
    assert [s.base_offset for s in reopened.segments] == [0, 5]


def test_files_of_interrupted_operations_are_cleaned_up(make_log, records):
    log = write_log(make_log, records)
    mark_clean(log)
    base = os.path.join(log.dir, f"{3:020d}")
    for name in ("00000000000000000100.log.deleted", "00000000000000000100.index.deleted",
                 "00000000000000000200.log.cleaned", "00000000000000000300.index"):
        open(os.path.join(log.dir, name), "wb").close()
    # a swap the cleaner did not finish: the .log.swap replaces segment 10, its index is rebuilt
    os.rename(segment_file(log, 10), segment_file(log, 10, ".log.swap"))
    open(segment_file(log, 10, ".index.swap"), "wb").close()
    reopened = make_log(**CONFIG)
    assert not os.path.exists(base)
    assert sorted(os.listdir(reopened.dir)) == [
        f"{b:020d}{s}" for b in (0, 5, 10) for s in (".index", ".log", ".timeindex")
    ]
    assert all_offsets(reopened) == list(range(15))

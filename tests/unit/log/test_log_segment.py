"""LogSegment: one write per append, sparse index entries, offset lookups, ranges, truncation."""

import io
import os
import struct

import pytest

from zkbroker.log import segment as segment_module
from zkbroker.log.segment import LogSegment, filename_prefix
from zkbroker.protocol.compression import CODEC_GZIP
from zkbroker.protocol.message_set import assign_offsets, build_message_set, iter_messages


def new_segment(tmp_path, base=0, interval=100, max_index_size=4096):
    return LogSegment(
        str(tmp_path), base, index_interval_bytes=interval, max_index_size=max_index_size, clock=lambda: 0
    )


def message_set(start, count, **kwargs):
    items = [(None, f"value-{start + i}".encode().ljust(10, b".")) for i in range(count)]
    return bytearray(build_message_set(items, **kwargs))


def append_sets(segment, sets):
    """Assign offsets from the segment's next offset and append; returns (first offset, position, size) per set."""
    placed = []
    for records in sets:
        first = segment.next_offset()
        info = assign_offsets(records, first)
        placed.append((first, segment.size, len(info.records)))
        segment.append(first, info.records)
    return placed


def test_file_names_are_the_base_offset_in_20_digits(tmp_path):
    segment = new_segment(tmp_path, base=368769)
    assert filename_prefix(368769) == "00000000000000368769"
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000368769.index", "00000000000000368769.log", "00000000000000368769.timeindex"]
    assert segment.next_offset() == 368769


def test_append_writes_the_set_as_given_with_one_write(tmp_path, monkeypatch):
    writes = []

    class CountingFileIO(io.FileIO):
        def write(self, b):
            writes.append(memoryview(b).nbytes)
            return super().write(b)

    monkeypatch.setattr(segment_module.io, "FileIO", CountingFileIO)
    segment = new_segment(tmp_path)
    sets = [message_set(0, 50), message_set(50, 3)]
    placed = append_sets(segment, sets)
    assert writes == [size for _, _, size in placed]
    with open(segment.log_path, "rb") as f:
        assert f.read() == bytes(sets[0]) + bytes(sets[1])


def test_index_gets_at_most_one_entry_per_set_at_its_first_offset(tmp_path):
    segment = new_segment(tmp_path, interval=100)
    sets = [message_set(0, n) for n in (1, 4, 1, 1, 1, 10, 1)]  # 36 bytes per message
    placed = append_sets(segment, sets)
    # bytes since the last entry before each set: 0, 36, 180 (> 100: entry), 36, 72, 108 (> 100: entry), 360 (entry)
    assert [segment.index.entry(i) for i in range(segment.index.entries)] == [
        (placed[i][0], placed[i][1]) for i in (2, 5, 6)
    ]


def test_translate_offset_finds_every_offset(tmp_path):
    segment = new_segment(tmp_path, base=1000, interval=50)
    placed = append_sets(segment, [message_set(0, n) for n in (1, 5, 2, 7, 3)])
    positions = {}
    for _, position, size in placed:
        data = os.pread(segment.file.fileno(), size, position)
        at = position
        for message in iter_messages(data):
            positions[message.offset] = at
            at += 12 + 14 + len(message.value)
    assert sorted(positions) == list(range(1000, 1018))
    for offset, position in positions.items():
        assert segment.translate_offset(offset) == (offset, position)
    assert segment.translate_offset(1018) is None
    assert segment.translate_offset(5) == (1000, 0)


def test_a_compressed_wrapper_is_found_by_any_of_its_offsets(tmp_path):
    segment = new_segment(tmp_path, interval=0)
    append_sets(segment, [message_set(0, 2), message_set(0, 5, codec=CODEC_GZIP), message_set(0, 1)])
    wrapper_position = segment.translate_offset(2)[1]
    for offset in range(2, 7):
        assert segment.translate_offset(offset) == (6, wrapper_position)  # the wrapper carries its last offset
    assert segment.translate_offset(7)[0] == 7


def test_read_ranges(tmp_path):
    segment = new_segment(tmp_path)
    placed = append_sets(segment, [message_set(0, 1) for _ in range(5)])
    entry = placed[0][2]
    info = segment.read(1, None, 10_000)
    assert (info.records.position, info.records.size) == (entry, 4 * entry)
    assert str(info.fetch_offset) == f"1 [0 : {entry}]"
    assert segment.read(1, 3, 10_000).records.size == 2 * entry  # ends before offset 3
    assert segment.read(1, 99, 10_000).records.size == 4 * entry
    assert segment.read(1, None, 40).records.size == 40  # cut inside a message
    assert segment.read(1, None, 0).records.size == 0
    assert segment.read(5, None, 100) is None
    with pytest.raises(ValueError, match="less than the start offset"):
        segment.read(3, 2, 100)


def test_truncate_to(tmp_path):
    segment = new_segment(tmp_path, interval=0)
    placed = append_sets(segment, [message_set(0, 2) for _ in range(5)])
    assert segment.index.entries == 4
    removed = segment.truncate_to(5)  # inside the third set: the message at offset 5 and after go
    assert segment.next_offset() == 5
    assert removed == sum(size for _, _, size in placed) - segment.size
    assert segment.index.entries == 2 and segment.index.last_offset == 4
    assert segment.truncate_to(50) == 0
    segment.truncate_to(0)
    assert (segment.size, segment.index.entries, segment.next_offset()) == (0, 0, 0)


def test_recover_rebuilds_the_index_and_cuts_a_torn_tail(tmp_path):
    segment = new_segment(tmp_path, interval=60)
    append_sets(segment, [message_set(0, 3) for _ in range(6)])
    good_size = segment.size
    segment.file.write(message_set(18, 1)[:20])  # half a message
    segment._size += 20
    assert segment.recover(max_message_size=1000) == 20
    assert segment.size == good_size == os.path.getsize(segment.log_path)
    # recovery indexes per message: the first one more than 60 bytes past the previous entry
    entries = [segment.index.entry(i) for i in range(segment.index.entries)]
    assert [position for _, position in entries] == [72 * k for k in range(1, 9)]  # 36 bytes per message
    for offset in range(18):
        assert segment.translate_offset(offset)[0] == offset


def walked_positions(segment):
    """Every entry's (offset, position), by a plain walk of the file: the reference for lookups."""
    data = open(segment.log_path, "rb").read()
    entries, at = [], 0
    while at + 12 <= len(data):
        offset, size = struct.unpack_from(">qi", data, at)
        entries.append((offset, at))
        at += 12 + size
    return entries


def expected_lookup(entries, target):
    return next(((offset, position) for offset, position in entries if offset >= target), None)


@pytest.mark.parametrize("interval", [100, 4096, 1 << 30])
def test_lookups_in_runs_of_same_size_entries_match_a_plain_walk(tmp_path, interval):
    # Long runs of one size (searched by bisection), broken by other sizes and a compressed wrapper, many more
    # sets than the segment remembers, and index entries from dense to none.
    segment = new_segment(tmp_path, base=100, interval=interval, max_index_size=1 << 20)
    sets = [message_set(0, 300), message_set(0, 40), message_set(0, 5, codec=CODEC_GZIP)]
    sets += [bytearray(build_message_set([(None, b"x" * (n % 3))] * n)) for n in range(1, 40)]
    sets += [message_set(0, 500) for _ in range(3)]
    append_sets(segment, sets)
    entries = walked_positions(segment)
    last = entries[-1][0]
    for target in range(95, last + 3):
        assert segment.translate_offset(target) == expected_lookup(entries, target), target


def test_recent_sets_are_found_without_a_walk_and_forgotten_on_truncation(tmp_path, monkeypatch):
    segment = new_segment(tmp_path, interval=1 << 30)
    placed = append_sets(segment, [message_set(0, 3), message_set(0, 1, codec=CODEC_GZIP), message_set(0, 2)])
    monkeypatch.setattr(segment, "_search_for", lambda *_: pytest.fail("walked"))
    assert [segment.translate_offset(first) for first, _, _ in placed] == [(0, 0), (3, placed[1][1]), (4, placed[2][1])]
    monkeypatch.undo()
    segment.truncate_to(3)
    assert segment.translate_offset(3) is None and segment.translate_offset(4) is None
    append_sets(segment, [message_set(0, 4)])
    assert segment.translate_offset(4) == expected_lookup(walked_positions(segment), 4)

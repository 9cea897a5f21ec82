"""OffsetIndex: preallocation, binary-search lookups, truncation, trimming and the sanity check."""

import bisect
import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkbroker.log.offset_index import InvalidOffsetError, OffsetIndex


def test_new_index_is_preallocated_to_a_multiple_of_8(tmp_path):
    path = str(tmp_path / "00000000000000000100.index")
    index = OffsetIndex(path, 100, max_index_size=100)
    assert os.path.getsize(path) == 96
    assert (index.entries, index.max_entries, index.last_offset) == (0, 12, 100)
    assert index.lookup(150) == (100, 0)


def test_too_small_max_size_is_refused(tmp_path):
    with pytest.raises(ValueError, match="Invalid max index size: 7"):
        OffsetIndex(str(tmp_path / "0.index"), 0, max_index_size=7)


def test_entries_are_relative_offset_and_position_big_endian(tmp_path):
    path = str(tmp_path / "i.index")
    index = OffsetIndex(path, 1000, max_index_size=64)
    index.append(1005, 4200)
    index.append(1010, 9000)
    index.flush()
    with open(path, "rb") as f:
        assert f.read(16) == struct.pack(">iiii", 5, 4200, 10, 9000)
    assert index.entry(1) == (10, 9000)


def test_lookup_finds_the_largest_entry_at_or_below_the_target(tmp_path):
    index = OffsetIndex(str(tmp_path / "i.index"), 50, max_index_size=80)
    for offset, position in [(53, 100), (60, 200), (61, 300), (90, 400)]:
        index.append(offset, position)
    assert index.lookup(10) == (50, 0)  # below the first entry: the segment start
    assert index.lookup(52) == (50, 0)
    assert index.lookup(53) == (53, 100)
    assert index.lookup(59) == (53, 100)
    assert index.lookup(61) == (61, 300)
    assert index.lookup(89) == (61, 300)
    assert index.lookup(10**12) == (90, 400)


def test_append_must_increase_and_fit(tmp_path):
    index = OffsetIndex(str(tmp_path / "i.index"), 0, max_index_size=16)
    index.append(5, 10)
    with pytest.raises(InvalidOffsetError, match="no larger than the last offset appended"):
        index.append(5, 20)
    index.append(6, 20)
    assert index.is_full
    with pytest.raises(ValueError, match="full index"):
        index.append(7, 30)


def test_trim_and_reopen_keep_the_entries(tmp_path):
    path = str(tmp_path / "i.index")
    index = OffsetIndex(path, 0, max_index_size=1024)
    index.append(3, 33)
    index.append(7, 77)
    index.close()
    assert os.path.getsize(path) == 16
    reopened = OffsetIndex(path, 0, max_index_size=1024)  # an existing file is not preallocated again
    assert (reopened.entries, reopened.last_offset, reopened.is_full) == (2, 7, True)
    reopened.resize(1024)
    assert (reopened.entries, reopened.max_entries) == (2, 128)
    assert reopened.lookup(8) == (7, 77)


def test_an_empty_trimmed_index_reopens_empty(tmp_path):
    path = str(tmp_path / "i.index")
    OffsetIndex(path, 0, max_index_size=64).close()
    assert os.path.getsize(path) == 0
    index = OffsetIndex(path, 0, max_index_size=64)
    assert (index.entries, index.max_entries, index.lookup(5)) == (0, 0, (0, 0))


@pytest.mark.parametrize(
    "target, remaining",
    [(0, 0), (10, 0), (11, 1), (20, 1), (21, 2), (35, 3), (99, 3)],
)
def test_truncate_to_removes_entries_at_or_above(tmp_path, target, remaining):
    index = OffsetIndex(str(tmp_path / "i.index"), 0, max_index_size=64)
    for offset in (10, 20, 30):
        index.append(offset, offset * 10)
    index.truncate_to(target)
    assert index.entries == remaining
    assert index.last_offset == ([0, 10, 20, 30][remaining])


def test_sanity_check(tmp_path):
    path = str(tmp_path / "i.index")
    index = OffsetIndex(path, 0, max_index_size=64)
    index.append(4, 100)
    assert index.is_sane(log_size=200)
    assert not index.is_sane(log_size=50)  # points past the end of the log
    index.close()
    with open(path, "ab") as f:
        f.write(b"\0\0\0")
    assert not OffsetIndex(path, 0).is_sane(log_size=200)


def test_a_preallocated_index_left_by_a_crash_is_not_sane(tmp_path):
    path = str(tmp_path / "i.index")
    index = OffsetIndex(path, 0, max_index_size=64)
    index.append(4, 100)
    index.flush()  # crash: never trimmed
    reopened = OffsetIndex(path, 0, max_index_size=64)
    assert reopened.entries == 8  # 0.8.2 takes the whole file as entries ...
    assert not reopened.is_sane(log_size=1000)  # ... and the zeros at its end give it away


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 10**6), min_size=0, max_size=200, unique=True), st.integers(0, 10**6 + 10))
def test_lookup_matches_a_reference_search(tmp_path_factory, offsets, target):
    offsets.sort()
    path = str(tmp_path_factory.mktemp("idx") / "i.index")
    index = OffsetIndex(path, 0, max_index_size=8 * 256)
    for position, offset in enumerate(offsets):
        index.append(offset, position)
    slot = bisect.bisect_right(offsets, target) - 1
    assert index.lookup(target) == ((offsets[slot], slot) if slot >= 0 else (0, 0))
    index.close()

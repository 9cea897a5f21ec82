"""The log cleaner's decisions, without files: what stays, which log goes first, how segments are grouped,
and the offset map."""

import pytest

from zkbroker.log.compaction import (
    KeylessMessageError,
    LogToClean,
    SegmentSpan,
    clean_chunk,
    delete_horizon_ms,
    filthiest,
    group_segments_by_size,
    index_keys,
    retention_rule,
)
from zkbroker.log.offset_map import OffsetMap, OffsetMapFullError
from zkbroker.protocol.message_set import build_message_set, iter_messages
from zkbroker.topic_partition import TopicPartition

TP = TopicPartition("t", 0)


def test_the_offset_map_keeps_the_last_offset_of_each_key():
    offsets = OffsetMap(1024)
    offsets.put(b"a", 3)
    offsets.put(b"b", 4)
    offsets.put(b"a", 7)
    assert (offsets.get(b"a"), offsets.get(b"b"), offsets.get(b"c")) == (7, 4, -1)
    assert offsets.size == 2


def test_the_offset_map_holds_what_its_memory_would_hold_in_kafka():
    offsets = OffsetMap(3 * 24 + 23)  # Kafka's slot: a 16-byte MD5 and an 8-byte offset
    assert offsets.slots == 3
    for key in (b"a", b"b", b"c"):
        offsets.put(key, 1)
    offsets.put(b"a", 2)  # an existing key takes no new slot
    with pytest.raises(OffsetMapFullError):
        offsets.put(b"d", 3)


def test_a_message_stays_unless_a_later_one_has_its_key():
    offsets = OffsetMap(1024)
    offsets.put(b"a", 5)
    keep = retention_rule(offsets, True, discard_keyless=False, where="w")
    assert [keep(4, b"a", False), keep(5, b"a", False), keep(6, b"b", False)] == [False, True, True]


def test_a_tombstone_stays_while_deletes_are_retained_in_its_segment():
    offsets = OffsetMap(1024)
    offsets.put(b"a", 5)
    assert retention_rule(offsets, True, discard_keyless=False, where="w")(5, b"a", True)
    assert not retention_rule(offsets, False, discard_keyless=False, where="w")(5, b"a", True)
    assert retention_rule(offsets, False, discard_keyless=False, where="w")(5, b"a", False)


def test_the_delete_horizon_is_the_last_clean_segment_s_time_less_the_retention():
    assert delete_horizon_ms(None, 1000) == 0  # nothing clean yet: every tombstone stays
    assert delete_horizon_ms(50_000, 1000) == 49_000


def test_a_keyless_message_fails_as_0_8_2_s_require_unless_discarded():
    data = build_message_set([(b"a", b"1"), (None, b"2")])
    with pytest.raises(KeylessMessageError, match="offset 1 in segment x has no key"):
        index_keys(data, OffsetMap(1024), discard_keyless=False, where="segment x")
    offsets = OffsetMap(1024)
    assert index_keys(data, offsets, discard_keyless=True, where="segment x") == (len(data), 2)
    with pytest.raises(KeylessMessageError):
        clean_chunk(data, offsets, True, discard_keyless=False, where="segment x")
    kept = clean_chunk(data, offsets, True, discard_keyless=True, where="segment x")
    assert [m.key for m in iter_messages(kept.records)] == [b"a"]


def test_index_keys_reads_complete_entries_only():
    data = build_message_set([(b"a", b"1"), (b"b", b"2"), (b"a", b"3")], base_offset=10)
    offsets = OffsetMap(1024)
    walked, count = index_keys(data[:-1], offsets, discard_keyless=False, where="w")
    assert (walked, count) == (2 * len(data) // 3, 2)
    assert (offsets.get(b"a"), offsets.get(b"b")) == (10, 11)


def test_the_cleanable_ratio_is_dirty_bytes_over_all_bytes():
    segments = [(0, 100), (10, 100), (20, 300), (30, 50)]  # the last one is active
    log = LogToClean.of(TP, segments, first_dirty_offset=20, active_base_offset=30)
    assert (log.clean_bytes, log.dirty_bytes, log.cleanable_ratio) == (200, 300, 0.6)


def test_the_filthiest_log_above_its_minimum_ratio_is_cleaned_first():
    a = LogToClean(TopicPartition("a", 0), 0, 100, 300)  # 0.75
    b = LogToClean(TopicPartition("b", 0), 0, 100, 900)  # 0.9
    empty = LogToClean(TopicPartition("c", 0), 0, 0, 0)
    assert filthiest([(a, 0.5), (b, 0.5), (empty, 0.0)]) is b
    assert filthiest([(a, 0.5), (b, 0.95)]) is a
    assert filthiest([(a, 0.75), (empty, 0.0)]) is None  # the ratio must be above the minimum


def test_segments_are_grouped_below_the_segment_and_index_sizes():
    spans = [SegmentSpan(0, 40, 8, 10), SegmentSpan(10, 40, 8, 20), SegmentSpan(20, 30, 8, 30),
             SegmentSpan(30, 10, 80, 40), SegmentSpan(40, 5, 12, 50)]
    assert group_segments_by_size(spans, max_size=100, max_index_size=100) == [[0, 10], [20, 30], [40]]


def test_a_group_never_spans_more_offsets_than_an_index_entry_can_hold():
    spans = [SegmentSpan(0, 1, 0, 2**31 - 10), SegmentSpan(2**31 - 10, 1, 0, 2**31 + 5)]
    assert group_segments_by_size(spans, max_size=100, max_index_size=100) == [[0], [2**31 - 10]]

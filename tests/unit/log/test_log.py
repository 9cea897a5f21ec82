"""Log: append and read across rolls, roll rules, read caps, truncation, ListOffsets, retention, flushing."""

import os
import random

import pytest

from zkbroker.log.log import EARLIEST_TIME, LATEST_TIME, Log, OutOfOrderOffsetsError, parse_topic_partition_name
from zkbroker.log.segment import LogSegment
from zkbroker.protocol.compression import CODEC_GZIP
from zkbroker.protocol.errors import ErrorCode, OffsetOutOfRangeError, RecordListTooLargeError
from zkbroker.protocol.message_set import InvalidMessageError, iter_entries, iter_messages

MESSAGE = 36  # bytes of one entry from `records(.., size=10)`: 12 offset and size, 14 header, 10 value


def consume(log, offset=0, max_bytes=1000, max_offset=None):
    """Read like a consumer from `offset` to the end; returns the messages' (offset, value)."""
    out = []
    while offset < (log.log_end_offset if max_offset is None else max_offset):
        data = log.read(offset, max_bytes, max_offset).read_bytes()
        if not data:  # nothing at or above `offset` (a truncation inside a compressed set leaves such a gap)
            break
        messages = [m for m in iter_messages(data) if m.offset >= offset]
        assert messages, f"no progress at offset {offset}"
        out += [(m.offset, m.value) for m in messages]
        offset = messages[-1].offset + 1
    return out


def test_directory_names_parse_into_topic_and_partition():
    assert parse_topic_partition_name("my-topic-12") == ("my-topic", 12)
    for bad in ("topic", "topic-", "-3", "topic-x"):
        with pytest.raises(ValueError):
            parse_topic_partition_name(bad)


def test_a_new_log_starts_empty_at_offset_0(make_log):
    log = make_log()
    assert (log.log_start_offset, log.log_end_offset, log.size, log.number_of_segments) == (0, 0, 0, 1)
    assert (log.topic, log.partition, log.name) == ("t", 0, "t-0")
    assert sorted(os.listdir(log.dir)) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex"]


def test_append_assigns_offsets_from_the_log_end(make_log, records):
    log = make_log()
    info = log.append(records(0, 3))
    assert (info.first_offset, info.last_offset, info.count) == (0, 2, 3)
    info = log.append(records(3, 2))
    assert (info.first_offset, info.last_offset) == (3, 4)
    assert log.log_end_offset == 5
    assert consume(log) == [(i, f"value-{i}".encode().ljust(10, b".")) for i in range(5)]


def test_append_and_read_round_trip_across_rolls(make_log, records):
    log = make_log(segment_bytes=10 * MESSAGE, index_interval_bytes=2 * MESSAGE)
    rng = random.Random(7)
    expected = []
    while log.log_end_offset < 300:
        count = rng.randint(1, 6)
        start = log.log_end_offset
        codec = CODEC_GZIP if rng.random() < 0.3 else 0
        log.append(records(start, count, codec=codec))
        expected += [(start + i, f"value-{start + i}".encode().ljust(10, b".")) for i in range(count)]
    assert log.number_of_segments > 20
    assert all(segment.size <= 10 * MESSAGE for segment in log.segments)
    for max_bytes in (250, 1000):  # 250: fetches end inside messages
        assert consume(log, max_bytes=max_bytes) == expected
    # and again after a clean reopen
    log.close()
    open(os.path.join(os.path.dirname(log.dir), ".kafka_cleanshutdown"), "w").close()
    reopened = Log(log.dir, log.config)
    assert reopened.log_end_offset == len(expected)
    assert consume(reopened) == expected
    reopened.close()


def test_every_offset_can_be_looked_up(make_log, records):
    log = make_log(segment_bytes=20 * MESSAGE, index_interval_bytes=MESSAGE)
    for n in range(1, 40):
        log.append(records(0, n % 5 + 1))
    for offset in range(log.log_end_offset):
        info = log.read(offset, 100)
        first = next(iter_entries(info.read_bytes()))
        assert first.offset == offset
        segment = next(s for s in log.segments if s.base_offset == info.fetch_offset.segment_base_offset)
        assert segment.base_offset <= offset and info.records.file is segment.file


def test_index_density_one_entry_per_set_past_the_interval(make_log, records):
    interval = 3 * MESSAGE
    log = make_log(index_interval_bytes=interval)
    rng = random.Random(3)
    expected, since = [], 0
    for _ in range(60):
        count = rng.randint(1, 5)
        if since > interval:
            expected.append((log.log_end_offset, log.active_segment.size))
            since = 0
        log.append(records(0, count))
        since += count * MESSAGE
    index = log.active_segment.index
    assert [index.entry(i) for i in range(index.entries)] == expected
    gaps = [b[1] - a[1] for a, b in zip(expected, expected[1:])]
    assert min(gaps) > interval


def test_roll_on_size(make_log, records):
    log = make_log(segment_bytes=5 * MESSAGE)
    for i in range(12):
        log.append(records(i, 1))
    assert [s.base_offset for s in log.segments] == [0, 5, 10]
    log.append(records(12, 3))  # 2 + 3 messages still fit
    log.append(records(15, 1))
    assert [s.base_offset for s in log.segments] == [0, 5, 10, 15]


def test_roll_on_age(make_log, records, clock):
    log = make_log(segment_ms=1000)
    log.append(records(0, 1))
    clock.advance(1000)
    log.append(records(1, 1))
    assert log.number_of_segments == 1  # exactly segment.ms old: not yet
    clock.advance(1)
    log.append(records(2, 1))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_an_old_but_empty_segment_does_not_roll(make_log, records, clock):
    log = make_log(segment_ms=1000)
    clock.advance(5000)
    log.append(records(0, 1))
    assert log.number_of_segments == 1


def test_roll_jitter_takes_a_random_amount_off_the_age(tmp_path, clock, records):
    log = Log(
        str(tmp_path / "t-0"), {"segment.ms": 1000, "segment.jitter.ms": 400}, clock=clock, rng=random.Random(1)
    )
    jitter = log.active_segment.roll_jitter_ms
    assert 0 <= jitter < 400
    log.append(records(0, 1))
    clock.advance(1000 - jitter)
    log.append(records(1, 1))
    assert log.number_of_segments == 1
    clock.advance(1)
    log.append(records(2, 1))
    assert log.number_of_segments == 2
    log.close()


def test_roll_when_the_index_is_full(make_log, records):
    log = make_log(segment_index_bytes=16, index_interval_bytes=0)  # two entries
    for i in range(4):
        log.append(records(i, 1))
    assert [s.base_offset for s in log.segments] == [0, 3]
    assert os.path.getsize(log.segments[0].index.path) == 16


def test_roll_trims_the_old_index_and_schedules_its_flush(make_log, records, scheduler):
    log = make_log(segment_bytes=2 * MESSAGE, index_interval_bytes=0, schedule=scheduler)
    for i in range(3):
        log.append(records(i, 1))
    assert os.path.getsize(log.segments[0].index.path) == 8
    assert os.path.getsize(log.active_segment.index.path) == 10 * 1024 * 1024  # preallocated
    assert log.recovery_point == 0
    assert scheduler.run_due() == ["flush-log"]
    assert log.recovery_point == 2


def test_flush_messages_flushes_on_append(make_log, records):
    log = make_log(flush_messages=1)
    log.append(records(0, 2))
    assert log.recovery_point == 2
    log = make_log("t-1")
    log.append(records(0, 2))
    assert log.recovery_point == 0
    log.flush()
    assert (log.recovery_point, log.unflushed_messages) == (2, 0)


def test_a_corrupt_set_is_refused_and_nothing_is_written(make_log, records):
    log = make_log()
    data = records(0, 3)
    data[-1] ^= 0xFF
    with pytest.raises(InvalidMessageError) as e:
        log.append(data)
    assert e.value.error_code == ErrorCode.CORRUPT_MESSAGE
    assert (log.log_end_offset, log.size) == (0, 0)


def test_max_message_bytes_counts_the_offset_and_size(make_log, records):
    log = make_log(max_message_bytes=MESSAGE)
    log.append(records(0, 1))
    log = make_log("t-1", max_message_bytes=MESSAGE - 1)
    with pytest.raises(InvalidMessageError) as e:
        log.append(records(0, 1))
    assert e.value.error_code == ErrorCode.MESSAGE_TOO_LARGE


def test_a_set_larger_than_a_segment_is_refused(make_log, records):
    log = make_log(segment_bytes=3 * MESSAGE)
    with pytest.raises(RecordListTooLargeError, match="exceeds the maximum configured segment size"):
        log.append(records(0, 4))
    assert log.log_end_offset == 0


def test_an_empty_set_appends_nothing(make_log):
    log = make_log()
    info = log.append(bytearray())
    assert info.shallow_count == 0 and log.log_end_offset == 0 and log.size == 0


def test_replica_appends_keep_the_leaders_offsets(make_log, records):
    leader, follower = make_log("t-0"), make_log("t-1")
    leader.append(records(0, 3))
    leader.append(records(3, 2, codec=CODEC_GZIP))
    fetched = leader.read(0, 10_000).read_bytes()
    info = follower.append(fetched + fetched[:20], assign_offsets=False)  # a fetch may end mid-message
    assert (info.first_offset, info.last_offset, follower.log_end_offset) == (0, 4, 5)
    assert consume(follower) == consume(leader)
    with pytest.raises(OutOfOrderOffsetsError):
        follower.append(leader.read(3, 10_000).read_bytes(), assign_offsets=False)


def test_read_outside_the_log_is_out_of_range(make_log, records):
    log = make_log(segment_bytes=2 * MESSAGE)
    for i in range(6):
        log.append(records(i, 1))
    with pytest.raises(OffsetOutOfRangeError, match="offset 7 but we only have log segments in the range 0 to 6"):
        log.read(7, 100)
    log.delete_segments_while(lambda s: s.base_offset < 2)
    with pytest.raises(OffsetOutOfRangeError) as e:
        log.read(1, 100)
    assert e.value.errno == 1
    assert log.read(2, 100).records.size == 2 * MESSAGE


def test_read_at_the_log_end_is_empty(make_log, records):
    log = make_log()
    log.append(records(0, 2))
    info = log.read(2, 100)
    assert info.records.size == 0
    assert info.fetch_offset == log.log_end_offset_metadata
    assert str(info.fetch_offset) == f"2 [0 : {2 * MESSAGE}]"


def test_read_is_capped_by_max_offset_at_a_message_boundary(make_log, records):
    log = make_log()
    log.append(records(0, 3))
    log.append(records(3, 3, codec=CODEC_GZIP))  # offsets 3-5 in one wrapper
    log.append(records(6, 3))
    assert [m.offset for m in iter_messages(log.read(0, 10_000, max_offset=2).read_bytes())] == [0, 1]
    # a high watermark inside the compressed set keeps the whole set back
    assert [m.offset for m in iter_messages(log.read(0, 10_000, max_offset=5).read_bytes())] == [0, 1, 2]
    assert [m.offset for m in iter_messages(log.read(1, 10_000, max_offset=6).read_bytes())] == [1, 2, 3, 4, 5]
    assert log.read(3, 10_000, max_offset=3).records.size == 0
    assert log.read(7, 10_000, max_offset=4).records.size == 0  # a consumer ahead of the high watermark
    assert consume(log, max_offset=6, max_bytes=10_000)[-1][0] == 5


def test_read_cut_by_max_bytes_may_end_mid_message(make_log, records):
    log = make_log()
    log.append(records(0, 5))
    info = log.read(1, 2 * MESSAGE + 7)
    assert info.records.size == 2 * MESSAGE + 7
    assert [m.offset for m in iter_messages(info.read_bytes())] == [1, 2]


def test_read_stays_within_one_segment(make_log, records):
    log = make_log(segment_bytes=3 * MESSAGE)
    for i in range(6):
        log.append(records(i, 1))
    info = log.read(2, 10_000)
    assert [m.offset for m in iter_messages(info.read_bytes())] == [2]
    assert info.fetch_offset.segment_base_offset == 0


def test_truncate_to_the_middle_of_a_segment(make_log, records):
    log = make_log(segment_bytes=4 * MESSAGE, index_interval_bytes=0)
    for i in range(10):
        log.append(records(i, 1))
    log.flush()
    log.truncate_to(5)
    assert [s.base_offset for s in log.segments] == [0, 4]
    assert (log.log_end_offset, log.recovery_point) == (5, 5)
    assert log.active_segment.size == MESSAGE
    assert log.active_segment.index.entries == 0 and not log.active_segment.index.is_full
    log.append(records(100, 2))
    assert consume(log)[4:] == [(4, b"value-4..."), (5, b"value-100."), (6, b"value-101.")]


def test_truncate_to_keeps_the_index_below_the_target(make_log, records):
    log = make_log(index_interval_bytes=0)
    for i in range(10):
        log.append(records(i, 1))
    log.truncate_to(6)
    index = log.active_segment.index
    assert index.last_offset == 5 and index.entries == 5
    for offset in range(6):
        assert next(iter_entries(log.read(offset, 100).read_bytes())).offset == offset


def test_truncate_inside_a_compressed_set_cuts_the_whole_set(make_log, records):
    log = make_log(index_interval_bytes=0)
    log.append(records(0, 2))
    log.append(records(2, 3, codec=CODEC_GZIP))  # offsets 2-4 in one entry
    log.truncate_to(4)
    assert log.log_end_offset == 4  # as in 0.8.2, though offsets 2 and 3 went with their set
    assert log.active_segment.index.entries == 0  # its one entry, for offset 2, pointed at the cut set
    assert [m.offset for m in iter_messages(log.read(0, 1000).read_bytes())] == [0, 1]
    log.close()
    open(os.path.join(os.path.dirname(log.dir), ".kafka_cleanshutdown"), "w").close()
    assert Log(log.dir, log.config).log_end_offset == 2


def test_a_flush_scheduled_at_a_roll_does_not_vouch_for_offsets_a_truncation_removed(make_log, records, scheduler):
    # crash torture: the roll at offset 6 schedules flush(6); a truncation to 3 runs first. The flush must not
    # set the recovery point to 6: offsets 3-5 appended again later would count as flushed without being so.
    log = make_log(segment_bytes=3 * MESSAGE, schedule=scheduler)
    for i in range(7):
        log.append(records(i, 1))
    assert scheduler.names() == ["flush-log", "flush-log"]
    log.truncate_to(3)
    scheduler.run_due()
    assert (log.log_end_offset, log.recovery_point) == (3, 3)
    log.append(records(3, 1))
    assert log.recovery_point == 3


def test_a_crash_between_the_deletions_of_a_truncation_leaves_a_prefix(make_log, records, monkeypatch):
    # crash torture: truncating to 3 deletes the segments after it; killed after the first deletion, the log
    # must not keep a later segment without the one before it (a hole in the offsets after recovery)
    log = make_log(segment_bytes=2 * MESSAGE)
    for i in range(10):
        log.append(records(i, 1))
    renamed = []
    real_rename = LogSegment.change_file_suffixes

    def crash_on_the_second(segment, old, new):
        if renamed:
            raise KeyboardInterrupt("killed")
        renamed.append(segment.base_offset)
        real_rename(segment, old, new)

    monkeypatch.setattr(LogSegment, "change_file_suffixes", crash_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        log.truncate_to(3)
    monkeypatch.undo()
    reopened = Log(log.dir, log.config)
    offsets = [offset for offset, _ in consume(reopened)]
    assert offsets == list(range(reopened.log_end_offset)) and reopened.log_end_offset == 8


def test_truncate_to_beyond_the_end_does_nothing(make_log, records):
    log = make_log()
    log.append(records(0, 3))
    log.truncate_to(10)
    assert log.log_end_offset == 3
    with pytest.raises(ValueError, match="negative"):
        log.truncate_to(-1)


def test_truncate_below_the_log_start_starts_over(make_log, records, scheduler):
    log = make_log(segment_bytes=2 * MESSAGE, schedule=scheduler)
    for i in range(6):
        log.append(records(i, 1))
    log.delete_segments_while(lambda s: s.base_offset < 4)
    log.truncate_to(1)
    assert (log.log_start_offset, log.log_end_offset, log.number_of_segments) == (1, 1, 1)
    scheduler.clock.advance(60_000)
    scheduler.run_due()
    assert sorted(os.listdir(log.dir)) == [
        "00000000000000000001.index", "00000000000000000001.log", "00000000000000000001.timeindex"]


def test_truncate_fully_and_start_at(make_log, records):
    log = make_log(segment_bytes=2 * MESSAGE)
    for i in range(5):
        log.append(records(i, 1))
    log.flush()
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point, log.size) == (100, 100, 5, 0)
    assert log.append(records(0, 1)).first_offset == 100


def test_list_offsets_latest_and_earliest(make_log, records):
    log = make_log(segment_bytes=2 * MESSAGE)
    assert log.offset_before(LATEST_TIME) == 0 and log.offset_before(EARLIEST_TIME) == 0
    for i in range(5):
        log.append(records(i, 1))
    log.delete_segments_while(lambda s: s.base_offset == 0)
    assert log.offset_before(LATEST_TIME) == 5
    assert log.offset_before(EARLIEST_TIME) == 2
    assert log.offsets_before(LATEST_TIME, 10) == [5, 4, 2]


def test_list_offsets_by_time_goes_by_segment_mtimes(make_log, records, clock):
    log = make_log(segment_bytes=2 * MESSAGE)
    for i in range(5):
        log.append(records(i, 1))
    for k, segment in enumerate(log.segments):  # segments 0, 2, 4 last written at 1000, 2000, 3000
        segment.set_last_modified((k + 1) * 1000)
    assert log.offset_before(999) is None
    assert log.offset_before(1000) == 0
    assert log.offset_before(2500) == 2
    assert log.offset_before(clock() - 1) == 4
    assert log.offset_before(clock()) == 5  # the log end stands for "now" while the active segment has data
    assert log.offsets_before(2500, 5) == [2, 0]


def test_retention_by_time_deletes_old_segments_but_never_the_active_one(make_log, records, clock, scheduler):
    log = make_log(segment_bytes=2 * MESSAGE, retention_ms=1000, file_delete_delay_ms=500, schedule=scheduler)
    for i in range(7):
        log.append(records(i, 1))
    now = clock()
    for segment in log.segments[:2]:
        segment.set_last_modified(now - 1001)
    for segment in log.segments[2:]:
        segment.set_last_modified(now - 1000)
    assert log.delete_old_segments() == 2
    assert [s.base_offset for s in log.segments] == [4, 6]
    assert sorted(f for f in os.listdir(log.dir) if f.endswith(".deleted")) == [
        "00000000000000000000.index.deleted", "00000000000000000000.log.deleted",
        "00000000000000000000.timeindex.deleted",
        "00000000000000000002.index.deleted", "00000000000000000002.log.deleted",
        "00000000000000000002.timeindex.deleted",
    ]
    # every segment expired: the log rolls first, so an empty active segment remains
    for segment in log.segments:
        segment.set_last_modified(now - 5000)
    assert log.delete_old_segments() == 2
    assert [s.base_offset for s in log.segments] == [7]
    assert (log.log_start_offset, log.log_end_offset) == (7, 7)
    # an empty active segment is never deleted
    log.active_segment.set_last_modified(now - 5000)
    assert log.delete_old_segments() == 0
    clock.advance(500)
    scheduler.run_due()
    assert sorted(os.listdir(log.dir)) == [
        "00000000000000000007.index", "00000000000000000007.log", "00000000000000000007.timeindex"]


def test_a_range_handed_out_stays_readable_until_the_delayed_delete(make_log, records, clock, scheduler):
    log = make_log(segment_bytes=2 * MESSAGE, retention_ms=0, file_delete_delay_ms=60_000, schedule=scheduler)
    for i in range(4):
        log.append(records(i, 1))
    info = log.read(0, 1000)
    log.segments[0].set_last_modified(clock() - 1)
    assert log.delete_old_segments() == 1
    assert [m.offset for m in iter_messages(info.read_bytes())] == [0, 1]
    clock.advance(60_000)
    scheduler.run_due()
    assert info.records.file.closed


def test_negative_retention_ms_keeps_everything(make_log, records):
    log = make_log(segment_bytes=2 * MESSAGE, retention_ms=-1)
    for i in range(5):
        log.append(records(i, 1))
    log.segments[0].set_last_modified(0)
    assert log.delete_old_segments() == 0


def test_retention_by_size_deletes_whole_oldest_segments(make_log, records):
    log = make_log(segment_bytes=4 * MESSAGE, retention_bytes=9 * MESSAGE)
    for i in range(14):
        log.append(records(i, 1))
    assert [s.size // MESSAGE for s in log.segments] == [4, 4, 4, 2]
    assert log.delete_old_segments() == 1  # 14 - 9 = 5 messages too many: one segment of 4 can go
    assert log.delete_old_segments() == 0  # 10 - 9 = 1 < 4
    assert [s.base_offset for s in log.segments] == [4, 8, 12]


def test_retention_by_size_off_and_for_compacted_topics(make_log, records):
    log = make_log(segment_bytes=MESSAGE, retention_bytes=-1)
    for i in range(5):
        log.append(records(i, 1))
    assert log.delete_old_segments() == 0
    log = make_log("t-1", segment_bytes=MESSAGE, retention_bytes=0, retention_ms=0, cleanup_policy="compact")
    for i in range(5):
        log.append(records(i, 1))
    assert log.delete_old_segments() == 0


def test_convert_to_offset_metadata(make_log, records):
    log = make_log()
    log.append(records(0, 3))
    metadata = log.convert_to_offset_metadata(1)
    assert (metadata.message_offset, metadata.segment_base_offset, metadata.relative_position_in_segment) == (
        1, 0, MESSAGE,
    )
    end = log.log_end_offset_metadata
    assert end.segment_base_offset == metadata.segment_base_offset
    assert end.relative_position_in_segment - metadata.relative_position_in_segment == 2 * MESSAGE
    assert log.convert_to_offset_metadata(9).message_offset == -1


def test_delete_removes_the_directory(make_log, records):
    log = make_log()
    log.append(records(0, 1))
    log.delete()
    assert not os.path.exists(log.dir)


def _value(offset):
    return f"value-{offset}".encode().ljust(10, b".")


@pytest.mark.parametrize("seed", range(4))
def test_random_operations_match_a_model(tmp_path, clock, records, seed):
    """Appends (plain and compressed), truncations, retention and reopenings, checked against a model."""
    rng = random.Random(seed)
    config = {
        "segment.bytes": rng.choice([4, 8, 30]) * MESSAGE,
        "segment.index.bytes": rng.choice([8, 64, 4096]),
        "index.interval.bytes": rng.choice([0, MESSAGE, 4 * MESSAGE]),
    }
    path = str(tmp_path / "t-0")
    marker = tmp_path / ".kafka_cleanshutdown"
    log = Log(path, config, clock=clock)
    model: dict[int, tuple[int, int]] = {}  # offset -> (first, last) offsets of its set if compressed, else (o, o)
    for _ in range(80):
        op = rng.random()
        if op < 0.6:
            start, count, compressed = log.log_end_offset, rng.randint(1, 4), rng.random() < 0.3
            log.append(records(start, count, codec=CODEC_GZIP if compressed else 0))
            for o in range(start, start + count):
                model[o] = (start, start + count - 1) if compressed else (o, o)
        elif op < 0.75:
            target = rng.randint(log.log_start_offset, log.log_end_offset)
            log.truncate_to(target)
            # a truncation inside a compressed set removes the whole set (its entry starts before the target)
            model = {o: s for o, s in model.items() if s[1] < target or s[0] >= target and o < target}
        elif op < 0.85:
            keep = rng.randint(0, log.number_of_segments)
            cut = log.segments[-keep].base_offset if keep else log.log_end_offset
            log.delete_segments_while(lambda s, cut=cut: s.base_offset < cut)
            model = {o: s for o, s in model.items() if o >= log.log_start_offset}
        else:
            log.close()
            if rng.random() < 0.5:
                marker.touch()
            log = Log(path, config, rng.randint(0, log.log_end_offset), clock=clock)
            marker.unlink(missing_ok=True)
        consumed = consume(log, log.log_start_offset, max_bytes=rng.choice([200, 500]))
        assert consumed == [(o, _value(o)) for o in sorted(model)]
    log.close()


def test_a_failed_write_leaves_no_partial_set(make_log, records, monkeypatch):
    import errno
    import io

    from zkbroker.log import segment as segment_module

    class DiskFillsUp(io.FileIO):
        full = False

        def write(self, b):
            if DiskFillsUp.full:
                super().write(memoryview(b)[:10])
                raise OSError(errno.ENOSPC, "No space left on device")
            return super().write(b)

    monkeypatch.setattr(segment_module.io, "FileIO", DiskFillsUp)
    log = make_log(index_interval_bytes=0)
    log.append(records(0, 2))
    DiskFillsUp.full = True
    with pytest.raises(OSError, match="No space left"):
        log.append(records(2, 2))
    assert (log.log_end_offset, log.size, os.path.getsize(log.active_segment.log_path)) == (2, 72, 72)
    DiskFillsUp.full = False
    log.append(records(2, 2))
    assert [offset for offset, _ in consume(log)] == [0, 1, 2, 3]
    assert log.active_segment.index.entry(0) == (2, 72)

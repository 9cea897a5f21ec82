"""The log cleaner on real segment files: compaction keeps the last value of each key with its offset, keeps
tombstones for delete.retention.ms, leaves the active segment alone, handles keyless messages as 0.8.2 (or as
the switch says), rewrites compressed sets with their codec, rebuilds a consistent index, checkpoints where
the dirty section starts, and survives a crash at any point of a clean."""

import logging
import os
import shutil
import time

import pytest

from zkbroker.cli import main
from zkbroker.fault_points import CLEANER_PHASES, FaultPoints
from zkbroker.log.cleaner import CleanerConfig, CleaningAbortedError
from zkbroker.log.cleaner_manager import CLEANER_CHECKPOINT_FILE
from zkbroker.log.compaction import KeylessMessageError
from zkbroker.log.log import Log
from zkbroker.log.log_cleaner import LogCleaner
from zkbroker.log.log_config import LogConfig
from zkbroker.log.manager import LogManager
from zkbroker.log.offset_index import OffsetIndex
from zkbroker.protocol.compression import CODEC_GZIP, CODEC_LZ4, CODEC_SNAPPY
from zkbroker.protocol.message_set import CODEC_MASK, build_message_set, iter_entries, iter_messages
from zkbroker.topic_partition import TopicPartition

TP = TopicPartition("t", 0)
# one keyed message (key k<n>, value v<nnnn>) takes 12 + 14 + 2 + 5 = 33 bytes: segments of 5 such messages
MESSAGE = 33
COMPACT = {"cleanup_policy": "compact", "segment_bytes": 5 * MESSAGE + 1, "index_interval_bytes": 40,
           "min_cleanable_dirty_ratio": 0.0}
CLEANER = CleanerConfig(enable_cleaner=True, dedupe_buffer_size=1024 * 1024, io_buffer_size=256)


def keyed(*items, codec=0, magic=0):
    return bytearray(build_message_set(list(items), codec=codec, magic=magic))


def value(n):
    return f"v{n:04d}".encode()


def produce(log, count, keys=3, start=0):
    """`count` single-message sets with keys k0..k<keys-1> in turn and values v<n>; returns {key: last (offset,
    value)} of what was appended."""
    last = {}
    for n in range(start, start + count):
        key = f"k{n % keys}".encode()
        info = log.append(keyed((key, value(n))))
        last[key] = (info.first_offset, value(n))
    return last


def contents(log):
    """Every message of the log as (offset, key, value), read through Log.read (CRCs checked)."""
    found, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        batch = list(iter_messages(log.read(offset, 1 << 20).read_bytes()))
        if not batch:
            break
        found += [(m.offset, m.key, m.value) for m in batch]
        offset = batch[-1].offset + 1
    return found


def last_values(messages):
    return {key: (offset, val) for offset, key, val in messages}


def checkpoint(log_dir):
    with open(os.path.join(log_dir, CLEANER_CHECKPOINT_FILE)) as f:
        return f.read()


def assert_index_consistent(log):
    """Each index entry points at the entry holding its offset (a compressed one's first message), and a read
    from any message's offset finds it (after the messages before it in its compressed set, if any)."""
    for segment in log.segments:
        data = open(segment.log_path, "rb").read()
        for n in range(segment.index.entries):
            relative, position = segment.index.entry(n)
            entry = next(iter_entries(data[position:]))
            first = entry.offset if entry.attributes & CODEC_MASK == 0 else \
                next(iter_messages(data[position:position + 12 + entry.size])).offset
            assert first == segment.base_offset + relative, (segment, n)
    for offset, key, val in contents(log):
        first = next(m for m in iter_messages(log.read(offset, 1 << 20).read_bytes()) if m.offset >= offset)
        assert (first.offset, first.key, first.value) == (offset, key, val)


@pytest.fixture
def logs_dir(tmp_path):
    return str(tmp_path / "logs")


@pytest.fixture
def make_cleaner(logs_dir, clock):
    """make_cleaner(*logs, config=CLEANER, phase=None) -> LogCleaner over those logs (threads not started)."""
    made = []

    def make(*logs, config=CLEANER, phase=None):
        by_tp = {TopicPartition(log.topic, log.partition): log for log in logs}
        cleaner = LogCleaner(config, [logs_dir], lambda: by_tp, clock=clock, phase=phase)
        made.append(cleaner)
        return cleaner

    yield make
    for cleaner in made:
        cleaner.shutdown()


def clean_once(log_cleaner):
    return log_cleaner.clean_or_sleep(log_cleaner.cleaners[0])


# -- what stays -----------------------------------------------------------------------------------------------

def test_the_last_value_of_each_key_is_kept_at_its_offset(make_log, make_cleaner, logs_dir):
    log = make_log(**COMPACT)
    produced = produce(log, 23, keys=4)
    active_base = log.active_segment.base_offset
    before = contents(log)
    assert clean_once(make_cleaner(log))
    after = contents(log)
    cleaned = [m for m in after if m[0] < active_base]
    expected_cleaned = last_values(m for m in before if m[0] < active_base)
    assert sorted(cleaned) == sorted((offset, key, val) for key, (offset, val) in expected_cleaned.items())
    assert last_values(after) == produced
    assert [m[0] for m in after] == sorted(m[0] for m in after)  # offsets kept, in order, with gaps
    assert log.log_end_offset == 23
    assert checkpoint(logs_dir) == f"0\n1\nt 0 {active_base}\n"


def test_the_active_segment_is_never_touched(make_log, make_cleaner):
    log = make_log(**COMPACT)
    produce(log, 13, keys=1)  # one key: everything but the last message of the cleaned part is redundant
    active = log.active_segment
    active_bytes = open(active.log_path, "rb").read()
    assert len(list(iter_entries(active_bytes))) == 3
    assert clean_once(make_cleaner(log))
    assert log.active_segment is active
    assert open(active.log_path, "rb").read() == active_bytes  # its duplicates of k0 stay until it is closed


def test_a_log_that_is_not_compacted_is_never_cleaned(make_log, make_cleaner):
    log = make_log(**(COMPACT | {"cleanup_policy": "delete"}))
    produce(log, 23, keys=1)
    assert not clean_once(make_cleaner(log))
    assert len(contents(log)) == 23


def test_tombstones_stay_for_delete_retention_ms_after_cleaning_then_go(make_log, make_cleaner):
    retention = 60_000
    # segments that stay apart once cleaned (two of them take more than segment.bytes), so that the
    # tombstone's segment keeps its own modification time
    log = make_log(**(COMPACT | {"segment_bytes": 4 * MESSAGE + 1, "delete_retention_ms": retention}))
    cleaner = make_cleaner(log)
    t0 = (time.time_ns() // 1_000_000) - 10 * retention

    def close_segment(items, modified):
        for item in items:
            log.append(keyed(item))
        segment = log.active_segment
        log.roll()
        segment.set_last_modified(modified)

    close_segment([(b"k0", b"v0"), (b"k1", b"v1"), (b"k2", b"v2"), (b"k3", b"v3")], t0)
    close_segment([(b"k0", None), (b"k4", b"v4"), (b"k5", b"v5"), (b"k6", b"v6")], t0 + 1000)
    assert clean_once(cleaner)
    # the first cleaning has no clean segment to measure from: the tombstone stays, the value it deletes goes
    assert [(k, v) for _, k, v in contents(log) if k == b"k0"] == [(b"k0", None)]

    close_segment([(b"k7", b"v7"), (b"k8", b"v8"), (b"k9", b"v9"), (b"kA", b"vA")], t0 + 1000 + retention)
    assert clean_once(cleaner)
    # the last clean segment (the tombstone's) is not delete.retention.ms younger than the tombstone's segment
    assert [(k, v) for _, k, v in contents(log) if k == b"k0"] == [(b"k0", None)]

    close_segment([(b"kB", b"vB"), (b"kC", b"vC"), (b"kD", b"vD"), (b"kE", b"vE")], t0 + 2000 + retention)
    assert clean_once(cleaner)
    # now the last clean segment was modified more than delete.retention.ms after the tombstone's: it goes
    assert [k for _, k, _ in contents(log) if k == b"k0"] == []
    assert {k for _, k, _ in contents(log)} == {b"k%s" % c.encode() for c in "123456789ABCDE"}


# -- keyless messages -----------------------------------------------------------------------------------------

def test_a_keyless_message_ends_the_cleaner_thread_and_changes_nothing_as_in_0_8_2(make_log, make_cleaner, caplog):
    log = make_log(**COMPACT)
    produce(log, 3)
    log.append(keyed((None, b"no key")))
    produce(log, 8, start=4)
    files = {name: open(os.path.join(log.dir, name), "rb").read() for name in os.listdir(log.dir)}
    cleaner = make_cleaner(log, config=CLEANER)
    with pytest.raises(KeylessMessageError, match="offset 3 in log segment .* has no key"):
        clean_once(cleaner)
    assert {name: open(os.path.join(log.dir, name), "rb").read() for name in os.listdir(log.dir)} == files
    # in a thread, the error ends the thread: nothing cleans any log any more
    threaded = make_cleaner(log, config=CLEANER)
    with caplog.at_level(logging.ERROR, logger="zkbroker.log.log_cleaner"):
        threaded.startup()
        threaded._threads[0].join(timeout=30)
    assert threaded.alive_threads == 0
    assert "[kafka-log-cleaner-thread-0], Error due to" in caplog.text
    assert "requirement failed" in caplog.text


def test_keyless_messages_are_discarded_with_the_switch(make_log, make_cleaner):
    log = make_log(**COMPACT)
    produce(log, 3)
    log.append(keyed((None, b"no key")))
    produced = produce(log, 8, start=4)
    assert clean_once(make_cleaner(log, config=CleanerConfig(**(vars(CLEANER) | {"discard_keyless": True}))))
    assert all(key is not None for _, key, _ in contents(log))
    assert last_values(contents(log)) == produced


# -- compressed sets ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4])
def test_compressed_sets_keep_their_survivors_recompressed_with_their_codec(make_log, make_cleaner, codec, magic):
    log = make_log(**(COMPACT | {"segment_bytes": 400}))
    produced = {}
    for n in range(12):
        items = [(f"k{(n + i) % 5}".encode(), value(10 * n + i)) for i in range(4)]
        info = log.append(keyed(*items, codec=codec, magic=magic))
        for i, (key, val) in enumerate(items):
            produced[key] = (info.first_offset + i, val)
    produce(log, 1, start=999, keys=1000)  # a plain message last, so every compressed set is in a closed segment
    produced[b"k999"] = (log.log_end_offset - 1, value(999))
    log.roll()
    assert clean_once(make_cleaner(log))
    assert last_values(contents(log)) == produced
    assert len(contents(log)) == len(produced)
    wrappers = [e for s in log.segments for e in iter_entries(open(s.log_path, "rb").read())
                if e.attributes & CODEC_MASK]
    assert wrappers and all(e.attributes & CODEC_MASK == codec and e.magic == magic and e.valid for e in wrappers)
    assert_index_consistent(log)


def test_messages_larger_than_a_piece_or_a_read_buffer_are_cleaned(make_log, make_cleaner):
    log = make_log(**(COMPACT | {"segment_bytes": 2 * 1024 * 1024}))
    produced = {}
    for n, size in enumerate([40_000, 10, 300_000, 40_000, 10, 300_000, 10]):  # pieces are 32 KB, reads 256 KB
        key = f"k{n % 3}".encode()
        info = log.append(keyed((key, bytes([n]) * size)))
        produced[key] = (info.first_offset, bytes([n]) * size)
    log.roll()
    assert clean_once(make_cleaner(log, config=CleanerConfig(enable_cleaner=True)))  # Kafka's I/O buffer sizes
    assert last_values(contents(log)) == produced
    assert len(contents(log)) == 3


# -- the index ------------------------------------------------------------------------------------------------

def test_the_index_of_cleaned_segments_points_at_their_offsets(make_log, make_cleaner):
    log = make_log(**(COMPACT | {"segment_bytes": 1000}))
    produce(log, 200, keys=40)
    assert clean_once(make_cleaner(log))
    cleaned = [s for s in log.segments if s is not log.active_segment]
    assert sum(s.index.entries for s in cleaned) > 5  # an entry about every index.interval.bytes, as appends get
    assert_index_consistent(log)
    for segment in cleaned:  # the files agree with what the log holds: an index read back from disk is sane
        assert OffsetIndex(segment.index.path, segment.base_offset).is_sane(segment.size)


# -- the dirty section, its ratio and its checkpoint ----------------------------------------------------------

def test_the_dirty_ratio_decides_whether_and_which_log_is_cleaned(make_log, make_cleaner):
    busy = make_log("busy-0", **(COMPACT | {"min_cleanable_dirty_ratio": 0.5}))
    quiet = make_log("quiet-0", **(COMPACT | {"min_cleanable_dirty_ratio": 0.5}))
    produce(busy, 40, keys=40)  # every key once: compaction keeps it all
    produce(quiet, 12, keys=2)
    cleaner = make_cleaner(busy, quiet)
    grabbed, to_clean = cleaner.manager.grab_filthiest_log()
    assert grabbed is busy  # both are all dirty (ratio 1.0): the first of equals
    assert cleaner.manager.grab_filthiest_log()[0] is quiet  # one being cleaned is not taken again
    cleaner.manager.done_cleaning(TopicPartition("quiet", 0), os.path.dirname(quiet.dir), 0)
    cleaner.manager.done_cleaning(TopicPartition("busy", 0), os.path.dirname(busy.dir), 0)
    assert clean_once(cleaner) and clean_once(cleaner)  # each log once
    assert not clean_once(cleaner)
    # busy's clean section is 35 messages: one dirty segment of 5 is not enough for a ratio above 0.5
    produce(busy, 6, keys=40, start=40)
    assert cleaner.manager.grab_filthiest_log() is None
    produce(busy, 40, keys=40, start=46)
    grabbed, to_clean = cleaner.manager.grab_filthiest_log()
    assert grabbed is busy and to_clean.cleanable_ratio > 0.5


def test_a_second_cleaning_starts_at_the_checkpointed_first_dirty_offset(make_log, make_cleaner, logs_dir):
    log = make_log(**COMPACT)
    produce(log, 13)
    cleaner = make_cleaner(log)
    assert clean_once(cleaner)
    first_end = log.active_segment.base_offset
    produced = produce(log, 13, start=13)
    _, to_clean = cleaner.manager.grab_filthiest_log()
    assert to_clean.first_dirty_offset == first_end
    cleaner.manager.done_cleaning(TP, logs_dir, first_end)
    assert clean_once(cleaner)
    assert checkpoint(logs_dir) == f"0\n1\nt 0 {log.active_segment.base_offset}\n"
    assert last_values(contents(log)) == produced


def test_a_full_offset_map_takes_whole_segments_and_leaves_the_rest_dirty(make_log, make_cleaner, logs_dir):
    log = make_log(**COMPACT)
    produce(log, 26, keys=26)
    # room for 11 entries at load factor 0.9: two segments of 5 offsets, not a third
    small = CleanerConfig(**(vars(CLEANER) | {"dedupe_buffer_size": 24 * 13}))
    assert clean_once(make_cleaner(log, config=small))
    assert checkpoint(logs_dir) == "0\n1\nt 0 10\n"


def test_a_truncation_below_the_active_segment_brings_the_checkpoint_down(make_log, make_cleaner, logs_dir):
    log = make_log(**COMPACT)
    produce(log, 23)
    cleaner = make_cleaner(log)
    log.on_truncate = cleaner.maybe_truncate_checkpoint
    assert clean_once(cleaner)
    assert checkpoint(logs_dir) == "0\n1\nt 0 20\n"
    log.truncate_to(12)  # a follower cutting back to its leader
    assert checkpoint(logs_dir) == f"0\n1\nt 0 {log.active_segment.base_offset}\n"
    assert log.active_segment.base_offset <= 12


def test_a_cleaning_whose_segments_were_truncated_meanwhile_swaps_nothing(make_log, make_cleaner, logs_dir):
    log = make_log(**COMPACT)
    produce(log, 23)

    def truncate_once(phase):
        if phase == "offset-map-built" and log.log_end_offset > 12:
            log.truncate_to(12)

    cleaner = make_cleaner(log, phase=truncate_once)
    log.on_truncate = cleaner.maybe_truncate_checkpoint
    before = contents(log)
    assert clean_once(cleaner)  # aborted: nothing checkpointed, nothing swapped, no .cleaned left behind
    assert contents(log) == before[:12]
    assert not [name for name in os.listdir(log.dir) if name.endswith((".cleaned", ".swap"))]
    assert checkpoint(logs_dir) == ""


def test_an_aborted_cleaning_of_a_deleted_log_leaves_no_file(make_log, make_cleaner, logs_dir):
    log = make_log(**COMPACT)
    produce(log, 23)
    cleaner = make_cleaner(log)
    cleaner.manager.grab_filthiest_log()
    cleaner.abort_cleaning(TP)
    log.delete()
    with pytest.raises(CleaningAbortedError):
        cleaner.cleaners[0].clean(log, 0)
    assert not os.path.exists(log.dir)


# -- crashes --------------------------------------------------------------------------------------------------

PHASES = ["offset-map-built", "cleaned-partial", "cleaned-written", "swap-renamed", "old-segments-renamed",
          "swapped", "checkpointed"]


def mixed_log(make_log, scheduler):
    """A compacted log of plain and gzip sets, with a tombstone; returns it and {key: last (offset, value)}."""
    log = make_log(schedule=scheduler, **(COMPACT | {"segment_bytes": 300}))
    produced = produce(log, 17, keys=4)
    info = log.append(keyed((b"k1", None), (b"k5", b"gz"), (b"k2", b"gz2"), codec=CODEC_GZIP))
    produced |= {b"k1": (info.first_offset, None), b"k5": (info.first_offset + 1, b"gz"),
                 b"k2": (info.first_offset + 2, b"gz2")}
    produced |= produce(log, 9, keys=3, start=100)
    return log, produced


@pytest.mark.parametrize("phase", PHASES)
def test_a_crash_at_any_point_of_a_clean_recovers_to_a_valid_log_with_nothing_lost(
        make_log, make_cleaner, scheduler, tmp_path, phase):
    log, produced = mixed_log(make_log, scheduler)
    original = {offset: (key, val) for offset, key, val in contents(log)}
    crash_dir = tmp_path / "crash" / log.name

    def snapshot(reached):
        # what a SIGKILL here leaves on disk: the files as they are (written data is in the page cache)
        if reached == phase and not crash_dir.exists():
            shutil.copytree(log.dir, crash_dir)

    assert clean_once(make_cleaner(log, phase=snapshot))
    left = os.listdir(crash_dir)
    assert any(name.endswith(".cleaned") for name in left) == (phase in ("cleaned-partial", "cleaned-written"))
    assert any(name.endswith(".swap") for name in left) == (phase in ("swap-renamed", "old-segments-renamed"))
    if phase in ("old-segments-renamed", "swapped", "checkpointed"):
        assert any(name.endswith(".deleted") for name in left)

    recovered = Log(str(crash_dir), LogConfig(**COMPACT))
    try:
        names = os.listdir(crash_dir)
        assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
        messages = contents(recovered)
        offsets = [offset for offset, _, _ in messages]
        assert offsets == sorted(set(offsets))  # offsets rise: no segment overlaps another
        assert all(original[offset] == (key, val) for offset, key, val in messages)  # nothing invented
        assert last_values(messages) == produced  # nothing lost
        assert recovered.log_end_offset == log.log_end_offset
        assert_index_consistent(recovered)
    finally:
        recovered.close()


def test_a_cleaner_stopped_by_an_error_after_the_swap_was_committed_leaves_it_for_the_next_load(
        make_log, make_cleaner, scheduler):
    log, produced = mixed_log(make_log, scheduler)

    class Killed(BaseException):
        pass

    def die(reached):
        if reached == "swap-renamed":
            raise Killed

    with pytest.raises(Killed):
        clean_once(make_cleaner(log, phase=die))
    assert any(name.endswith(".swap") for name in os.listdir(log.dir))
    reopened = Log(log.dir, LogConfig(**COMPACT))
    try:
        assert last_values(contents(reopened)) == produced
        assert not any(name.endswith((".swap", ".cleaned")) for name in os.listdir(log.dir))
    finally:
        reopened.close()


def test_a_swap_left_by_a_killed_process_replaces_every_segment_it_covers(make_log):
    """By hand, as a process killed right after the rename to .swap leaves it: the .swap of the group of the
    three closed segments beside the three originals, and a .cleaned file of another group begun. 0.8.2
    renamed the .swap over the first segment and kept the other two, whose offsets it also holds
    (KAFKA-2118)."""
    log = make_log(**COMPACT)
    produce(log, 16, keys=5)  # segments 0-4, 5-9, 10-14 and the active one at 15 (k0)
    log.close()
    # what cleaning the three leaves: the last k1..k4 (k0's last is in the active segment)
    swap = b"".join(build_message_set([(f"k{n % 5}".encode(), value(n))], base_offset=n) for n in range(11, 15))
    with open(os.path.join(log.dir, f"{0:020d}.log.swap"), "wb") as f:
        f.write(swap)
    open(os.path.join(log.dir, f"{0:020d}.index.swap"), "wb").close()
    open(os.path.join(log.dir, f"{15:020d}.log.cleaned"), "wb").close()
    reopened = make_log(**COMPACT)
    assert [(offset, val) for offset, _, val in contents(reopened)] == [(n, value(n)) for n in range(11, 16)]
    assert sorted(os.listdir(reopened.dir)) == [f"{b:020d}{s}" for b in (0, 15)
                                                for s in (".index", ".log", ".timeindex")]
    assert_index_consistent(reopened)


# -- where it runs --------------------------------------------------------------------------------------------

def test_the_log_manager_runs_the_cleaner_only_when_enabled_and_stops_it_at_shutdown(tmp_path, clock):
    off = LogManager([str(tmp_path / "a")], clock=clock, cleaner_config=CleanerConfig())
    assert off.cleaner is None
    assert not os.path.exists(tmp_path / "a" / CLEANER_CHECKPOINT_FILE)
    off.shutdown()
    on = LogManager([str(tmp_path / "b")], {"cleanup.policy": "compact"}, clock=clock,
                    cleaner_config=CleanerConfig(**(vars(CLEANER) | {"backoff_ms": 10})))
    assert os.path.exists(tmp_path / "b" / CLEANER_CHECKPOINT_FILE)
    log = on.get_or_create_log("t", 0, LogConfig(**COMPACT))
    assert log.on_truncate is not None
    on.start_cleaner()
    assert on.cleaner.alive_threads == 1
    on.shutdown()
    assert on.cleaner.alive_threads == 0


def test_the_cleaner_thread_compacts_in_the_background(tmp_path, clock, scheduler):
    # the scheduler keeps the replaced segments' files (file.delete.delay.ms) for the reads of this thread
    manager = LogManager([str(tmp_path / "d")], clock=clock, schedule=scheduler,
                         cleaner_config=CleanerConfig(**(vars(CLEANER) | {"backoff_ms": 10})))
    try:
        log = manager.get_or_create_log("t", 0, LogConfig(**COMPACT))
        produced = produce(log, 23, keys=2)
        manager.start_cleaner()
        deadline = time.monotonic() + 30
        while len(contents(log)) > 2 + 3 and time.monotonic() < deadline:  # the 3 active-segment messages stay
            time.sleep(0.01)
        assert len(contents(log)) == 5
        assert last_values(contents(log)) == produced
    finally:
        manager.shutdown()


def test_a_read_that_began_before_a_swap_still_finds_every_segment_it_looked_up(make_log, make_cleaner, scheduler):
    """Fetches read without the log's lock (on the owner thread) while the cleaner thread swaps segments in: a
    read holds the list of base offsets it began with, so every base in it must still lead to a readable
    segment after the swap -- the replaced ones until the owner's next change of the segments."""
    log = make_log(schedule=scheduler, **COMPACT)
    produce(log, 23, keys=2)
    cleaner = make_cleaner(log)
    assert clean_once(cleaner)  # leaves small segments, which the next cleaning groups
    produce(log, 10, keys=2, start=23)
    bases_before = list(log._bases)
    assert clean_once(cleaner)
    assert len(log._bases) < len(bases_before)  # groups of several segments were swapped in as one
    for base in bases_before:
        read = log._segments[base].read(base, None, 1 << 20)
        assert read is None or read.fetch_offset.message_offset == base
    log.roll()  # the owner changes the segments: the replaced ones are forgotten
    assert sorted(log._segments) == log._bases


def test_reads_on_another_thread_meet_swaps_without_failing(make_log, make_cleaner, scheduler):
    import threading

    log = make_log(schedule=scheduler, **(COMPACT | {"segment_bytes": 20 * MESSAGE}))
    produced = produce(log, 300, keys=50)
    thread = threading.Thread(target=clean_once, args=(make_cleaner(log),))
    thread.start()
    try:
        while thread.is_alive():
            messages = contents(log)  # each pass from the log start to its end, through Log.read
            offsets = [offset for offset, _, _ in messages]
            assert offsets == sorted(set(offsets))
            assert last_values(messages) == produced
    finally:
        thread.join()
    assert len(contents(log)) < 300


def test_dump_log_shows_a_compacted_segment_with_its_gaps(make_log, make_cleaner, capsys):
    log = make_log(**COMPACT)
    for key in (b"a", b"b", b"a", b"c", b"a", b"x", b"x", b"x", b"x", b"x", b"y"):
        log.append(keyed((key, b"value")))
    assert clean_once(make_cleaner(log))
    first = log.segments[0]
    assert main(["dump-log", "--files", f"{first.log_path},{first.index.path}", "--print-data-log"]) == 0
    out = capsys.readouterr()
    lines = [line for line in out.out.splitlines() if line.startswith("offset:") and "payloadsize" in line]
    assert [(line.split()[1], line.split()[3]) for line in lines] == [("1", "0"), ("3", "32"), ("4", "64")]
    assert [line.split(" key: ")[1] for line in lines] == ["b payload: value", "c payload: value", "a payload: value"]
    assert "Mismatches in" not in out.err  # the index agrees with the log
    assert "Non-secutive offsets in" in out.err  # as 0.8.2's tool reports the gaps of a compacted segment


def test_the_cleaner_config_comes_from_the_broker_s_log_cleaner_keys():
    from zkbroker.config import KafkaConfig

    broker = KafkaConfig.from_props({"broker.id": "1", "zookeeper.connect": "zk:2181", "log.cleaner.enable": "true",
                                     "log.cleaner.threads": "2", "log.cleaner.backoff.ms": "100",
                                     "log.cleaner.keyless.messages": "discard"})
    config = CleanerConfig.from_broker(broker)
    assert (config.enable_cleaner, config.num_threads, config.backoff_ms) == (True, 2, 100)
    assert config.discard_keyless
    assert config.dedupe_buffer_size == 500 * 1024 * 1024 and config.max_message_size == 1_000_012
    default = KafkaConfig.from_props({"broker.id": "1", "zookeeper.connect": "zk"})
    assert not CleanerConfig.from_broker(default).enable_cleaner


def test_a_cleaning_reports_each_phase_the_fault_point_hold_cleaner_at_can_name(make_log, make_cleaner, scheduler):
    log, _ = mixed_log(make_log, scheduler)
    reached = []
    assert clean_once(make_cleaner(log, phase=reached.append))
    assert set(reached) == set(CLEANER_PHASES) and list(CLEANER_PHASES) == PHASES  # in the order they come


def test_hold_cleaner_at_stops_a_cleaning_at_its_phase_until_released(make_log, make_cleaner, scheduler):
    import threading

    log, produced = mixed_log(make_log, scheduler)
    faults = FaultPoints()
    faults.apply("hold_cleaner_at", phase="swap-renamed")
    cleaner = make_cleaner(log, phase=faults.at_cleaner_phase)
    cleaned = threading.Event()
    thread = threading.Thread(target=lambda: clean_once(cleaner) and cleaned.set())
    thread.start()
    try:
        wait_until = time.monotonic() + 30
        while faults.in_force()[0]["held"] == 0 and time.monotonic() < wait_until:
            time.sleep(0.01)
        assert faults.in_force() == [{"point": "hold_cleaner_at", "phase": "swap-renamed", "held": 1}]
        assert any(name.endswith(".swap") for name in os.listdir(log.dir))  # held right after the rename
        assert not cleaned.is_set()
    finally:
        faults.apply("release_cleaner")
        thread.join(timeout=30)
    assert cleaned.is_set() and faults.in_force() == []
    assert not any(name.endswith((".swap", ".cleaned")) for name in os.listdir(log.dir))
    assert last_values(contents(log)) == produced

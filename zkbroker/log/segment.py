"""LogSegment: one `<base offset>.log` file of message-set entries, its `.index` and `.timeindex` (Kafka's
kafka.log.LogSegment and FileMessageSet).

The base offset, zero-padded to 20 digits, names both files. The .log holds entries exactly as produced
(`offset int64 | size int32 | message`), appended one whole message set per write; before an append whose
segment has taken more than `index.interval.bytes` since the last index entry, the index gets an entry for
the set's first offset (so at most one per set, as in 0.8.2). Finding an offset: the index's largest entry
at or below it, then a forward walk over the entry headers of the .log. The segment also remembers where
its last few appended sets start: a consumer or follower that keeps up fetches from exactly those offsets
(each fetch starts where the log ended when the previous one was answered), and finds them without a walk
or a read. Reads return file ranges, never bytes. `recover` re-validates the file (CRCs via
`message_set.analyze`), rebuilds the indexes and cuts the file at the first torn or corrupt entry.

Entries are messages (magic 0 and 1) or record batches (magic 2): an entry's offset field is a message's offset,
a compressed wrapper's last inner offset, or a batch's base offset, and where an entry's *last* offset is
needed (finding an offset, the log end) a batch adds its lastOffsetDelta. Beyond 0.8.2 (Kafka 0.10.1, KIP-33):
the segment tracks the largest timestamp it holds and the offset that carries it, and keeps the time index by
Kafka's rules (see time_index); `largest_timestamp` (that, or the file's mtime for a segment without
timestamps) is what time-based retention goes by, and `find_offset_by_timestamp` answers ListOffsets. Beyond
that (Kafka 0.11, KIP-98): the `.txnindex` of the aborted transactions whose marker the segment holds (see
transaction_index), truncated, renamed and deleted with it, and rebuilt by the log after `recover`.
"""

from __future__ import annotations

import bisect
import collections
import io
import logging
import os
import struct
from collections.abc import Callable, Iterator

from zkbroker.protocol.fetch_response import FileRange
from zkbroker.protocol.message_set import (
    LOG_OVERHEAD,
    MIN_MESSAGE_SIZE,
    BatchInfo,
    InvalidMessageError,
    analyze,
    control_marker,
    entry_starts,
    iter_messages,
)
from zkbroker.protocol.record_batch import CONTROL, read_header

from .fetch_data import FetchDataInfo, LogOffsetMetadata
from .offset_index import OffsetIndex
from .time_index import NO_TIMESTAMP, TIME_INDEX_SUFFIX, TimeIndex, TimestampOffset
from .transaction_index import TransactionIndex, transaction_index_filename

logger = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
DELETED_SUFFIX = ".deleted"  # a segment scheduled for deletion
CLEANED_SUFFIX = ".cleaned"  # a segment the log cleaner was writing
SWAP_SUFFIX = ".swap"  # a cleaned segment being swapped in

_HEADER = struct.Struct(">qi")  # offset, size
_HEADER_ATTRIBUTES = struct.Struct(">qi4xxb")  # offset, size, (crc, magic), attributes
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_HEAD = 27  # bytes of an entry that say its last offset: a batch's lastOffsetDelta ends at byte 27
_BATCH_LAST_OFFSET_DELTA_AT = 23
_BATCH_ATTRIBUTES_AT = 21
_BATCH_MAX_TIMESTAMP_AT = 35
_MESSAGE_TIMESTAMP_AT = 18
_CODEC_MASK = 0x07
_SEARCH_CHUNK = 8 * 1024  # first read of a header walk; doubled per read up to _MAX_CHUNK
_MAX_CHUNK = 256 * 1024
_RECOVERY_CHUNK = 8 * 1024 * 1024
_RECENT_SETS = 16  # appended sets whose start positions a segment remembers
_CONTROL_BATCH_HEAD = 256  # bytes of each entry a replay walk reads: a whole control batch, usually

Clock = Callable[[], int]  # milliseconds since the epoch


class CorruptLogError(RuntimeError):
    """A .log file holds an entry header no writer produced: it changed under the broker after recovery."""


def filename_prefix(offset: int) -> str:
    """A segment's file name without suffix: its base offset zero-padded to 20 digits, so ls sorts numerically."""
    return f"{offset:020d}"


def log_filename(directory: str, offset: int) -> str:
    return os.path.join(directory, filename_prefix(offset) + LOG_SUFFIX)


def index_filename(directory: str, offset: int) -> str:
    return os.path.join(directory, filename_prefix(offset) + INDEX_SUFFIX)


def time_index_filename(directory: str, offset: int) -> str:
    return os.path.join(directory, filename_prefix(offset) + TIME_INDEX_SUFFIX)


def _entry_last_offset(buf: bytes, at: int, n: int) -> int | None:
    """The last offset of the entry whose header starts at `at` of `buf` (n bytes): its offset field, plus a
    batch's lastOffsetDelta; None if `buf` ends before the bytes that say it."""
    if at + 17 > n:
        return None
    (offset,) = _INT64.unpack_from(buf, at)
    if buf[at + 16] == 2:
        if at + _HEAD > n:
            return None
        offset += _INT32.unpack_from(buf, at + _BATCH_LAST_OFFSET_DELTA_AT)[0]
    return offset


def _highest_magic(view: memoryview) -> int:
    return max((view[pos + 16] for pos in entry_starts(view)), default=-1)


def _holds_zstd(view: memoryview) -> bool:
    """Whether a set holds a record batch compressed with zstd."""
    return any(view[pos + 16] == 2 and view[pos + _BATCH_ATTRIBUTES_AT + 1] & _CODEC_MASK == 4
               for pos in entry_starts(view))


def _entry_max_timestamp(buf: bytes, at: int) -> int:
    """The largest timestamp an entry carries: a magic-1 message's (a wrapper's, for a compressed set), a batch's
    maxTimestamp; NO_TIMESTAMP for magic 0. The entry's first 43 bytes must be in `buf`."""
    magic = buf[at + 16]
    if magic == 2:
        return _INT64.unpack_from(buf, at + _BATCH_MAX_TIMESTAMP_AT)[0]
    if magic == 1:
        return _INT64.unpack_from(buf, at + _MESSAGE_TIMESTAMP_AT)[0]
    return NO_TIMESTAMP


class LogSegment:
    """The .log and .index of the segment starting at `base_offset` in `directory` (created if absent), with
    `suffix` after both names for a segment being built (the log cleaner's `.cleaned`).

    Not thread-safe: one thread appends and reads; `flush` may run on another.
    """

    def __init__(
        self,
        directory: str,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        roll_jitter_ms: int = 0,
        clock: Clock,
        suffix: str = "",
    ) -> None:
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self._clock = clock
        self.log_path = log_filename(directory, base_offset) + suffix
        # Unbuffered and O_APPEND: each append is one write(2) at the end; reads use pread and sendfile.
        self._file = io.FileIO(self.log_path, "a+")
        self._size = os.fstat(self._file.fileno()).st_size
        self.index = OffsetIndex(index_filename(directory, base_offset) + suffix, base_offset, max_index_size)
        self.time_index = TimeIndex(time_index_filename(directory, base_offset) + suffix, base_offset, max_index_size)
        self.txn_index = TransactionIndex(transaction_index_filename(directory, base_offset) + suffix)
        self.created = clock()
        self._bytes_since_last_index_entry = 0
        # The largest timestamp in the segment and the offset carrying it; None until loaded from the time index
        # and the tail of the log after its last entry (Kafka's loadLargestTimestamp), on first use.
        self._max_timestamp: TimestampOffset | None = None if self._size else TimestampOffset(NO_TIMESTAMP, -1)
        # The highest magic the segment holds and whether it holds a zstd batch: what decides whether a fetch
        # of an old version must be converted; None until walked for, on first use.
        self._format: tuple[int, bool] | None = None if self._size else (-1, False)
        # (first offset, last offset of the first entry, position) of the last sets appended, ascending: the
        # first entry reaching that first offset is that entry (its last offset is larger for a compressed
        # wrapper or a batch).
        self._recent_sets: collections.deque[tuple[int, int, int]] = collections.deque(maxlen=_RECENT_SETS)
        # Whether the last `recover` met a control batch: then its transaction index must be rebuilt.
        self.holds_control_batches = False

    # -- state --------------------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Bytes in the .log file."""
        return self._size

    @property
    def file(self) -> io.FileIO:
        """The open .log file: what file ranges refer to."""
        return self._file

    @property
    def last_modified(self) -> int:
        """The .log file's mtime in ms: what retention and ListOffsets go by in 0.8.2."""
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    def set_last_modified(self, ms: int) -> None:
        for path in (self.log_path, self.index.path, self.time_index.path):
            os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))
        if os.path.exists(self.txn_index.path):
            os.utime(self.txn_index.path, ns=(ms * 1_000_000, ms * 1_000_000))

    @property
    def max_timestamp(self) -> TimestampOffset:
        """(largest timestamp of the segment's messages, the offset that carries it); NO_TIMESTAMP if none has one."""
        if self._max_timestamp is None:
            self._max_timestamp = self._load_max_timestamp()
        return self._max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """What time-based retention and ListOffsets by time go by (Kafka 0.10.1): the largest timestamp, or the
        .log file's mtime when no message has one (magic 0: 0.8.2's rule)."""
        timestamp = self.max_timestamp.timestamp
        return timestamp if timestamp >= 0 else self.last_modified

    @property
    def format(self) -> tuple[int, bool]:
        """(the highest magic among the segment's entries, whether a record batch of it is compressed with zstd)."""
        if self._format is None:
            magic, zstd = -1, False
            for buf, at, _, _ in self._walk_headers(0, _BATCH_ATTRIBUTES_AT + 2):
                magic = max(magic, buf[at + 16])
                zstd = zstd or (buf[at + 16] == 2 and buf[at + _BATCH_ATTRIBUTES_AT + 1] & _CODEC_MASK == 4)
            self._format = (magic, zstd)
        return self._format

    def _load_max_timestamp(self) -> TimestampOffset:
        best = self.time_index.last_entry
        if best.timestamp < 0:
            best = TimestampOffset(NO_TIMESTAMP, -1)
        _, position = self.index.lookup(max(best.offset, self.base_offset))
        for buf, at, _, last_offset in self._walk_headers(position, 43):
            timestamp = _entry_max_timestamp(buf, at)
            if timestamp > best.timestamp:
                best = TimestampOffset(timestamp, last_offset)
        return best

    # -- appending ----------------------------------------------------------------------------------------

    def append(
        self,
        first_offset: int,
        records: bytes | bytearray | memoryview,
        max_timestamp: int = NO_TIMESTAMP,
        offset_of_max_timestamp: int = -1,
    ) -> None:
        """Append a validated message set whose offsets are assigned and start at `first_offset`; its largest
        timestamp and the offset carrying it feed the time index."""
        view = memoryview(records)
        if not view.nbytes:
            return
        position = self._size
        try:
            written = self._file.write(view)
            while written < view.nbytes:  # a regular file takes everything in one write unless the disk is full
                written += self._file.write(view[written:])
        except OSError:
            os.ftruncate(self._file.fileno(), position)  # no partial set stays behind to shift later positions
            raise
        if max_timestamp > self.max_timestamp.timestamp:
            self._max_timestamp = TimestampOffset(max_timestamp, offset_of_max_timestamp)
        if self._format is not None:
            magic, zstd = self._format
            self._format = (max(magic, _highest_magic(view)), zstd or _holds_zstd(view))
        # (an active segment with a full index rolls before this; a cleaned one just stops indexing)
        if self._bytes_since_last_index_entry > self.index_interval_bytes and not self.index.is_full:
            self.index.append(first_offset, position)
            if self.max_timestamp.timestamp >= 0:
                self.time_index.maybe_append(*self.max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._recent_sets.append((first_offset, _entry_last_offset(view, 0, len(view)), position))
        self._size += written
        self._bytes_since_last_index_entry += written

    # -- finding offsets ----------------------------------------------------------------------------------

    def translate_offset(self, offset: int, starting_position: int = 0) -> tuple[int, int] | None:
        """(last offset, position) of the first entry whose last offset is at least `offset` -- the entry that
        holds `offset`, or the first after it -- or None if there is none.

        `starting_position` is a known position at or before that entry, to skip part of the walk.
        """
        _, position = self.index.lookup(offset)
        position = max(position, starting_position)
        for first_offset, entry_offset, set_position in reversed(self._recent_sets):
            if first_offset <= offset:
                if first_offset == offset:
                    return entry_offset, set_position
                # every entry before the set is below its first offset, so below `offset`: walk from there
                position = max(position, set_position)
                break
        return self._search_for(offset, position)

    def _walk_headers(self, position: int, head: int = _HEAD):
        """(buffer, index in it, position in the file, last offset) of each complete entry from `position` (an
        entry boundary) to the end of the file, with at least `head` bytes of each entry (or all of it) in the
        buffer. The walk reads chunks, doubling them up to _MAX_CHUNK."""
        size = self._size
        fd = self._file.fileno()
        chunk = _SEARCH_CHUNK
        while position + LOG_OVERHEAD < size:
            buf = os.pread(fd, min(chunk, size - position), position)
            n = len(buf)
            at = 0
            while at + LOG_OVERHEAD <= n:
                (message_size,) = _INT32.unpack_from(buf, at + 8)
                if message_size < MIN_MESSAGE_SIZE[0]:
                    raise CorruptLogError(
                        f"Invalid message size {message_size} at byte {position + at} of {self.log_path}"
                    )
                end = at + LOG_OVERHEAD + message_size
                if position + at + LOG_OVERHEAD + message_size > size:
                    return  # a torn entry at the end of the file
                if at + min(head, LOG_OVERHEAD + message_size) > n:
                    break  # the next chunk holds it
                yield buf, at, position + at, _entry_last_offset(buf, at, n)
                at = end
            if at == 0:
                chunk = max(chunk, head)
            position += at
            chunk = min(chunk * 2, _MAX_CHUNK)

    def _search_for(self, target: int, position: int) -> tuple[int, int] | None:
        """Walk entry headers from `position` (an entry boundary) to the first entry whose last offset >= target."""
        size = self._size
        fd = self._file.fileno()
        chunk = _SEARCH_CHUNK
        while position + LOG_OVERHEAD < size:
            buf = os.pread(fd, min(chunk, size - position), position)
            n = len(buf)
            at = 0
            while (offset := _entry_last_offset(buf, at, n)) is not None:
                (message_size,) = _INT32.unpack_from(buf, at + 8)
                if offset >= target:
                    return offset, position + at
                if message_size < MIN_MESSAGE_SIZE[0]:
                    raise CorruptLogError(
                        f"Invalid message size {message_size} at byte {position + at} of {self.log_path}"
                    )
                step = LOG_OVERHEAD + message_size
                run = _uniform_run(buf, at, step, n - _HEAD)
                if run > 1:
                    # Last offsets rise from entry to entry (appends and recovery enforce it): bisect the run.
                    k = bisect.bisect_left(range(run), target, key=lambda k: _entry_last_offset(buf, at + k * step, n))
                    if k < run:
                        return _entry_last_offset(buf, at + k * step, n), position + at + k * step
                    at += run * step
                else:
                    at += step
            if at == 0 and n == size - position:
                return None  # a torn entry at the end of the file
            position += at
            chunk = min(chunk * 2, _MAX_CHUNK)
        return None

    def read(self, start_offset: int, max_offset: int | None, max_size: int) -> FetchDataInfo | None:
        """The range from the first entry at or above `start_offset`: at most `max_size` bytes, and ending
        before the first entry at or above `max_offset` (exclusive) if given. None if no entry is at or
        above `start_offset`."""
        if max_size < 0:
            raise ValueError(f"Invalid max size for log read ({max_size})")
        log_size = self._size  # appends may follow; the range stays within what exists now
        start = self.translate_offset(start_offset)
        if start is None:
            return None
        start_position = start[1]
        metadata = LogOffsetMetadata(start_offset, self.base_offset, start_position)
        if max_size == 0:
            return FetchDataInfo(metadata, FileRange(self._file, start_position, 0))
        end_position = log_size
        if max_offset is not None:
            if max_offset < start_offset:
                raise ValueError(
                    f"Attempt to read with a maximum offset ({max_offset}) less than the start offset "
                    f"({start_offset})."
                )
            end = self.translate_offset(max_offset, start_position)
            if end is not None:
                end_position = end[1]
        length = min(end_position - start_position, max_size)
        return FetchDataInfo(metadata, FileRange(self._file, start_position, length))

    def next_offset(self) -> int:
        """The offset after the last complete entry: a walk from the last index entry to the end."""
        _, position = self.index.lookup(self.index.last_offset)
        last = self.base_offset - 1
        for _, _, _, entry_last in self._walk_headers(position):
            last = entry_last
        return last + 1

    def record_batches(self, start_offset: int) -> Iterator[BatchInfo]:
        """What the headers of the record batches from `start_offset` on say, and a control batch's marker (the
        producer state's replay)."""
        found = self.translate_offset(start_offset)
        if found is None:
            return
        fd = self._file.fileno()
        for buf, at, position, _ in self._walk_headers(found[1], _CONTROL_BATCH_HEAD):
            if buf[at + 16] == 2:
                h = read_header(buf, at)
                info = BatchInfo(h.base_offset, h.last_offset, h.partition_leader_epoch, h.producer_id,
                                 h.producer_epoch, h.base_sequence, h.last_sequence, h.max_timestamp,
                                 h.is_transactional)
                if h.attributes & CONTROL:
                    whole = buf[at : at + h.size]
                    if len(whole) < h.size:
                        whole = os.pread(fd, h.size, position)
                    info = info._replace(control=True, end_txn_marker=control_marker(memoryview(whole), 0, h.size, h))
                yield info

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int = 0) -> TimestampOffset | None:
        """The first message at or after `timestamp` with an offset at or above `starting_offset`: (its timestamp,
        its offset), or None (Kafka's LogSegment.findOffsetByTimestamp). From the time index's largest entry at
        or below the timestamp, the first entry whose largest timestamp reaches it is opened and its messages
        looked at in order."""
        entry = self.time_index.lookup(timestamp)
        _, position = self.index.lookup(max(entry.offset, starting_offset))
        fd = self._file.fileno()
        for buf, at, file_position, last_offset in self._walk_headers(position, 43):
            if last_offset < starting_offset or _entry_max_timestamp(buf, at) < timestamp:
                continue
            (size,) = _INT32.unpack_from(buf, at + 8)
            whole = buf[at : at + LOG_OVERHEAD + size]
            if len(whole) < LOG_OVERHEAD + size:
                whole = os.pread(fd, LOG_OVERHEAD + size, file_position)
            for message in iter_messages(whole, verify_crc=False, control=True):  # a marker has its time too
                if message.timestamp >= timestamp and message.offset >= starting_offset:
                    return TimestampOffset(message.timestamp, message.offset)
        return None

    # -- recovery -----------------------------------------------------------------------------------------

    def recover(self, max_message_size: int, leader_epochs: list[tuple[int, int]] | None = None,
                before_cut: Callable[[], None] | None = None) -> int:
        """Re-validate the whole .log, rebuild both indexes and the largest timestamp, and cut the file at the
        first entry that is torn, fails its CRC, is larger than `max_message_size`, or does not have an offset
        above the previous one. Returns the number of bytes cut. The (partition leader epoch, base offset) of each
        record batch kept are added to `leader_epochs`, for the leader-epoch cache (Kafka rebuilds it so).
        `before_cut` runs first when there is something to cut (a log deletes the segments after this one then,
        so that a crash before the cut leaves no hole in the offsets).

        Index entries go where 0.8.2's recovery put them: at the first entry more than index.interval.bytes
        past the previous index entry. For a compressed entry 0.8.2 decompressed it to index its first inner
        offset; we index the offset after the previous entry's, which is the same offset in a log whose
        offsets are consecutive and a valid lower bound in any log.
        """
        for index in (self.index, self.time_index):
            index.truncate()
            index.resize(index.max_index_size)
        self.txn_index.reset()  # the log rebuilds it when the segment holds control batches
        file_size = os.fstat(self._file.fileno()).st_size
        fd = self._file.fileno()
        state = _RecoveryWalk(self.base_offset, self.index, self.time_index, self.index_interval_bytes,
                              max_message_size)
        position = 0
        chunk = _RECOVERY_CHUNK
        problem = None
        while position < file_size:
            buf = os.pread(fd, min(chunk, file_size - position), position)
            try:
                valid = analyze(buf).valid_bytes
            except InvalidMessageError as e:
                # its text ends with the position within this chunk; the warning gives the file position
                valid, problem = e.position, str(e).rsplit(" (message at byte", 1)[0]
            walked, walk_problem = state.walk(buf, valid, position)
            position += walked
            problem = walk_problem or problem
            if problem:
                break
            if walked == 0:  # no complete entry in the chunk: a torn tail, or one entry larger than the chunk
                if len(buf) < LOG_OVERHEAD:
                    problem = "torn entry header at the end of the file"
                    break
                _, message_size = _HEADER.unpack_from(buf, 0)
                if message_size > max_message_size:
                    problem = _too_large(message_size, max_message_size)
                    break
                if position + LOG_OVERHEAD + message_size > file_size:
                    problem = f"torn message of {message_size} bytes at the end of the file"
                    break
                chunk = LOG_OVERHEAD + message_size
            else:
                chunk = _RECOVERY_CHUNK
        truncated = file_size - position
        if truncated:
            if before_cut is not None:
                before_cut()
            logger.warning(
                "Found invalid messages in log segment %s at byte offset %d: %s.",
                os.path.abspath(self.log_path), position, problem or "torn message at the end of the file",
            )
            self._truncate_file(position)
        self._size = position
        self._bytes_since_last_index_entry = position - state.last_index_position
        self._max_timestamp = state.max_timestamp
        self._format = None  # walked again when asked for
        self.index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        if leader_epochs is not None:
            leader_epochs += state.epochs
        self.holds_control_batches = state.control_batches
        return truncated

    # -- truncation ---------------------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove the entries at or above `offset` from the .log and the indexes; returns the bytes removed.
        An `offset` inside a compressed set or a batch cuts the whole entry."""
        mapping = self.translate_offset(offset)
        if mapping is None:
            return 0
        self.index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        # `offset` inside a compressed set cuts the whole set, and with it an entry for one of its inner offsets
        self.index.truncate_to_position(mapping[1])
        truncated = self._size - mapping[1]
        self._truncate_file(mapping[1])
        # the first offset cut: the time index keeps the entries below it
        _, position = self.index.lookup(self.index.last_offset)
        kept_last = self.base_offset - 1
        for _, _, _, entry_last in self._walk_headers(position):
            kept_last = entry_last
        self.time_index.truncate_to(kept_last + 1)
        # the segment may become the active one again: give its indexes room to grow
        self.index.resize(self.index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        if self._size == 0:
            self.created = self._clock()
        self._bytes_since_last_index_entry = 0
        self._max_timestamp = None  # loaded again from what remains
        self._format = None
        return truncated

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int):
        """The aborted transactions of this segment's index overlapping [fetch_offset, upper_bound_offset), and
        whether later segments need no look (see TransactionIndex.collect_abortable)."""
        if not self.txn_index.entries:
            return [], False
        return self.txn_index.collect_abortable(fetch_offset, upper_bound_offset)

    def _truncate_file(self, size: int) -> None:
        os.ftruncate(self._file.fileno(), size)
        self._size = size
        self._recent_sets.clear()

    # -- files --------------------------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the .log and the indexes (from any thread: a segment deleted meanwhile is skipped)."""
        try:
            os.fsync(self._file.fileno())
        except (ValueError, OSError):
            if self._file.closed:  # deleted meanwhile by another thread
                return
            raise
        self.index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def on_become_inactive(self) -> None:
        """At roll (and close): the time index gets the segment's largest timestamp as its last entry, and both
        indexes are trimmed to their entries (Kafka's onBecomeInactiveSegment)."""
        if self.max_timestamp.timestamp >= 0:
            self.time_index.maybe_append(*self.max_timestamp, skip_full_check=True)
        self.index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def close(self) -> None:
        """Flush, trim the indexes to their entries, and close the files."""
        if self._file.closed:
            return
        if self._size and self._max_timestamp is not None:
            self.time_index.maybe_append(*self._max_timestamp, skip_full_check=True)
        self.flush()
        self.index.close()
        self.time_index.close()
        self.txn_index.close()
        self._file.close()

    def close_files(self) -> None:
        """Close the files without flushing or trimming (a segment already renamed for deletion)."""
        self.index.release()
        self.time_index.release()
        self.txn_index.close()
        self._file.close()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the files, e.g. from `.log` to `.log.deleted`; the open file handles follow."""
        log_path = _replace_suffix(self.log_path, old_suffix, new_suffix)
        os.rename(self.log_path, log_path)
        self.log_path = log_path
        self.index.rename(_replace_suffix(self.index.path, old_suffix, new_suffix))
        self.time_index.rename(_replace_suffix(self.time_index.path, old_suffix, new_suffix))
        self.txn_index.rename(_replace_suffix(self.txn_index.path, old_suffix, new_suffix))

    def delete(self) -> None:
        """Close and remove the files."""
        self._file.close()
        self.index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        try:
            os.remove(self.log_path)
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return f"LogSegment(baseOffset={self.base_offset}, size={self._size})"


class _RecoveryWalk:
    """The header walk of `LogSegment.recover` over validated bytes: size and offset checks, index and time index
    entries, the largest timestamp, and the leader epochs of record batches."""

    def __init__(
        self, base_offset: int, index: OffsetIndex, time_index: TimeIndex, interval: int, max_message_size: int
    ) -> None:
        self.index = index
        self.time_index = time_index
        self.interval = interval
        self.max_message_size = max_message_size
        self.last_offset = base_offset - 1
        self.last_index_position = 0
        self.max_timestamp = TimestampOffset(NO_TIMESTAMP, -1)
        self.epochs: list[tuple[int, int]] = []  # (partition leader epoch, base offset) of each batch
        self.control_batches = False  # whether a control batch was seen (the transaction index needs a rebuild)

    def walk(self, buf: bytes, valid: int, file_position: int) -> tuple[int, str | None]:
        """Walk the complete entries in buf[:valid]; returns the bytes accepted and the problem that stopped
        the walk early, if any."""
        at = 0
        while at + LOG_OVERHEAD <= valid:
            offset, size, attributes = _HEADER_ATTRIBUTES.unpack_from(buf, at)
            if size > self.max_message_size:
                return at, _too_large(size, self.max_message_size)
            if offset <= self.last_offset:
                return at, f"offset {offset} is not above the previous offset {self.last_offset}"
            magic = buf[at + 16]
            last = _entry_last_offset(buf, at, valid)
            timestamp = _entry_max_timestamp(buf, at)
            if timestamp > self.max_timestamp.timestamp:
                self.max_timestamp = TimestampOffset(timestamp, last)
            if magic == 2:
                first = offset
                self.epochs.append((_INT32.unpack_from(buf, at + 12)[0], offset))
                if buf[at + _BATCH_ATTRIBUTES_AT + 1] & CONTROL:
                    self.control_batches = True
            else:
                first = offset if attributes & _CODEC_MASK == 0 else self.last_offset + 1
            position = file_position + at
            if position - self.last_index_position > self.interval and not self.index.is_full:
                self.index.append(first, position)
                if self.max_timestamp.timestamp >= 0 and not self.time_index.is_full:
                    self.time_index.maybe_append(*self.max_timestamp)
                self.last_index_position = position
            self.last_offset = last
            at += LOG_OVERHEAD + size
        return at, None


def last_offset_in_file(path: str) -> int | None:
    """The last offset of the last complete entry of a .log file (a swap the cleaner left behind), by a walk over
    the entry headers; None if it holds none."""
    last = None
    with open(path, "rb") as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        position = 0
        chunk = _SEARCH_CHUNK
        while position + LOG_OVERHEAD <= size:
            buf = os.pread(fd, min(chunk, size - position), position)
            at = 0
            while at + LOG_OVERHEAD <= len(buf):
                offset, message_size = _HEADER.unpack_from(buf, at)
                if message_size < MIN_MESSAGE_SIZE[0] or position + at + LOG_OVERHEAD + message_size > size:
                    return last
                entry_last = _entry_last_offset(buf, at, len(buf))  # a record batch's last offset, not its base
                if entry_last is None:
                    break  # the batch header runs past this chunk: the next read starts at it
                last = entry_last
                at += LOG_OVERHEAD + message_size
            position += at
            chunk = min(chunk * 2, _MAX_CHUNK)
    return last


def _uniform_run(buf: bytes, at: int, step: int, last: int) -> int:
    """How many entries from `at`, each `step` bytes long as the one at `at` is, with headers starting at or
    before `last`: 1 unless that is worth a look (16 or more fit). Producers often send values of one size,
    and then this replaces a walk of a Python loop over every header -- up to a whole message set, as the
    index has at most one entry per set -- by four strided slices compared in C: if every entry's size field
    says `step`, the entries' boundaries are certain."""
    fits = (last - at) // step + 1
    if fits < 16:
        return 1
    run = fits
    span = (fits - 1) * step + 1
    for field in range(at + 8, at + 12):  # the four bytes of the size field
        column = buf[field : field + span : step]
        run = min(run, fits - len(column.lstrip(column[:1])))
    return run


def _too_large(size: int, max_message_size: int) -> str:
    return f"message size {size} exceeds the largest allowable message size ({max_message_size})"


def _replace_suffix(path: str, old: str, new: str) -> str:
    if not path.endswith(old):
        raise ValueError(f"Expected string to end with '{old}' but string is '{path}'")
    return path[: len(path) - len(old)] + new

"""LogSegment: one `<base offset>.log` file of message-set entries and its `.index` (Kafka's kafka.log.LogSegment
and FileMessageSet).

The base offset, zero-padded to 20 digits, names both files. The .log holds entries exactly as produced
(`offset int64 | size int32 | message`), appended one whole message set per write; before an append whose
segment has taken more than `index.interval.bytes` since the last index entry, the index gets an entry for
the set's first offset (so at most one per set, as in 0.8.2). Finding an offset: the index's largest entry
at or below it, then a forward walk over the entry headers of the .log. The segment also remembers where
its last few appended sets start: a consumer or follower that keeps up fetches from exactly those offsets
(each fetch starts where the log ended when the previous one was answered), and finds them without a walk
or a read. Reads return file ranges, never bytes. `recover` re-validates the file (CRCs via
`message_set.analyze`), rebuilds the index and cuts the file at the first torn or corrupt entry.
"""

from __future__ import annotations

import bisect
import collections
import io
import logging
import os
import struct
from collections.abc import Callable

from zkbroker.protocol.fetch_response import FileRange
from zkbroker.protocol.message_set import LOG_OVERHEAD, MIN_MESSAGE_SIZE, InvalidMessageError, analyze

from .fetch_data import FetchDataInfo, LogOffsetMetadata
from .offset_index import OffsetIndex

logger = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
DELETED_SUFFIX = ".deleted"  # a segment scheduled for deletion
CLEANED_SUFFIX = ".cleaned"  # a segment the log cleaner was writing
SWAP_SUFFIX = ".swap"  # a cleaned segment being swapped in

_HEADER = struct.Struct(">qi")  # offset, size
_HEADER_ATTRIBUTES = struct.Struct(">qi4xxb")  # offset, size, (crc, magic), attributes
_CODEC_MASK = 0x07
_SEARCH_CHUNK = 8 * 1024  # first read of a header walk; doubled per read up to _MAX_CHUNK
_MAX_CHUNK = 256 * 1024
_RECOVERY_CHUNK = 8 * 1024 * 1024
_RECENT_SETS = 16  # appended sets whose start positions a segment remembers

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
        self.created = clock()
        self._bytes_since_last_index_entry = 0
        # (first offset, offset of the first entry, position) of the last sets appended, ascending: the first
        # entry at or above that first offset is that entry (its offset is larger for a compressed wrapper).
        self._recent_sets: collections.deque[tuple[int, int, int]] = collections.deque(maxlen=_RECENT_SETS)

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
        for path in (self.log_path, self.index.path):
            os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))

    # -- appending ----------------------------------------------------------------------------------------

    def append(self, first_offset: int, records: bytes | bytearray | memoryview) -> None:
        """Append a validated message set whose offsets are assigned and start at `first_offset`."""
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
        # (an active segment with a full index rolls before this; a cleaned one just stops indexing)
        if self._bytes_since_last_index_entry > self.index_interval_bytes and not self.index.is_full:
            self.index.append(first_offset, position)
            self._bytes_since_last_index_entry = 0
        self._recent_sets.append((first_offset, _HEADER.unpack_from(view)[0], position))
        self._size += written
        self._bytes_since_last_index_entry += written

    # -- finding offsets ----------------------------------------------------------------------------------

    def translate_offset(self, offset: int, starting_position: int = 0) -> tuple[int, int] | None:
        """(offset, position) of the first entry whose offset is at least `offset`, or None if there is none.

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

    def _search_for(self, target: int, position: int) -> tuple[int, int] | None:
        """Walk entry headers from `position` (an entry boundary) to the first offset >= target."""
        size = self._size
        fd = self._file.fileno()
        chunk = _SEARCH_CHUNK
        while position + LOG_OVERHEAD < size:
            buf = os.pread(fd, min(chunk, size - position), position)
            n = len(buf)
            # the last header start to look at: one whose 12 bytes lie in buf and which is not the file's end
            last = n - LOG_OVERHEAD - (1 if position + n == size else 0)
            at = 0
            while at <= last:
                offset, message_size = _HEADER.unpack_from(buf, at)
                if offset >= target:
                    return offset, position + at
                if message_size < MIN_MESSAGE_SIZE[0]:
                    raise CorruptLogError(
                        f"Invalid message size {message_size} at byte {position + at} of {self.log_path}"
                    )
                step = LOG_OVERHEAD + message_size
                run = _uniform_run(buf, at, step, last)
                if run > 1:
                    # Offsets rise from entry to entry (appends and recovery enforce it): bisect the run.
                    k = bisect.bisect_left(range(run), target, key=lambda k: _HEADER.unpack_from(buf, at + k * step)[0])
                    if k < run:
                        return _HEADER.unpack_from(buf, at + k * step)[0], position + at + k * step
                    at += run * step
                else:
                    at += step
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
        fd = self._file.fileno()
        size = self._size
        chunk = _SEARCH_CHUNK
        while position + LOG_OVERHEAD <= size:
            buf = os.pread(fd, min(chunk, size - position), position)
            n = len(buf)
            at = 0
            while at + LOG_OVERHEAD <= n:
                offset, message_size = _HEADER.unpack_from(buf, at)
                end = position + at + LOG_OVERHEAD + message_size
                if message_size < MIN_MESSAGE_SIZE[0] or end > size:
                    return last + 1
                last = offset
                at += LOG_OVERHEAD + message_size
            position += at
            chunk = min(chunk * 2, _MAX_CHUNK)
        return last + 1

    # -- recovery -----------------------------------------------------------------------------------------

    def recover(self, max_message_size: int, before_cut: Callable[[], None] | None = None) -> int:
        """Re-validate the whole .log, rebuild the index, and cut the file at the first entry that is torn,
        fails its CRC, is larger than `max_message_size`, or does not have an offset above the previous one.
        Returns the number of bytes cut. `before_cut` runs first when there is something to cut (a log deletes
        the segments after this one then, so that a crash before the cut leaves no hole in the offsets).

        Index entries go where 0.8.2's recovery put them: at the first entry more than index.interval.bytes
        past the previous index entry. For a compressed entry 0.8.2 decompressed it to index its first inner
        offset; we index the offset after the previous entry's, which is the same offset in a log whose
        offsets are consecutive and a valid lower bound in any log.
        """
        self.index.truncate()
        self.index.resize(self.index.max_index_size)
        file_size = os.fstat(self._file.fileno()).st_size
        fd = self._file.fileno()
        state = _RecoveryWalk(self.base_offset, self.index, self.index_interval_bytes, max_message_size)
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
        self.index.trim_to_valid_size()
        return truncated

    # -- truncation ---------------------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove the entries at or above `offset` from the .log and the index; returns the bytes removed."""
        mapping = self.translate_offset(offset)
        if mapping is None:
            return 0
        self.index.truncate_to(offset)
        # `offset` inside a compressed set cuts the whole set, and with it an entry for one of its inner offsets
        self.index.truncate_to_position(mapping[1])
        # the segment may become the active one again: give its index room to grow
        self.index.resize(self.index.max_index_size)
        truncated = self._size - mapping[1]
        self._truncate_file(mapping[1])
        if self._size == 0:
            self.created = self._clock()
        self._bytes_since_last_index_entry = 0
        return truncated

    def _truncate_file(self, size: int) -> None:
        os.ftruncate(self._file.fileno(), size)
        self._size = size
        self._recent_sets.clear()

    # -- files --------------------------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the .log and the index (from any thread: a segment deleted meanwhile is skipped)."""
        try:
            os.fsync(self._file.fileno())
        except (ValueError, OSError):
            if self._file.closed:  # deleted meanwhile by another thread
                return
            raise
        self.index.flush()

    def close(self) -> None:
        """Flush, trim the index to its entries, and close both files."""
        if self._file.closed:
            return
        self.flush()
        self.index.close()
        self._file.close()

    def close_files(self) -> None:
        """Close both files without flushing or trimming (a segment already renamed for deletion)."""
        self.index.release()
        self._file.close()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename both files, e.g. from `.log` to `.log.deleted`; the open file handles follow."""
        log_path = _replace_suffix(self.log_path, old_suffix, new_suffix)
        os.rename(self.log_path, log_path)
        self.log_path = log_path
        self.index.rename(_replace_suffix(self.index.path, old_suffix, new_suffix))

    def delete(self) -> None:
        """Close and remove both files."""
        self._file.close()
        self.index.delete()
        try:
            os.remove(self.log_path)
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return f"LogSegment(baseOffset={self.base_offset}, size={self._size})"


class _RecoveryWalk:
    """The header walk of `LogSegment.recover` over validated bytes: size and offset checks, index entries."""

    def __init__(self, base_offset: int, index: OffsetIndex, interval: int, max_message_size: int) -> None:
        self.index = index
        self.interval = interval
        self.max_message_size = max_message_size
        self.last_offset = base_offset - 1
        self.last_index_position = 0

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
            position = file_position + at
            if position - self.last_index_position > self.interval and not self.index.is_full:
                first = offset if attributes & _CODEC_MASK == 0 else self.last_offset + 1
                self.index.append(first, position)
                self.last_index_position = position
            self.last_offset = offset
            at += LOG_OVERHEAD + size
        return at, None


def last_offset_in_file(path: str) -> int | None:
    """The offset of the last complete entry of a .log file (a swap the cleaner left behind), by a walk over
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
                last = offset
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

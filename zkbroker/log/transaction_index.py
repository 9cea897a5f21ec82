"""TransactionIndex: a segment's `.txnindex`, the aborted transactions whose ABORT marker lies in the segment
(Kafka 0.11's kafka.log.TransactionIndex, KIP-98).

A read_committed Fetch answers, beside the records, the aborted transactions that overlap them, so that the
consumer drops their records; this index is where the leader finds them without reading the log. Each entry
is Kafka's AbortedTxn, 34 bytes::

    version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 | lastStableOffset int64

firstOffset is the transaction's first record, lastOffset its ABORT marker, lastStableOffset the partition's
LSO once the marker was written (a search may stop at an entry whose LSO is past the fetched range: nothing
aborted later began inside it). Entries are appended in marker order. The file is created by the first entry
(segments without aborts have none) and rebuilt by recovery from the log; the entries are also kept in memory,
so a fetch never reads the file.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from zkbroker.fsync import fsync_path

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
_VERSION = 0


class CorruptIndexError(ValueError):
    """A .txnindex whose size or entries no writer produced."""


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(_VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)

    @classmethod
    def decode(cls, data: bytes, at: int = 0) -> AbortedTxn:
        version, *fields = _ENTRY.unpack_from(data, at)
        if version != _VERSION:
            raise CorruptIndexError(f"aborted transaction entry of version {version}")
        return cls(*fields)


def transaction_index_filename(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}{TXN_INDEX_SUFFIX}")


class TransactionIndex:
    """The `.txnindex` at `path` (read if it exists)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        if os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read()
            if len(data) % ENTRY_SIZE:
                raise CorruptIndexError(f"{path} holds {len(data)} bytes, not a multiple of {ENTRY_SIZE}")
            self.entries = [AbortedTxn.decode(data, at) for at in range(0, len(data), ENTRY_SIZE)]
        self._file = None

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def last_offset(self) -> int | None:
        return self.entries[-1].last_offset if self.entries else None

    def append(self, txn: AbortedTxn) -> None:
        """Add an aborted transaction; its marker must come after the last entry's."""
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(f"the last offset of aborted transactions must increase: {txn.last_offset} after "
                             f"{self.entries[-1].last_offset} in {self.path}")
        if self._file is None:
            self._file = open(self.path, "ab")  # noqa: SIM115 -- held open for the next appends
        self._file.write(txn.encode())
        self._file.flush()
        self.entries.append(txn)

    def collect_abortable(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions that overlap [fetch_offset, upper_bound_offset), and whether the search is
        complete (an entry's LSO reached the upper bound: no later segment can add one), as Kafka's
        collectAbortedTxns."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose marker is at or above `offset` (the log was truncated there)."""
        kept = [txn for txn in self.entries if txn.last_offset < offset]
        if len(kept) != len(self.entries):
            self._rewrite(kept)

    def reset(self) -> None:
        """Empty the index and remove its file (recovery rebuilds it)."""
        self._close_file()
        self.entries = []
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        self._close_file()
        if not entries:
            self.reset()
            return
        with open(self.path + ".tmp", "wb") as f:
            f.write(b"".join(txn.encode() for txn in entries))
            f.flush()
            os.fsync(f.fileno())
        os.replace(self.path + ".tmp", self.path)
        fsync_path(os.path.dirname(self.path) or ".")
        self.entries = entries

    def flush(self) -> None:
        if self._file is not None and not self._file.closed:
            os.fsync(self._file.fileno())

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def close(self) -> None:
        self.flush()
        self._close_file()

    def rename(self, path: str) -> None:
        if os.path.exists(self.path):
            os.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        self._close_file()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

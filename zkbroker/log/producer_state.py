"""ProducerStateManager: a partition's idempotent producers (Kafka 0.11's kafka.log.ProducerStateManager, KIP-98).

For each producer id the log has seen in record batches: its epoch and the metadata of its last five batches
(first and last sequence, first and last offset, largest timestamp). The leader checks every produced batch
that carries a producer id against it, as Kafka's ProducerAppendInfo does:

* an epoch older than the producer's: INVALID_PRODUCER_EPOCH;
* a newer epoch must start at sequence 0 (else OUT_OF_ORDER_SEQUENCE_NUMBER, or UNKNOWN_PRODUCER_ID when the
  producer is unknown here: its state may have gone with old segments);
* one of the last five batches again (same epoch, same first and last sequence): a duplicate -- a client's
  retry of a batch that was written -- answered with the offsets it was written at and not written again;
* otherwise its first sequence must follow the last one (Integer.MAX_VALUE wraps to 0), else
  OUT_OF_ORDER_SEQUENCE_NUMBER.

Followers apply the leader's batches without checks.

Transactions (Kafka 0.11-2.8's ProducerAppendInfo): a producer's first transactional batch opens its current
transaction at that batch's offset; a data batch that is not transactional while one is open is refused
(INVALID_TXN_STATE). A control batch (an end-transaction marker, written only for the transaction coordinator)
closes it: its producer epoch may not be older than the producer's (INVALID_PRODUCER_EPOCH) nor its coordinator
epoch older than the last marker's (TRANSACTION_COORDINATOR_FENCED); a marker for a producer with no open
transaction completes nothing. A completed transaction stays *unreplicated* until the high watermark passes its
marker. The first unstable offset is the smallest first offset of an open or unreplicated transaction, and the
last stable offset (LSO) the smaller of it and the high watermark: read_committed consumers read up to there.

Snapshots: at each roll (and at close) the state goes to `<20-digit offset>.snapshot` in the partition's
directory, in Kafka's format v1 (version int16, CRC-32C of the entries, then per producer: id int64, epoch
int16, last sequence int32, last offset int64, offset delta int32, timestamp int64, coordinator epoch int32,
current transaction's first offset int64) -- the last batch of each producer, as Kafka keeps. Loading takes
the latest snapshot at or below the log end and replays the record batch headers after it (and a control
batch's marker).
"""

from __future__ import annotations

import collections
import logging
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from zkbroker.fsync import fsync_path
from zkbroker.protocol.errors import ErrorCode, RemoteProtocolError
from zkbroker.protocol.message_set import BatchInfo
from zkbroker.protocol.record_batch import ControlRecordType, crc32c

logger = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
NUM_BATCHES_TO_RETAIN = 5
_INT32_MAX = (1 << 31) - 1
_VERSION = 1
_HEAD = struct.Struct(">hI")
_ENTRY = struct.Struct(">qhiqiqiq")
_INT32 = struct.Struct(">i")


class ProducerStateError(RemoteProtocolError):
    """A produced batch whose producer id, epoch or sequence the state refuses; error_code says which."""


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction its marker closed: first record, marker offset, and whether it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: collections.deque = field(default_factory=lambda: collections.deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1  # -1: no open transaction
    last_timestamp: int = -1  # of its last batch or marker: what producer expiration goes by

    def copy(self) -> ProducerEntry:
        return ProducerEntry(self.producer_id, self.epoch,
                             collections.deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
                             self.coordinator_epoch, self.current_txn_first_offset, self.last_timestamp)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, batch: BatchInfo) -> BatchMetadata | None:
        if batch.producer_epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == batch.base_sequence and meta.last_seq == batch.last_sequence:
                return meta
        return None

    def add(self, batch: BatchInfo) -> None:
        self.update_epoch(batch.producer_epoch)
        self.batches.append(BatchMetadata(batch.base_sequence, batch.last_sequence, batch.base_offset,
                                          batch.last_offset, batch.max_timestamp))
        self.last_timestamp = batch.max_timestamp

    def update_epoch(self, epoch: int) -> None:
        """A new epoch forgets the sequences of the old one (Kafka's maybeUpdateProducerEpoch)."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()

    def end_txn(self, batch: BatchInfo) -> CompletedTxn | None:
        """Apply the control batch `batch` (its marker); the transaction it completes, if one was open."""
        marker = batch.end_txn_marker
        if marker is None:
            return None  # an empty control batch: the cleaner removed its transaction
        completed = None
        if self.current_txn_first_offset >= 0:
            completed = CompletedTxn(self.producer_id, self.current_txn_first_offset, batch.base_offset,
                                     marker.control_type == ControlRecordType.ABORT)
        self.update_epoch(batch.producer_epoch)
        self.current_txn_first_offset = -1
        self.coordinator_epoch = marker.coordinator_epoch
        self.last_timestamp = batch.max_timestamp
        return completed


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


def snapshot_filename(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")


class ProducerStateManager:
    """The producer state of the partition whose log is in `directory`."""

    def __init__(self, directory: str) -> None:
        self.dir = directory
        self.producers: dict[int, ProducerEntry] = {}
        # first offset of each open transaction -> its producer id, in offset order (keyed by the offset, as
        # Kafka's ongoingTxns: one set of batches may complete a producer's transaction and open its next)
        self.ongoing: dict[int, int] = {}
        # completed transactions whose marker the high watermark has not passed, in marker order
        self.unreplicated: collections.deque[CompletedTxn] = collections.deque()
        # producer id -> the token of a KIP-890 verification under way (Kafka's VerificationGuard): the leader
        # appends the verified batch only if no transactional batch or marker of the producer came meanwhile
        self.verifying: dict[int, object] = {}

    # -- the leader's checks and everyone's updates ---------------------------------------------------------

    def check(self, batches: Iterable[BatchInfo]) -> BatchMetadata | None:
        """Check a produced set's batches in order (as if each were appended); the first duplicate's metadata if
        one is a duplicate (nothing is to be written then), else None. Raises ProducerStateError."""
        pending: dict[int, ProducerEntry] = {}
        for batch in batches:
            if batch.producer_id < 0:
                continue  # not an idempotent producer's batch
            current = pending.get(batch.producer_id) or self.producers.get(batch.producer_id)
            if batch.control:
                self._check_marker(current, batch)
                entry = current.copy() if current else ProducerEntry(batch.producer_id, batch.producer_epoch)
                entry.end_txn(batch)
                pending[batch.producer_id] = entry
                continue
            if batch.base_sequence < 0:
                continue
            if current is not None:
                duplicate = current.find_duplicate(batch)
                if duplicate is not None:
                    return duplicate
            self._check_sequence(current, batch)
            open_txn = current is not None and current.current_txn_first_offset >= 0
            if open_txn and not batch.transactional:
                raise ProducerStateError(f"expected a transactional write from producer {batch.producer_id}: its "
                                         f"transaction from offset {current.current_txn_first_offset} is open",
                                         error_code=ErrorCode.INVALID_TXN_STATE)
            entry = current.copy() if current else ProducerEntry(batch.producer_id, batch.producer_epoch)
            entry.add(batch)
            if batch.transactional and not open_txn:
                entry.current_txn_first_offset = batch.base_offset
            pending[batch.producer_id] = entry
        return None

    @staticmethod
    def _check_marker(current: ProducerEntry | None, batch: BatchInfo) -> None:
        """A marker the coordinator writes: not from an older producer epoch, nor an older coordinator."""
        pid = batch.producer_id
        if current is None:
            return
        if batch.producer_epoch < current.epoch:
            raise ProducerStateError(f"marker for producer {pid} has epoch {batch.producer_epoch}, older than its "
                                     f"current {current.epoch}", error_code=ErrorCode.INVALID_PRODUCER_EPOCH)
        marker = batch.end_txn_marker
        if marker is not None and marker.coordinator_epoch < current.coordinator_epoch:
            raise ProducerStateError(f"marker for producer {pid} from coordinator epoch {marker.coordinator_epoch}, "
                                     f"older than the last one's {current.coordinator_epoch}",
                                     error_code=ErrorCode.TRANSACTION_COORDINATOR_FENCED)

    @staticmethod
    def _check_sequence(current: ProducerEntry | None, batch: BatchInfo) -> None:
        pid, epoch, first = batch.producer_id, batch.producer_epoch, batch.base_sequence
        if current is not None and epoch < current.epoch:
            raise ProducerStateError(f"producer {pid} has epoch {epoch}, older than its current {current.epoch}",
                                     error_code=ErrorCode.INVALID_PRODUCER_EPOCH)
        if current is None or epoch != current.epoch:
            if first != 0:
                if current is None:
                    raise ProducerStateError(
                        f"found no record of producer {pid} on the broker (its state may have gone with old "
                        f"segments); its batch starts at sequence {first}", error_code=ErrorCode.UNKNOWN_PRODUCER_ID)
                raise ProducerStateError(f"invalid sequence number for the new epoch {epoch} of producer {pid}: "
                                         f"{first}", error_code=ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        elif not _in_sequence(current.last_seq, first):
            raise ProducerStateError(f"out of order sequence number for producer {pid} at epoch {epoch}: {first} "
                                     f"(the last was {current.last_seq})",
                                     error_code=ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)

    def update(self, batches: Iterable[BatchInfo]) -> list[CompletedTxn]:
        """Record appended batches (their offsets assigned): a leader's after its checks, a follower's as they are.
        Returns the transactions their markers completed, which the log then finishes with `complete_txn` (after
        it indexed an aborted one with the LSO from `last_stable_offset_after`)."""
        completed = []
        for batch in batches:
            if batch.producer_id < 0:
                continue
            entry = self.producers.get(batch.producer_id)
            if entry is None:
                entry = self.producers[batch.producer_id] = ProducerEntry(batch.producer_id, batch.producer_epoch)
            if batch.transactional and self.verifying:
                self.verifying.pop(batch.producer_id, None)
            if batch.control:
                txn = entry.end_txn(batch)
                if txn is not None:
                    completed.append(txn)
                continue
            entry.add(batch)
            if batch.transactional and entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = batch.base_offset
                self.ongoing[batch.base_offset] = batch.producer_id
        return completed

    def last_stable_offset_after(self, txn: CompletedTxn) -> int:
        """The LSO once `txn` is complete, as far as open transactions go (Kafka's lastStableOffset(completedTxn)):
        the first offset of the earliest other open transaction, or the offset after the marker."""
        for first_offset in self.ongoing:
            if first_offset != txn.first_offset:
                return first_offset
        return txn.last_offset + 1

    def complete_txn(self, txn: CompletedTxn) -> None:
        """The transaction is no longer open; it stays unstable until the high watermark passes its marker."""
        self.ongoing.pop(txn.first_offset, None)
        self.unreplicated.append(txn)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The smallest first offset of an open transaction or of a completed one whose marker is not yet below
        `high_watermark`; None when there is none (then the LSO is the high watermark)."""
        if not self.ongoing and not self.unreplicated:
            return None
        unreplicated = self.unreplicated
        while unreplicated and unreplicated[0].last_offset < high_watermark:
            unreplicated.popleft()  # markers are appended in offset order
        firsts = [txn.first_offset for txn in unreplicated]
        if self.ongoing:
            firsts.append(next(iter(self.ongoing)))  # opened in offset order
        return min(firsts) if firsts else None

    def earliest_unstable_offset(self) -> int | None:
        """The first unstable offset as far as this state knows without a high watermark (the log cleaner's
        bound): the smallest first offset of an open transaction or of a completed one not yet known to be below
        the high watermark; None when there is none. Leaves the state as it is."""
        firsts = [txn.first_offset for txn in tuple(self.unreplicated)]
        firsts += tuple(self.ongoing)
        return min(firsts) if firsts else None

    def last_records(self) -> dict[int, tuple[int | None, int]]:
        """Producer id -> (last offset of its last data batch, None if it has none in its epoch; its epoch), for
        every producer known (Kafka's lastRecordsOfActiveProducers): what the log cleaner keeps a header of."""
        return {pid: (e.batches[-1].last_offset if e.batches else None, e.epoch)
                for pid, e in tuple(self.producers.items())}

    def last_stable_offset(self, high_watermark: int) -> int:
        first = self.first_unstable_offset(high_watermark)
        return high_watermark if first is None or first >= high_watermark else first

    def remove_expired(self, now_ms: int, max_age_ms: int) -> int:
        """Forget producers whose last batch is older than `max_age_ms` (transactional.id.expiration.ms, as Kafka's
        removeExpiredProducers); returns how many."""
        gone = [pid for pid, e in self.producers.items()
                if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= max_age_ms]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget producers whose last batch lies below the log start (retention took it), and transactions that
        began there."""
        gone = [pid for pid, e in self.producers.items() if e.batches and e.batches[-1].last_offset < log_start_offset]
        for pid in gone:
            del self.producers[pid]
        for first_offset, pid in list(self.ongoing.items()):
            if first_offset < log_start_offset or pid not in self.producers:
                del self.ongoing[first_offset]
                if pid in self.producers:
                    self.producers[pid].current_txn_first_offset = -1
        while self.unreplicated and self.unreplicated[0].last_offset < log_start_offset:
            self.unreplicated.popleft()

    # -- snapshots ------------------------------------------------------------------------------------------

    def remove_temporary_files(self) -> None:
        """A snapshot whose write a crash interrupted (`.snapshot.tmp`) is removed; the next roll writes another."""
        for name in os.listdir(self.dir):
            if name.endswith(SNAPSHOT_SUFFIX + ".tmp"):
                os.remove(os.path.join(self.dir, name))

    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for name in os.listdir(self.dir):
            stem = name[: -len(SNAPSHOT_SUFFIX)]
            if name.endswith(SNAPSHOT_SUFFIX) and stem.isdigit():
                offsets.append(int(stem))
        return sorted(offsets)

    def take_snapshot(self, offset: int) -> None:
        """Write the state as of `offset` (the log end) to `<offset>.snapshot`: to .tmp, fsynced, renamed."""
        entries = [e for e in self.producers.values() if e.batches or e.coordinator_epoch >= 0
                   or e.current_txn_first_offset >= 0]
        body = _INT32.pack(len(entries)) + b"".join(_encode_entry(e) for e in entries)
        path = snapshot_filename(self.dir, offset)
        with open(path + ".tmp", "wb") as f:
            f.write(_HEAD.pack(_VERSION, crc32c(body)) + body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
        fsync_path(self.dir)

    def load_snapshot(self, offset: int) -> bool:
        """Replace the state with `<offset>.snapshot`'s; False (and the file removed) if it does not read."""
        path = snapshot_filename(self.dir, offset)
        try:
            with open(path, "rb") as f:
                data = f.read()
            producers = _decode_snapshot(data)
        except (OSError, ValueError, struct.error) as e:
            logger.warning("Ignoring the producer state snapshot %s: %s", path, e)
            self.delete_snapshots(lambda o: o == offset)
            return False
        self.producers = producers
        self.ongoing = {e.current_txn_first_offset: e.producer_id
                        for e in sorted(producers.values(), key=lambda e: e.current_txn_first_offset)
                        if e.current_txn_first_offset >= 0}
        self.unreplicated.clear()
        return True

    def delete_snapshots(self, condition) -> None:
        for offset in self.snapshot_offsets():
            if condition(offset):
                try:
                    os.remove(snapshot_filename(self.dir, offset))
                except FileNotFoundError:
                    pass

    def clear(self) -> None:
        self.producers = {}
        self.ongoing = {}
        self.unreplicated.clear()


def _encode_entry(e: ProducerEntry) -> bytes:
    last = e.batches[-1] if e.batches else None
    return _ENTRY.pack(e.producer_id, e.epoch, e.last_seq, last.last_offset if last else -1,
                       last.last_offset - last.first_offset if last else 0, e.last_timestamp, e.coordinator_epoch,
                       e.current_txn_first_offset)


def read_snapshot(path: str) -> dict[int, ProducerEntry]:
    """The producers a `.snapshot` file holds (dump-log); ValueError or struct.error when it does not read."""
    with open(path, "rb") as f:
        return _decode_snapshot(f.read())


def _decode_snapshot(data: bytes) -> dict[int, ProducerEntry]:
    version, crc = _HEAD.unpack_from(data, 0)
    if version != _VERSION:
        raise ValueError(f"unknown snapshot version {version}")
    body = data[_HEAD.size :]
    if crc32c(body) != crc:
        raise ValueError("the snapshot fails its CRC-32C")
    (count,) = _INT32.unpack_from(body, 0)
    if count < 0 or 4 + count * _ENTRY.size != len(body):
        raise ValueError(f"the snapshot's size does not match its {count} entries")
    producers = {}
    for i in range(count):
        pid, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch, txn_first = _ENTRY.unpack_from(
            body, 4 + i * _ENTRY.size)
        entry = ProducerEntry(pid, epoch, coordinator_epoch=coordinator_epoch, current_txn_first_offset=txn_first,
                              last_timestamp=timestamp)
        if last_offset >= 0:
            entry.batches.append(BatchMetadata(last_seq - delta if last_seq >= 0 else -1, last_seq,
                                               last_offset - delta, last_offset, timestamp))
        producers[pid] = entry
    return producers

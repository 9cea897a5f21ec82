"""Log entries as the magic 2 batches that hold them, on disk and in a Fetch answer alike.

A LeaderChange goes in a control batch of its own (as Kafka writes each quorum control record); a run of
data records of one epoch goes in one data batch, record values the ApiMessageAndVersion frames
(``protocol.metadata_records``). Each batch's partitionLeaderEpoch is its entries' epoch, so the epoch of
every offset is read from batch headers alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from zkbroker.protocol.compression import CODEC_NONE, decompress
from zkbroker.protocol.errors import RemoteProtocolError
from zkbroker.protocol.metadata_records import CONTROL_SCHEMAS, LEADER_CHANGE, build_control_batch, decode_control_key
from zkbroker.protocol.record_batch import BATCH_OVERHEAD, build_record_batch, iter_records, read_header, records_start

from . import messages as m

__all__ = ["batch_headers", "batches_to_entries", "entries_to_batches"]


def _runs(entries: Sequence[m.LogEntry]) -> Iterator[list[m.LogEntry]]:
    """Entries cut into what one batch holds: a control record alone, or data records of one epoch."""
    run: list[m.LogEntry] = []
    for entry in entries:
        if run and (entry.is_control or run[0].is_control or entry.epoch != run[0].epoch):
            yield run
            run = []
        run.append(entry)
    if run:
        yield run


class StoredEntries(Sequence[m.LogEntry]):
    """Whole batches as stored, read as the entries they hold: a leader's Fetch answer sends these bytes as they
    are (Kafka sends a log's stored batches so), and a follower or observer appends them so.

    The entries are decoded on first use only, which a leader sending the batches never makes. At 100,000
    partitions, encoding every Fetch answer anew for two followers and three brokers was two fifths of a loaded
    controller's time; decoding each answer's records to send the same bytes on took the rest of the answer's
    time: about 0.6 s a megabyte on this machine, so that an 8 MiB answer outlasted the 2 s
    controller.quorum.request.timeout.ms, and the observer that asked, retrying the same Fetch, never got one
    (a restarted stand-in sat idle, fenced, with its loop waiting on the socket)."""

    __slots__ = ("raw", "_entries")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self._entries: tuple[m.LogEntry, ...] | None = None

    def _decoded(self) -> tuple[m.LogEntry, ...]:
        if self._entries is None:
            self._entries = _decode(self.raw)
        return self._entries

    def decoded(self) -> StoredEntries:
        """The same, decoded now: what came off the wire is checked where it arrives (a malformed batch raises
        RemoteProtocolError there, not inside the Raft node's step)."""
        self._decoded()
        return self

    def __len__(self) -> int:
        return len(self._decoded())

    def __bool__(self) -> bool:
        return bool(self.raw)  # whole batches: at least one record each

    def __getitem__(self, index: Any) -> Any:
        return self._decoded()[index]

    def __iter__(self) -> Iterator[m.LogEntry]:
        return iter(self._decoded())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, StoredEntries)):
            return self._decoded() == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StoredEntries({len(self.raw)} bytes)"


def entries_to_batches(entries: Sequence[m.LogEntry], timestamp: int = 0) -> bytes:
    if isinstance(entries, StoredEntries):
        return entries.raw
    parts = []
    for run in _runs(entries):
        first = run[0]
        if isinstance(first.record, m.LeaderChangeMessage):
            lc = first.record
            value = {"version": lc.version, "leader_id": lc.leader_id,
                     "voters": [(v,) for v in lc.voters], "granting_voters": [(v,) for v in lc.granting_voters]}
            parts.append(build_control_batch(LEADER_CHANGE, value, base_offset=first.offset, epoch=first.epoch,
                                             timestamp=timestamp))
        else:
            parts.append(build_record_batch([(None, e.record) for e in run], base_offset=first.offset,
                                            timestamp=timestamp, partition_leader_epoch=first.epoch))
    return b"".join(parts)


def batch_headers(data: Any) -> Iterator[tuple[int, int, int, int]]:
    """(position, base offset, last offset, epoch) of each whole batch in ``data``; a torn tail is left out."""
    view = memoryview(data)
    pos = 0
    while pos + BATCH_OVERHEAD <= len(view):
        header = read_header(view, pos)
        if pos + header.size > len(view):
            return
        yield pos, header.base_offset, header.base_offset + header.last_offset_delta, header.partition_leader_epoch
        pos += header.size


def batches_to_entries(data: Any) -> StoredEntries:
    """The entries of the whole batches in ``data`` (a partial batch at the end of a read is dropped, as Kafka's
    readers drop it), as StoredEntries holding those whole batches' bytes, decoded when first read. Compressed
    batches are opened: Kafka's leader may send them.

    A follower or observer appends a Fetch answer's entries so: the batches the leader stored go to its own log as
    they came, as Kafka's follower appends the records it received. Encoded again from the entries, a Fetch answer
    of one epoch became one batch as large as the answer (a stand-in fetching 8 MiB wrote a 4.6 MB batch, above the
    bound its recovery then cut the log at)."""
    whole = 0
    for position, _, _, _ in batch_headers(data):
        whole = position + read_header(data, position).size
    if not whole:
        return StoredEntries(b"")
    return StoredEntries(data if whole == len(data) and isinstance(data, bytes) else bytes(memoryview(data)[:whole]))


def _decode(data: bytes) -> tuple[m.LogEntry, ...]:
    """The entries of whole batches."""
    view = memoryview(data)
    entries = []
    pos = 0
    while pos + BATCH_OVERHEAD <= len(view):
        header = read_header(view, pos)
        end = pos + header.size
        if end > len(view):
            break
        body: Any = view[records_start(pos):end]
        if header.codec != CODEC_NONE:
            body = decompress(header.codec, body)
        for record in iter_records(header, body):
            if header.is_control:
                control_type = decode_control_key(record.key)
                if control_type != LEADER_CHANGE:
                    raise RemoteProtocolError(f"control record type {control_type} in the metadata log")
                lc, _ = CONTROL_SCHEMAS[LEADER_CHANGE].decode(memoryview(record.value or b""), 0)
                payload: Any = m.LeaderChangeMessage(lc.leader_id, tuple(v.voter_id for v in lc.voters),
                                                     tuple(v.voter_id for v in lc.granting_voters), lc.version)
            else:
                payload = bytes(record.value or b"")
            entries.append(m.LogEntry(record.offset, header.partition_leader_epoch, payload))
        pos = end
    return tuple(entries)

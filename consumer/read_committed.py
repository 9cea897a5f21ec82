"""What a `read_committed` consumer keeps of a fetched message set (KIP-98), as Kafka's Fetcher decides it: the
broker returns data only below the last stable offset, with the aborted transactions that overlap the fetch
(producer id, first offset); the consumer drops the batches of those transactions and every control batch.

Walking the batches in offset order: once a batch reaches an aborted transaction's first offset, that producer's
transactional batches are aborted data until its control batch (the abort marker) ends the transaction. Data of
magic 0 and 1 and non-transactional batches are never dropped. Pure: bytes in, bytes out."""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from zkbroker.protocol.message_set import entry_starts
from zkbroker.protocol.record_batch import read_header

__all__ = ["committed_records"]

_MAGIC_AT = 16


def committed_records(records: bytes | memoryview, aborted: Iterable[tuple[int, int]]) -> tuple[bytes, int]:
    """The entries of `records` a read_committed consumer returns, concatenated, and the offset after the last
    complete entry of `records` (kept or not): where the next fetch starts. `aborted` holds (producer id, first
    offset) pairs as Fetch v4+ returns them."""
    view = memoryview(records).cast("B")
    pending = sorted((first, producer) for producer, first in aborted)  # a sorted list is a heap
    aborting: set[int] = set()
    kept: list[memoryview] = []
    end_offset = -1
    for pos in entry_starts(view):
        if view[pos + _MAGIC_AT] != 2:  # a message (or 0.8 wrapper) of magic 0 or 1: never transactional
            size = int.from_bytes(view[pos + 8:pos + 12], "big")
            kept.append(view[pos:pos + 12 + size])
            end_offset = int.from_bytes(view[pos:pos + 8], "big", signed=True) + 1  # a wrapper's: its last inner
            continue
        header = read_header(view, pos)
        end_offset = header.last_offset + 1
        while pending and pending[0][0] <= header.last_offset:
            aborting.add(heapq.heappop(pending)[1])
        if header.is_control:
            aborting.discard(header.producer_id)  # the marker ends the transaction; it is never returned
            continue
        if header.is_transactional and header.producer_id in aborting:
            continue
        kept.append(view[pos:pos + header.size])
    return b"".join(kept), end_offset

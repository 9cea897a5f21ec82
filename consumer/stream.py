"""KafkaStream: what a consumer thread iterates (0.8.2's KafkaStream and ConsumerIterator).

Fetchers put *chunks* -- the message set of one fetch of one partition, as fetched -- on a stream's bounded
queue (`queued.max.message.chunks`); the iterator decodes a chunk when it reaches it (decode.py) and hands the
messages out one by one, so a partition's messages come out in offset order. A corrupt message set, or a
message larger than `fetch.message.max.bytes`, is raised from `next()`. Handing a message out marks it
consumed: the partition's consumed offset becomes the message's offset + 1, and that is what
`commit_offsets()` (or auto-commit) writes to ZooKeeper.

A rebalance clears the queues and the chunk being iterated (the fetchers stop first), so no message of a
partition this consumer may lose is handed out after the rebalance began. With `consumer.timeout.ms` >= 0,
`next()` raises ConsumerTimeout when no message came for that long; iterating again continues.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import NamedTuple

from zkbroker.protocol.message_set import read_inflation_bound

from .decode import MessageAndMetadata, decode_messages

__all__ = [
    "ChunkQueue",
    "ConsumerTimeout",
    "FetchedChunk",
    "KafkaStream",
    "MessageAndMetadata",
    "MessageSizeTooLarge",
]

_POLL_S = 0.2


class ConsumerTimeout(Exception):
    """No message within consumer.timeout.ms (0.8.2's ConsumerTimeoutException)."""


class MessageSizeTooLarge(Exception):
    """A message larger than fetch.message.max.bytes blocks its partition."""


class FetchedChunk(NamedTuple):
    """One fetch of one partition; `info` is its PartitionTopicInfo. The fetcher queues the message set as
    fetched (`records`, from offset `start`) and the iterator decodes it when it gets to it, as 0.8.2's
    ConsumerIterator did; `messages` holds the decoded MessageAndMetadata."""

    info: object
    messages: list
    error: BaseException | None = None
    records: bytes | None = None
    start: int = 0


class ChunkQueue:
    """A stream's bounded queue of chunks. Its condition is also the stream's lock, so taking a chunk out and
    making it the current one is one step that a rebalance's clear() cannot fall between."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self.items: deque[FetchedChunk] = deque()
        self.cond = threading.Condition(threading.Lock())

    def put(self, chunk: FetchedChunk, timeout: float) -> bool:
        """Append a chunk, waiting up to timeout for room; False if there was none."""
        with self.cond:
            if len(self.items) >= self.maxsize and not self.cond.wait_for(
                    lambda: len(self.items) < self.maxsize, timeout):
                return False
            self.items.append(chunk)
            self.cond.notify_all()
            return True

    def __len__(self) -> int:
        return len(self.items)


class KafkaStream:
    """An iterator of MessageAndMetadata; one thread should iterate it."""

    def __init__(self, chunks: ChunkQueue, consumer_timeout_ms: int, client_id: str) -> None:
        self.chunks = chunks
        self.client_id = client_id
        self._timeout_s = None if consumer_timeout_ms < 0 else consumer_timeout_ms / 1000.0
        self._cond = chunks.cond
        self._chunk: FetchedChunk | None = None
        self._position = 0
        self._done = False
        self._pending_error: BaseException | None = None

    def __iter__(self) -> KafkaStream:
        return self

    def __next__(self) -> MessageAndMetadata:
        with self._cond:
            chunk = self._chunk
            if chunk is not None:
                position = self._position
                messages = chunk.messages
                if position < len(messages):
                    message = messages[position]
                    self._position = position + 1
                    chunk.info.consumed_offset = message[2] + 1
                    return message
        return self._next_chunk()

    def _next_chunk(self) -> MessageAndMetadata:
        """The slow path of next(): take the next chunk, waiting for one if need be."""
        deadline = None if self._timeout_s is None else time.monotonic() + self._timeout_s
        with self._cond:
            while True:
                chunk = self._chunk
                if chunk is not None and self._position < len(chunk.messages):
                    message = chunk.messages[self._position]
                    self._position += 1
                    chunk.info.consumed_offset = message[2] + 1
                    return message
                self._chunk = None
                if self._pending_error is not None:
                    error, self._pending_error = self._pending_error, None
                    raise error
                if self._done:
                    raise StopIteration
                items = self.chunks.items
                if items:
                    item = items.popleft()
                    self._cond.notify_all()  # room for a fetcher
                    if item.error is not None:
                        raise item.error
                    self._install(item)
                    continue
                if deadline is None:
                    self._cond.wait(_POLL_S)
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ConsumerTimeout(f"No message within consumer.timeout.ms ({self._timeout_s * 1000:.0f} "
                                          "ms)")
                self._cond.wait(remaining)

    def _install(self, item: FetchedChunk) -> None:
        info = item.info
        if item.records is not None:
            messages, _ = decode_messages(item.records, info.topic, info.partition, item.start,
                                          read_inflation_bound(info.fetch_size))
            item = item._replace(messages=messages, records=None)
        # A chunk may start before the consumed offset (a compressed set, a refetch): skip those.
        start = 0
        consumed = info.consumed_offset
        if consumed is not None:
            while start < len(item.messages) and item.messages[start][2] < consumed:
                start += 1
        self._chunk = item
        self._position = start

    def clear(self) -> None:
        """Drop the queued chunks and the one being iterated (a rebalance, with the fetchers stopped)."""
        with self._cond:
            self._chunk = None
            self.chunks.items.clear()
            self._cond.notify_all()

    def fail(self, error: BaseException) -> None:
        """Raise `error` from the next call to next() (a background rebalance failed)."""
        with self._cond:
            self._pending_error = error
            self._cond.notify_all()

    def shut_down(self) -> None:
        """End the iteration: queued messages are dropped and next() raises StopIteration."""
        with self._cond:
            self._chunk = None
            self.chunks.items.clear()
            self._done = True
            self._cond.notify_all()

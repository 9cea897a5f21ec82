"""The producer's record accumulator: per-partition batches waiting to be sent (the Java client's
RecordAccumulator, as 0.8.2's new producer had it).

`send()` appends a record to the last batch of its partition, or starts a new one; a batch is ready to go when
it is full (`batch.size` bytes), when it has waited `linger.ms`, when someone flushes or closes, and never while
it sits out a retry backoff. The sender drains at most one batch per partition per request, oldest first, so a
partition's records leave in order. Memory is bounded by `buffer.memory`: an append that does not fit blocks
until sent batches free space (or raises, with `block.on.buffer.full=false`).

A record's future is a small handle on its batch's result (one event per batch, not one per record).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import NamedTuple

from zkbroker.client.metadata import Cluster
from zkbroker.protocol.message_set import LOG_OVERHEAD, MIN_MESSAGE_SIZE

__all__ = ["BufferExhaustedError", "ProduceBatch", "RecordAccumulator", "RecordFuture", "RecordMetadata"]

log = logging.getLogger("zkbroker.client.Producer")

Callback = Callable[["RecordMetadata | None", "BaseException | None"], None]


class BufferExhaustedError(RuntimeError):
    """buffer.memory is full and block.on.buffer.full is false."""


class RecordMetadata(NamedTuple):
    """Where a record went. offset is -1 with acks=0 (the broker does not answer)."""

    topic: str
    partition: int
    offset: int


def record_size(key: bytes | None, value: bytes | None) -> int:
    """Bytes a record takes in an uncompressed magic-0 message set (its share of batch.size)."""
    return LOG_OVERHEAD + MIN_MESSAGE_SIZE[0] + (len(key) if key is not None else 0) + (
        len(value) if value is not None else 0)


class ProduceBatch:
    """Records of one partition sent in one request (Java's RecordBatch)."""

    __slots__ = ("topic", "partition", "records", "size", "created", "attempts", "retry_at", "callbacks",
                 "base_offset", "error", "_done", "_lock")

    def __init__(self, topic: str, partition: int, now: float) -> None:
        self.topic = topic
        self.partition = partition
        self.records: list[tuple[bytes | None, bytes | None]] = []
        self.size = 0
        self.created = now
        self.attempts = 0
        self.retry_at = 0.0
        self.callbacks: list[tuple[int, Callback]] | None = None
        self.base_offset = -1
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ProduceBatch([{self.topic},{self.partition}], {len(self.records)} records)"

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def add_callback(self, index: int, callback: Callback) -> None:
        with self._lock:
            if not self._done.is_set():
                if self.callbacks is None:
                    self.callbacks = []
                self.callbacks.append((index, callback))
                return
        _call(callback, index, self)

    def complete(self, base_offset: int, error: BaseException | None) -> None:
        """Record the outcome and run the callbacks (on the sender thread, as Java does)."""
        with self._lock:
            if self._done.is_set():
                return
            self.base_offset = base_offset
            self.error = error
            self._done.set()
            callbacks, self.callbacks = self.callbacks, None
        for index, callback in callbacks or ():
            _call(callback, index, self)

    def wait(self, timeout: float | None) -> bool:
        return self._done.wait(timeout)

    def metadata(self, index: int) -> RecordMetadata:
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        return RecordMetadata(self.topic, self.partition, offset)


def _call(callback: Callback, index: int, batch: ProduceBatch) -> None:
    try:
        if batch.error is None:
            callback(batch.metadata(index), None)
        else:
            callback(None, batch.error)
    except Exception:
        log.exception("Error executing user-provided callback on message for topic-partition [%s,%d]",
                      batch.topic, batch.partition)


class RecordFuture:
    """The outcome of one send(): `get()` blocks for the RecordMetadata or raises the send's error."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ProduceBatch, index: int) -> None:
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._batch.done

    def get(self, timeout: float | None = None) -> RecordMetadata:
        if not self._batch.wait(timeout):
            raise TimeoutError(f"No answer for a record of [{self._batch.topic},{self._batch.partition}] "
                               f"within {timeout} s")
        if self._batch.error is not None:
            raise self._batch.error
        return self._batch.metadata(self._index)

    result = get

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self._batch.wait(timeout):
            raise TimeoutError(f"No answer within {timeout} s")
        return self._batch.error

    def add_callback(self, callback: Callback) -> None:
        """callback(metadata, None) on success or callback(None, error), on the sender thread (at once if done)."""
        self._batch.add_callback(self._index, callback)


class RecordAccumulator:
    def __init__(self, batch_size: int, linger_ms: int, buffer_memory: int, block_on_buffer_full: bool,
                 retry_backoff_ms: int) -> None:
        self.batch_size = batch_size
        self.linger_s = linger_ms / 1000.0
        self.buffer_memory = buffer_memory
        self.block_on_buffer_full = block_on_buffer_full
        self.retry_backoff_s = retry_backoff_ms / 1000.0
        self._batches: dict[tuple[str, int], deque[ProduceBatch]] = {}
        self._incomplete: set[ProduceBatch] = set()
        self._used = 0
        self._flushes = 0
        self.closed = False
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)

    # ---- the caller's side --------------------------------------------------------------------------------

    def append(self, topic: str, partition: int, key: bytes | None, value: bytes | None, size: int,
               max_block_s: float | None) -> tuple[RecordFuture, bool]:
        """Add a record of `size` bytes (record_size); returns its future and whether the sender should wake
        (a batch filled or began)."""
        with self._lock:
            if self.closed:
                raise RuntimeError("Cannot send after the producer is closed.")
            if self._used + size > self.buffer_memory:
                self._wait_for_space(size, max_block_s)
            self._used += size
            queue = self._batches.get((topic, partition))
            if queue is None:
                queue = self._batches[(topic, partition)] = deque()
            batch = queue[-1] if queue else None
            wake = False
            if batch is None or batch.attempts or (batch.size and batch.size + size > self.batch_size):
                batch = ProduceBatch(topic, partition, time.monotonic())
                queue.append(batch)
                self._incomplete.add(batch)
                wake = True
            records = batch.records
            records.append((key, value))
            batch.size += size
            if batch.size >= self.batch_size:
                wake = True
            return RecordFuture(batch, len(records) - 1), wake

    def _wait_for_space(self, size: int, max_block_s: float | None) -> None:
        if size > self.buffer_memory:
            raise BufferExhaustedError(
                f"The message is {size} bytes when serialized which is larger than the total memory buffer you "
                "have configured with the buffer.memory configuration.")
        if not self.block_on_buffer_full:
            raise BufferExhaustedError("You have exhausted the buffer.memory you have configured for the "
                                       "producer and block.on.buffer.full is false.")
        deadline = None if max_block_s is None else time.monotonic() + max_block_s
        while self._used + size > self.buffer_memory and not self.closed:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise BufferExhaustedError(f"Failed to allocate {size} bytes of buffer.memory within "
                                           f"{max_block_s * 1000:.0f} ms")
            self._space.wait(remaining)

    # ---- the sender's side --------------------------------------------------------------------------------

    def ready(self, cluster: Cluster, now: float) -> tuple[set[int], float, set[str]]:
        """Leaders with a batch ready to go, the seconds until the next batch may become ready, and topics
        whose leader is unknown."""
        nodes: set[int] = set()
        unknown: set[str] = set()
        next_delay = float("inf")
        with self._lock:
            flushing = self._flushes > 0 or self.closed
            for (topic, partition), queue in self._batches.items():
                if not queue:
                    continue
                batch = queue[0]
                info = cluster.topics.get(topic, {}).get(partition)
                leader = info.leader if info is not None else -1
                if leader not in cluster.brokers:
                    unknown.add(topic)
                    continue
                if batch.retry_at > now:
                    next_delay = min(next_delay, batch.retry_at - now)
                    continue
                waited = now - batch.created
                if len(queue) > 1 or batch.size >= self.batch_size or flushing or waited >= self.linger_s:
                    nodes.add(leader)
                else:
                    next_delay = min(next_delay, self.linger_s - waited)
        return nodes, next_delay, unknown

    def drain(self, cluster: Cluster, nodes: Iterable[int], max_request_size: int,
              now: float) -> dict[int, list[ProduceBatch]]:
        """Take, for each node, the first batch of each partition it leads, up to max_request_size bytes."""
        wanted = set(nodes)
        out: dict[int, list[ProduceBatch]] = {}
        sizes: dict[int, int] = {}
        with self._lock:
            for (topic, partition), queue in self._batches.items():
                if not queue or queue[0].retry_at > now:
                    continue
                info = cluster.topics.get(topic, {}).get(partition)
                if info is None or info.leader not in wanted:
                    continue
                batch = queue[0]
                taken = sizes.get(info.leader, 0)
                if taken and taken + batch.size > max_request_size:
                    continue
                queue.popleft()
                batch.attempts += 1
                out.setdefault(info.leader, []).append(batch)
                sizes[info.leader] = taken + batch.size
        return out

    def reenqueue(self, batch: ProduceBatch, now: float) -> None:
        """Put a batch that failed with a retriable error back at the head of its partition, after a backoff."""
        with self._lock:
            batch.retry_at = now + self.retry_backoff_s
            self._batches.setdefault((batch.topic, batch.partition), deque()).appendleft(batch)

    def release(self, batch: ProduceBatch) -> None:
        """A batch is done (sent, failed or expired): its memory goes back to buffer.memory."""
        with self._lock:
            if batch in self._incomplete:
                self._incomplete.discard(batch)
                self._used -= batch.size
                self._space.notify_all()

    def expired(self, now: float, timeout_s: float, reachable: Callable[[str, int], bool]) -> list[ProduceBatch]:
        """Batches that waited longer than timeout_s past their linger for a leader they could be sent to
        (`reachable(topic, partition)` false: leader unknown or its broker not connected): taken out. A batch
        queued behind requests a connected leader has not answered yet waits on."""
        out = []
        with self._lock:
            for (topic, partition), queue in self._batches.items():
                if not queue or now - queue[0].created - self.linger_s <= timeout_s or reachable(topic, partition):
                    continue
                while queue and now - queue[0].created - self.linger_s > timeout_s:
                    out.append(queue.popleft())
        return out

    def has_unsent(self) -> bool:
        with self._lock:
            return any(self._batches.values())

    def incomplete(self) -> list[ProduceBatch]:
        with self._lock:
            return list(self._incomplete)

    def begin_flush(self) -> None:
        with self._lock:
            self._flushes += 1

    def end_flush(self) -> None:
        with self._lock:
            self._flushes -= 1

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self._space.notify_all()

    def abort_all(self, error: BaseException) -> list[ProduceBatch]:
        """Take every unsent batch out (a forced close); the caller completes them with `error`."""
        with self._lock:
            out = [b for queue in self._batches.values() for b in queue]
            for queue in self._batches.values():
                queue.clear()
        return out


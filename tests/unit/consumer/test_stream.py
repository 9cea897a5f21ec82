"""KafkaStream without a cluster: order within a chunk, consumed offsets, clearing at a rebalance,
consumer.timeout.ms, a failed rebalance raised once, shutdown."""

from __future__ import annotations

import threading

import pytest

from consumer.fetcher import PartitionTopicInfo
from consumer.stream import ChunkQueue, ConsumerTimeout, FetchedChunk, KafkaStream, MessageAndMetadata


def messages(*offsets: int) -> list[MessageAndMetadata]:
    return [MessageAndMetadata("t", 3, o, None, b"v%d" % o) for o in offsets]


def stream_and_info(timeout_ms: int = -1):
    chunks = ChunkQueue(2)
    return KafkaStream(chunks, timeout_ms, "c"), PartitionTopicInfo("t", 3, chunks, 5, 1024)


def test_messages_come_in_order_and_mark_the_consumed_offset():
    stream, info = stream_and_info()
    stream.chunks.put(FetchedChunk(info, messages(4, 5, 6)), 1)  # 4 is below the consumed offset: skipped
    first = next(stream)
    assert (first.topic, first.partition, first.offset, first.value) == ("t", 3, 5, b"v5")
    assert info.consumed_offset == 6
    assert next(stream).offset == 6 and info.consumed_offset == 7


def test_consumer_timeout_then_iteration_continues():
    stream, info = stream_and_info(timeout_ms=50)
    with pytest.raises(ConsumerTimeout):
        next(stream)
    stream.chunks.put(FetchedChunk(info, messages(5)), 1)
    assert next(stream).offset == 5


def test_clear_drops_the_current_chunk_and_the_queue():
    stream, info = stream_and_info(timeout_ms=50)
    stream.chunks.put(FetchedChunk(info, messages(5, 6)), 1)
    stream.chunks.put(FetchedChunk(info, messages(7)), 1)
    assert next(stream).offset == 5
    stream.clear()
    with pytest.raises(ConsumerTimeout):
        next(stream)
    assert info.consumed_offset == 6


def test_a_failed_rebalance_is_raised_once():
    stream, info = stream_and_info(timeout_ms=50)
    stream.fail(RuntimeError("can't rebalance after 4 retries"))
    with pytest.raises(RuntimeError, match="4 retries"):
        next(stream)
    stream.chunks.put(FetchedChunk(info, messages(5)), 1)
    assert next(stream).offset == 5


def test_shutdown_ends_a_blocked_iteration():
    stream, _ = stream_and_info()
    result = []
    thread = threading.Thread(target=lambda: result.append(list(stream)))
    thread.start()
    stream.shut_down()
    thread.join(5)
    assert result == [[]]


def test_a_queued_message_set_is_decoded_when_reached_and_corruption_is_raised():
    from consumer.decode import last_offset
    from zkbroker.protocol.errors import RemoteProtocolError
    from zkbroker.protocol.message_set import build_message_set

    stream, info = stream_and_info(timeout_ms=50)
    records = build_message_set([(b"k", b"a"), (None, b"b"), (None, None)], base_offset=4)
    assert last_offset(records) == 6 and last_offset(records[:20]) is None
    stream.chunks.put(FetchedChunk(info, [], None, records, 4), 1)
    assert [(m.offset, m.key, m.value) for m in (next(stream), next(stream))] == [(5, None, b"b"), (6, None, None)]
    corrupt = bytearray(build_message_set([(None, b"c")], base_offset=7))
    corrupt[-1] ^= 1
    stream.chunks.put(FetchedChunk(info, [], None, bytes(corrupt), 7), 1)
    with pytest.raises(RemoteProtocolError, match="CRC"):
        next(stream)

"""The record accumulator without a network: batching by batch.size and linger.ms, one batch per partition per
request and in order, retry backoff, buffer.memory, and futures and callbacks."""

from __future__ import annotations

import threading

import pytest

from zkbroker.client.accumulator import BufferExhaustedError, RecordAccumulator, record_size
from zkbroker.client.metadata import BrokerInfo, Cluster, PartitionInfo
from zkbroker.protocol.errors import NotLeaderForPartitionError

CLUSTER = Cluster({1: BrokerInfo(1, "h", 1), 2: BrokerInfo(2, "h", 2)},
                  {"t": {0: PartitionInfo("t", 0, 1, (1,), (1,)), 1: PartitionInfo("t", 1, 2, (2,), (2,)),
                         2: PartitionInfo("t", 2, -1, (3,), ())}})
VALUE = b"x" * 74  # 100 bytes a record with the 26 bytes of offset, size and message header
assert record_size(None, VALUE) == 100


def accumulator(batch_size=1000, linger_ms=0, buffer_memory=10**6, block=True, backoff_ms=100):
    return RecordAccumulator(batch_size, linger_ms, buffer_memory, block, backoff_ms)


def test_records_of_a_partition_share_a_batch_until_batch_size():
    acc = accumulator(batch_size=300, linger_ms=10_000)
    wakes = [acc.append("t", 0, None, VALUE, 100, None)[1] for _ in range(7)]
    assert wakes == [True, False, True, True, False, True, True]  # new batch, full at 300 bytes, ...
    nodes, _, _ = acc.ready(CLUSTER, now=0.0)
    assert nodes == {1}
    drained = acc.drain(CLUSTER, [1], 10**6, now=0.0)
    assert [len(b.records) for b in drained[1]] == [3]  # one batch per partition per request, the oldest


def test_a_batch_waits_for_linger_ms_unless_flushed():
    acc = accumulator(linger_ms=50)
    future, _ = acc.append("t", 1, None, VALUE, 100, None)
    created = future._batch.created
    nodes, delay, _ = acc.ready(CLUSTER, created + 0.01)
    assert not nodes and delay == pytest.approx(0.04)
    assert acc.ready(CLUSTER, created + 0.06)[0] == {2}
    acc.begin_flush()
    assert acc.ready(CLUSTER, created)[0] == {2}


def test_partitions_without_a_leader_are_reported_not_drained():
    acc = accumulator()
    acc.append("t", 2, None, VALUE, 100, None)
    nodes, _, unknown = acc.ready(CLUSTER, 10.0)
    assert not nodes and unknown == {"t"}


def test_max_request_size_limits_a_drain_but_not_its_first_batch():
    acc = accumulator(batch_size=250)
    for partition in (0, 0, 0):
        acc.append("t", partition, None, VALUE, 100, None)
    drained = acc.drain(CLUSTER, [1], 150, now=10.0)
    assert [b.size for b in drained[1]] == [200]


def test_a_retried_batch_goes_back_first_after_the_backoff():
    acc = accumulator(batch_size=100, backoff_ms=100)
    for _ in range(2):
        acc.append("t", 0, None, VALUE, 100, None)
    first = acc.drain(CLUSTER, [1], 10**6, now=10.0)[1][0]
    acc.reenqueue(first, now=10.0)
    assert acc.drain(CLUSTER, [1], 10**6, now=10.05) == {}
    assert acc.drain(CLUSTER, [1], 10**6, now=10.2)[1] == [first]
    assert first.attempts == 2


def test_buffer_memory_blocks_or_raises():
    acc = accumulator(buffer_memory=250, block=False)
    acc.append("t", 0, None, VALUE, 100, None)
    acc.append("t", 0, None, VALUE, 100, None)
    with pytest.raises(BufferExhaustedError, match="block.on.buffer.full is false"):
        acc.append("t", 0, None, VALUE, 100, None)
    blocking = accumulator(buffer_memory=250)
    future, _ = blocking.append("t", 0, None, VALUE, 100, None)
    blocking.append("t", 0, None, VALUE, 100, None)
    with pytest.raises(BufferExhaustedError, match="within 50 ms"):
        blocking.append("t", 0, None, VALUE, 100, 0.05)
    threading.Timer(0.05, blocking.release, [future._batch]).start()
    blocking.append("t", 0, None, VALUE, 100, 5.0)  # room again once the batch is done


def test_futures_and_callbacks_see_the_batch_outcome():
    acc = accumulator()
    seen = []
    f0, _ = acc.append("t", 0, None, VALUE, 100, None)
    f1, _ = acc.append("t", 0, b"k", VALUE, 101, None)
    f1.add_callback(lambda md, error: seen.append((md, error)))
    assert not f0.done()
    with pytest.raises(TimeoutError):
        f0.get(timeout=0.01)
    f0._batch.complete(40, None)
    assert f0.get().offset == 40 and f1.get().offset == 41 and seen[0][0].offset == 41
    late = []
    f1.add_callback(lambda md, error: late.append(md.offset))
    assert late == [41]
    f2, _ = acc.append("t", 1, None, VALUE, 100, None)
    f2._batch.complete(-1, NotLeaderForPartitionError("[t,1]"))
    with pytest.raises(NotLeaderForPartitionError):
        f2.get()


def test_only_batches_without_a_reachable_leader_expire():
    acc = accumulator(linger_ms=0)
    waiting, _ = acc.append("t", 0, None, VALUE, 100, None)
    queued, _ = acc.append("t", 1, None, VALUE, 100, None)
    created = waiting._batch.created
    unreachable = {("t", 0)}
    assert acc.expired(created + 0.5, 1.0, lambda t, p: (t, p) not in unreachable) == []
    assert acc.expired(created + 1.5, 1.0, lambda t, p: (t, p) not in unreachable) == [waiting._batch]
    assert not queued.done()  # its leader is connected, only busy: it waits for it


def test_the_senders_message_sets_are_the_codecs():
    import random

    from zkbroker.client.sender import message_set
    from zkbroker.protocol.message_set import build_message_set

    rng = random.Random(3)
    for _ in range(200):
        records = [(None if rng.random() < 0.4 else rng.randbytes(rng.randint(0, 30)),
                    None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, 400)))
                   for _ in range(rng.randint(1, 20))]
        assert message_set(records) == build_message_set(records)

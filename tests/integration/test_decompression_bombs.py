"""A decompression bomb against a real broker, sent by kafka-python speaking 0.8.2: a Produce of a few hundred
KB whose gzip magic-0 wrapper holds one ~400 MB value is refused with MESSAGE_TOO_LARGE, nothing is written,
the next record lands where it would have, and the broker's peak resident memory stays bounded."""

from __future__ import annotations

import uuid

import pytest

from tests.integration.bombs import gzip_bomb
from tests.integration.harness import create_topic, list_offset

LATEST = -1
BOMB_VALUE_BYTES = 400 * 1024 * 1024
PEAK_RSS_BOUND_KB = 200 * 1024  # a behaviour bound: without the bound the broker reached ~820 MB


def peak_rss_kb(pid: int) -> int:
    """VmHWM: the process's peak resident set size so far."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


@pytest.mark.timeout(120)
def test_kafka_python_gzip_bomb_is_refused_and_the_brokers_memory_stays_bounded(brokers, zk_connect, monkeypatch):
    import kafka.record.legacy_records as legacy_records
    from kafka import KafkaProducer
    from kafka.errors import MessageSizeTooLargeError

    (broker,) = brokers(1)
    topic = f"bomb-{uuid.uuid4().hex[:8]}"
    create_topic(zk_connect, topic, 1, 1, [broker])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=(0, 8, 2), acks=1, retries=0,
                             compression_type="gzip", linger_ms=0)
    try:
        producer.send(topic, b"before", partition=0).get(timeout=30)
        size_before = sum(f.stat().st_size for f in broker.segment_files(topic, 0))

        # kafka-python builds and sends the wrapper (magic 0, gzip, its CRC) around a gzip stream that inflates
        # to one 400 MB message: the stream is built compressed, so this test never holds the value.
        bomb = gzip_bomb(BOMB_VALUE_BYTES)
        assert len(bomb) < 1024 * 1024  # under message.max.bytes: only inflating it tells
        monkeypatch.setattr(legacy_records, "gzip_encode", lambda data: bomb)
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(topic, b"ignored: the bomb replaces the compressed batch", partition=0).get(timeout=60)
        monkeypatch.undo()

        assert sum(f.stat().st_size for f in broker.segment_files(topic, 0)) == size_before
        assert list_offset(broker, topic, 0, LATEST) == (0, 1)
        assert producer.send(topic, b"after", partition=0).get(timeout=30).offset == 1
    finally:
        producer.close(timeout=10)
    assert broker.alive()
    assert peak_rss_kb(broker.pid) < PEAK_RSS_BOUND_KB

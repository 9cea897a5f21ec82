"""Our producer: the design of Kafka 0.8.2's new Java producer (KafkaProducer), in Python.

    producer = Producer({"bootstrap.servers": "127.0.0.1:9092", "acks": "all", "linger.ms": 5})
    future = producer.send("events", b"value", key=b"user-1")        # asynchronous
    metadata = producer.send("events", b"value").get(timeout=10)    # synchronous: wait for the answer
    producer.send("events", b"v", callback=lambda md, error: ...)   # a callback on the sender thread
    producer.flush()
    producer.close()

Records are routed by Kafka's partitioner (`partitioner.py`), gathered per partition into batches
(`accumulator.py`: `batch.size`, `linger.ms`, `buffer.memory`) and sent by one background thread
(`sender.py`: acks 0/1/-1, compression, `retries` with a metadata refresh on retriable errors). The
configuration keys and defaults are those of 0.8.2's new producer (`PRODUCER_CONFIGS`); request.timeout.ms is
0.9's. Records go out as magic-0 message sets in Produce v0 requests, as 0.8.2's producer sent them; with
`message.format.version=0.11.0` (our extension) as record batches (magic 2) in Produce v3 -- v7 for zstd,
which only batches can carry -- stamped with the time each batch is sent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from zkbroker.client.accumulator import (
    BufferExhaustedError,
    RecordAccumulator,
    RecordFuture,
    RecordMetadata,
    record_size,
)
from zkbroker.client.config import ClientConfig
from zkbroker.client.metadata import Metadata, MetadataClient, parse_broker_list
from zkbroker.client.partitioner import DefaultPartitioner, InvalidPartitionError
from zkbroker.client.security import CLIENT_SECURITY_CONFIGS, ClientSecurity
from zkbroker.client.sender import Sender
from zkbroker.config import ConfigKey, ConfigType, OneOf, Range, message_format_magic
from zkbroker.protocol.compression import BATCH_CODEC_NAMES, CODEC_ZSTD

__all__ = [
    "PRODUCER_CONFIGS",
    "BufferExhaustedError",
    "InvalidPartitionError",
    "Producer",
    "ProducerConfig",
    "RecordFuture",
    "RecordMetadata",
    "RecordTooLargeError",
]

log = logging.getLogger("zkbroker.client.Producer")

_OVERHEAD = record_size(None, None)  # a record's bytes in a batch beyond its key and value

_INT, _LONG, _BOOLEAN, _STRING, _LIST = (ConfigType.INT, ConfigType.LONG, ConfigType.BOOLEAN, ConfigType.STRING,
                                         ConfigType.LIST)
_AT_LEAST_0, _AT_LEAST_1 = Range(0), Range(1)
_CODECS = {name: codec for codec, name in BATCH_CODEC_NAMES.items()}

PRODUCER_CONFIGS: Mapping[str, ConfigKey] = MappingProxyType({key.name: key for key in (*CLIENT_SECURITY_CONFIGS,
    ConfigKey("bootstrap.servers", _LIST, (), "host:port pairs to find the cluster from; one that answers is "
              "enough (also accepted as metadata.broker.list, 0.8.2's old producer's name)."),
    ConfigKey("metadata.broker.list", _LIST, (), "0.8.2's old producer's name for bootstrap.servers."),
    ConfigKey("acks", _STRING, "1", "Acknowledgements the leader waits for: 0 none (no response at all), 1 the "
              "leader's log, -1 or all every in-sync replica.", OneOf(("all", "-1", "0", "1"))),
    ConfigKey("batch.size", _INT, 16384, "Bytes of records gathered per partition before a batch is sent.",
              _AT_LEAST_0),
    ConfigKey("linger.ms", _LONG, 0, "How long a batch that is not full waits for more records.", _AT_LEAST_0),
    ConfigKey("buffer.memory", _LONG, 32 * 1024 * 1024, "Bytes of records the producer buffers in all.",
              _AT_LEAST_1),
    ConfigKey("block.on.buffer.full", _BOOLEAN, True,
              "When buffer.memory is full, send() waits for space (true) or raises (false)."),
    ConfigKey("compression.type", _STRING, "none", "Codec of each batch: none, gzip, snappy or lz4; zstd with "
              "message.format.version 0.11.0.", OneOf(tuple(_CODECS))),
    ConfigKey("message.format.version", _STRING, "0.8.2", "Extension: the format records are sent in: 0.8.2 "
              "(magic-0 message sets, Produce v0) or 0.11.0 (record batches, Produce v3; v7 for zstd).",
              OneOf(("0.8.2", "0.11.0"))),
    ConfigKey("retries", _INT, 0, "Times a batch is resent after a retriable error (a leader moved...).",
              _AT_LEAST_0),
    ConfigKey("retry.backoff.ms", _LONG, 100, "Pause before a retry, and between metadata refreshes.",
              _AT_LEAST_0),
    ConfigKey("max.request.size", _INT, 1024 * 1024, "Largest request, and so the largest record.", _AT_LEAST_0),
    ConfigKey("client.id", _STRING, "", "A name the brokers log with each request."),
    ConfigKey("timeout.ms", _INT, 30000, "How long the leader waits for the in-sync replicas with acks=-1.",
              _AT_LEAST_0),
    ConfigKey("request.timeout.ms", _INT, 30000, "How long the producer waits for a broker's answer, and how "
              "long a batch may wait for a leader (0.9's key).", _AT_LEAST_0),
    ConfigKey("metadata.fetch.timeout.ms", _LONG, 60000,
              "How long send() waits for the partitions of a topic it has not seen yet.", _AT_LEAST_0),
    ConfigKey("metadata.max.age.ms", _LONG, 300000, "Metadata older than this is refreshed.", _AT_LEAST_0),
    ConfigKey("max.in.flight.requests.per.connection", _INT, 5,
              "Requests sent to a broker without an answer yet; 1 keeps a partition in order across retries.",
              _AT_LEAST_1),
    ConfigKey("reconnect.backoff.ms", _LONG, 10, "Pause before reconnecting to a broker.", _AT_LEAST_0),
    ConfigKey("send.buffer.bytes", _INT, 128 * 1024, "SO_SNDBUF of the producer's sockets.", _AT_LEAST_0),
    ConfigKey("receive.buffer.bytes", _INT, 32 * 1024, "SO_RCVBUF of the producer's sockets.", _AT_LEAST_0),
)})


class RecordTooLargeError(ValueError):
    """A record larger than max.request.size or buffer.memory (the caller's fault)."""


class ProducerConfig(ClientConfig):
    TABLE = PRODUCER_CONFIGS

    def check(self) -> None:
        if not self.bootstrap:
            raise self.invalid("bootstrap.servers", "must name at least one broker as host:port")
        try:
            parse_broker_list(self.bootstrap)
        except ValueError as e:
            raise self.invalid("bootstrap.servers", str(e)) from None
        if self.codec == CODEC_ZSTD and self.magic < 2:
            raise self.invalid("compression.type", "zstd needs message.format.version 0.11.0 (record batches)")

    @property
    def bootstrap(self) -> tuple[str, ...]:
        return self["bootstrap.servers"] or self["metadata.broker.list"]

    @property
    def acks(self) -> int:
        return -1 if self["acks"] == "all" else int(self["acks"])

    @property
    def codec(self) -> int:
        return _CODECS[self["compression.type"]]

    @property
    def magic(self) -> int:
        return message_format_magic(self["message.format.version"])


_clients = iter(range(1, 1 << 62))
_clients_lock = threading.Lock()


class Producer:
    """A thread-safe producer: share one between threads (as Java's). See the module docstring."""

    def __init__(self, config: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        self.config = ProducerConfig(config, **overrides)
        for warning in self.config.warnings:
            log.warning(warning)
        with _clients_lock:
            number = next(_clients)
        self.client_id = self.config["client.id"] or f"producer-{number}"
        c = self.config
        security = ClientSecurity.from_config(c)  # security.protocol, sasl.*, ssl.*: None for PLAINTEXT
        self.metadata = Metadata(MetadataClient(parse_broker_list(c.bootstrap), self.client_id,
                                                c["request.timeout.ms"] / 1000.0, security),
                                 c["retry.backoff.ms"], c["metadata.max.age.ms"])
        self.partitioner = DefaultPartitioner()
        self.accumulator = RecordAccumulator(c["batch.size"], c["linger.ms"], c["buffer.memory"],
                                             c["block.on.buffer.full"], c["retry.backoff.ms"])
        self.sender = Sender(self.accumulator, self.metadata, client_id=self.client_id, acks=c.acks,
                             ack_timeout_ms=c["timeout.ms"], request_timeout_ms=c["request.timeout.ms"],
                             retries=c["retries"], max_request_size=c["max.request.size"],
                             max_in_flight=c["max.in.flight.requests.per.connection"], codec=c.codec, magic=c.magic,
                             reconnect_backoff_ms=c["reconnect.backoff.ms"],
                             send_buffer_bytes=c["send.buffer.bytes"],
                             receive_buffer_bytes=c["receive.buffer.bytes"], security=security)
        self._max_block_s = c["metadata.fetch.timeout.ms"] / 1000.0
        self._max_request_size = c["max.request.size"]
        self._routes: dict[str, tuple[object, list[int], list[int]]] = {}
        self._closed = False
        self.sender.start()

    # ---- sending ------------------------------------------------------------------------------------------

    def send(self, topic: str, value: bytes | str | None = None, key: bytes | str | None = None,
             partition: int | None = None, callback=None) -> RecordFuture:
        """Queue a record and return its future; `callback(metadata, error)` runs when it is answered.

        Blocks only while the topic's metadata is unknown (metadata.fetch.timeout.ms) or buffer.memory is
        full. Raises InvalidPartitionError for a partition the topic does not have, RecordTooLargeError for
        a record above max.request.size.
        """
        if self._closed:
            raise RuntimeError("Cannot send after the producer is closed.")
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"Invalid topic {topic!r}")
        if key is not None and type(key) is not bytes:
            key = _as_bytes(key, "key")
        if value is not None and type(value) is not bytes:
            value = _as_bytes(value, "value")
        size = _OVERHEAD + (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
        if size > self._max_request_size:
            raise RecordTooLargeError(
                f"The message is {size} bytes when serialized which is larger than the maximum request size you "
                "have configured with the max.request.size configuration.")
        route = self._routes.get(topic)
        if route is None or route[0] is not self.metadata.cluster:
            route = self._route(topic)
        chosen = self.partitioner.partition(topic, key, route[1], route[2], partition)
        future, wake = self.accumulator.append(topic, chosen, key, value, size, self._max_block_s)
        if wake:
            self.sender.wakeup()
        if callback is not None:
            future.add_callback(callback)
        return future

    def _route(self, topic: str) -> tuple[object, list[int], list[int]]:
        """(cluster, all partitions, available partitions) of a topic, cached per metadata snapshot."""
        cluster = self.metadata.cluster
        route = self._routes.get(topic)
        if route is not None and route[0] is cluster:
            return route
        if not cluster.topics.get(topic):
            cluster = self.metadata.wait_for_topic(topic, self._max_block_s)
        route = (cluster, cluster.partitions_for(topic), cluster.available_partitions_for(topic))
        self._routes[topic] = route
        return route

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids (waiting for its metadata like send())."""
        return list(self._route(topic)[1])

    def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now, and wait until each record is answered (or failed)."""
        self.accumulator.begin_flush()
        try:
            self.sender.wakeup()
            deadline = None if timeout is None else time.monotonic() + timeout
            for batch in self.accumulator.incomplete():
                remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                if not batch.wait(remaining):
                    raise TimeoutError(f"flush did not complete within {timeout} s")
        finally:
            self.accumulator.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Send what is buffered and stop. timeout=0 (or running out of it) fails unsent records instead."""
        if self._closed:
            return
        self._closed = True
        self.accumulator.close()
        if timeout is not None and timeout <= 0:
            self.sender.force_close()
        else:
            self.sender.initiate_close()
            self.sender.join(timeout)
            if self.sender.is_alive():
                log.warning("The producer did not finish sending within %s s; failing what is left", timeout)
                self.sender.force_close()
        self.sender.join()
        self.metadata.client.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_bytes(data: bytes | str | None, what: str) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"The record's {what} must be bytes, str or None, not {type(data).__name__}")

"""The key and value of `__transaction_state` (Kafka 2.x's TransactionLog, key and value version 0), and which
of its partitions holds a transactional id.

Key, version 0: ``version int16 (0) | transactional_id string``.
Value, version 0::

    version int16 (0) | producer_id int64 | producer_epoch int16 | transaction_timeout_ms int32 |
    transaction_status int8 | transaction_partitions nullable array of (topic string, partition_ids [int32]) |
    transaction_last_update_timestamp_ms int64 | transaction_start_timestamp_ms int64

Strings are int16-length UTF-8, arrays int32-counted (null: -1). The status is the TransactionState id. An
Empty transaction has null partitions (Kafka refuses to write one that has any); we write the topics, and each
topic's partitions, in ascending order. A null value (tombstone) removes the id. Version 0 carries neither the
previous producer id nor the previous epoch: loaded records have none (Kafka 2.x loses them the same way).
"""

from __future__ import annotations

import struct

from zkbroker.coordinator.lookup import java_string_hash, kafka_abs
from zkbroker.protocol.errors import RemoteProtocolError
from zkbroker.protocol.types import Array, Int8, Int16, Int32, Int64, NullableArray, Schema, String
from zkbroker.topic_partition import TopicPartition

from .metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TxnTransitMetadata
from .state import TransactionState

TRANSACTION_STATE_TOPIC = "__transaction_state"
DEFAULT_NUM_PARTITIONS = 50  # transaction.state.log.num.partitions
KEY_VERSION = 0
VALUE_VERSION = 0

_VERSION = struct.Struct(">h")
_KEY = Schema(("transactional_id", String), name="TransactionLogKeyV0")
_VALUE = Schema(
    ("producer_id", Int64),
    ("producer_epoch", Int16),
    ("transaction_timeout_ms", Int32),
    ("transaction_status", Int8),
    ("transaction_partitions", NullableArray(("topic", String), ("partition_ids", Array(Int32)))),
    ("transaction_last_update_timestamp_ms", Int64),
    ("transaction_start_timestamp_ms", Int64),
    name="TransactionLogValueV0",
)


class TransactionLogFormatError(RemoteProtocolError):
    """A `__transaction_state` record this broker cannot read."""


def partition_for(transactional_id: str, num_partitions: int = DEFAULT_NUM_PARTITIONS) -> int:
    """The partition of `__transaction_state` holding `transactional_id`, whose leader is its coordinator:
    Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions."""
    return kafka_abs(java_string_hash(transactional_id)) % num_partitions


def encode_key(transactional_id: str) -> bytes:
    return _VERSION.pack(KEY_VERSION) + _KEY.encode({"transactional_id": transactional_id})


def decode_key(data: bytes) -> str:
    version = _version(data, "key")
    if version != KEY_VERSION:
        raise TransactionLogFormatError(f"unknown __transaction_state key version {version}")
    return _decode(_KEY, data, "key").transactional_id


def encode_value(transit: TxnTransitMetadata) -> bytes:
    if transit.state == TransactionState.EMPTY and transit.topic_partitions:
        raise ValueError(f"an Empty transaction holds no partitions: {transit}")
    partitions = None
    if transit.state != TransactionState.EMPTY:
        by_topic: dict[str, list[int]] = {}
        for tp in transit.topic_partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        partitions = [{"topic": topic, "partition_ids": sorted(ids)} for topic, ids in sorted(by_topic.items())]
    return _VERSION.pack(VALUE_VERSION) + _VALUE.encode({
        "producer_id": transit.producer_id,
        "producer_epoch": transit.producer_epoch,
        "transaction_timeout_ms": transit.txn_timeout_ms,
        "transaction_status": int(transit.state),
        "transaction_partitions": partitions,
        "transaction_last_update_timestamp_ms": transit.txn_last_update_timestamp,
        "transaction_start_timestamp_ms": transit.txn_start_timestamp,
    })


def decode_value(data: bytes | None) -> TxnTransitMetadata | None:
    """The transaction a value describes; None for a tombstone (the id expired)."""
    if data is None:
        return None
    version = _version(data, "value")
    if version != VALUE_VERSION:
        raise TransactionLogFormatError(f"unknown __transaction_state value version {version}")
    value = _decode(_VALUE, data, "value")
    try:
        state = TransactionState.from_id(value.transaction_status)
    except ValueError as e:
        raise TransactionLogFormatError(str(e)) from None
    partitions = frozenset(TopicPartition(entry.topic, p) for entry in value.transaction_partitions or ()
                           for p in entry.partition_ids)
    return TxnTransitMetadata(value.producer_id, NO_PRODUCER_ID, value.producer_epoch, NO_PRODUCER_EPOCH,
                              value.transaction_timeout_ms, state, partitions,
                              value.transaction_start_timestamp_ms, value.transaction_last_update_timestamp_ms)


def _version(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise TransactionLogFormatError(f"__transaction_state {what} of {len(data)} bytes")
    return _VERSION.unpack_from(data)[0]


def _decode(schema: Schema, data: bytes, what: str):
    value, end = schema.decode(data, 2)
    if end != len(data):
        raise TransactionLogFormatError(f"__transaction_state {what}: {len(data) - end} bytes after the fields")
    return value

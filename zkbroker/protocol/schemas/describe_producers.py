"""DescribeProducers (61, Kafka 3.0, KIP-664): a partition leader's active producers -- their epoch, last
sequence and timestamp, coordinator epoch and the start offset of the transaction each has open (the producer
state of the partition's log). Only v0, flexible."""

from ..types import CompactArray, CompactNullableString, CompactString, FlexibleSchema, Int16, Int32, Int64

API_KEY = 61

REQUEST = {0: FlexibleSchema(
    ("topics", CompactArray(("name", CompactString), ("partition_indexes", CompactArray(Int32)))),
    name="DescribeProducersRequestV0")}
RESPONSE = {0: FlexibleSchema(
    ("throttle_time_ms", Int32),
    ("topics", CompactArray(("name", CompactString), ("partitions", CompactArray(
        ("partition_index", Int32), ("error_code", Int16), ("error_message", CompactNullableString),
        ("active_producers", CompactArray(
            ("producer_id", Int64), ("producer_epoch", Int32), ("last_sequence", Int32), ("last_timestamp", Int64),
            ("coordinator_epoch", Int32), ("current_txn_start_offset", Int64))))))),
    name="DescribeProducersResponseV0")}

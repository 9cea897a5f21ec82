"""DescribeTransactions (65, Kafka 3.0, KIP-664): a transaction coordinator describes transactional ids it
holds -- state (Kafka's names: Empty, Ongoing, PrepareCommit, ...), timeout, start time, producer id and epoch,
and the partitions of the open transaction. Only v0, flexible."""

from ..types import CompactArray, CompactString, FlexibleSchema, Int16, Int32, Int64

API_KEY = 65

REQUEST = {0: FlexibleSchema(("transactional_ids", CompactArray(CompactString)), name="DescribeTransactionsRequestV0")}
RESPONSE = {0: FlexibleSchema(
    ("throttle_time_ms", Int32),
    ("transaction_states", CompactArray(
        ("error_code", Int16), ("transactional_id", CompactString), ("transaction_state", CompactString),
        ("transaction_timeout_ms", Int32), ("transaction_start_time_ms", Int64), ("producer_id", Int64),
        ("producer_epoch", Int16),
        ("topics", CompactArray(("topic", CompactString), ("partitions", CompactArray(Int32)))))),
    name="DescribeTransactionsResponseV0")}

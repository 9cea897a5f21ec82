"""WriteTxnMarkers (27, Kafka 0.11, KIP-98): a transaction coordinator asks a partition leader to append the
end-transaction markers (transaction_result true: COMMIT, false: ABORT) of producers' transactions, each with
the coordinator epoch of its `__transaction_state` partition.

v1 is the first flexible version (Kafka 2.4); Kafka 4.0 dropped v0. Schemas only: the broker neither sends nor
serves it yet (issue 27); the leader's side of the append is `Log.append(..., coordinator=True)`.
"""

from ..types import Array, Boolean, CompactArray, CompactString, FlexibleSchema, Int16, Int32, Int64, Schema, String

API_KEY = 27


def _request(version: int) -> Schema:
    if version == 0:
        return Schema(("markers", Array(("producer_id", Int64), ("producer_epoch", Int16),
                                        ("transaction_result", Boolean),
                                        ("topics", Array(("name", String), ("partition_indexes", Array(Int32)))),
                                        ("coordinator_epoch", Int32))), name="WriteTxnMarkersRequestV0")
    return FlexibleSchema(("markers", CompactArray(
        ("producer_id", Int64), ("producer_epoch", Int16), ("transaction_result", Boolean),
        ("topics", CompactArray(("name", CompactString), ("partition_indexes", CompactArray(Int32)))),
        ("coordinator_epoch", Int32))), name="WriteTxnMarkersRequestV1")


def _response(version: int) -> Schema:
    if version == 0:
        return Schema(("markers", Array(("producer_id", Int64), ("topics", Array(
            ("name", String), ("partitions", Array(("partition_index", Int32), ("error_code", Int16))))))),
            name="WriteTxnMarkersResponseV0")
    return FlexibleSchema(("markers", CompactArray(("producer_id", Int64), ("topics", CompactArray(
        ("name", CompactString), ("partitions", CompactArray(("partition_index", Int32), ("error_code", Int16))))))),
        name="WriteTxnMarkersResponseV1")


REQUEST = {version: _request(version) for version in range(2)}
RESPONSE = {version: _response(version) for version in range(2)}

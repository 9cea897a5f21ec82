"""AddOffsetsToTxn (25, Kafka 0.11, KIP-98): a transactional producer will commit a group's offsets in its
transaction (TxnOffsetCommit): its coordinator adds that group's `__consumer_offsets` partition to it.

v1 is the same as v0, v2 too (PRODUCER_FENCED may answer), v3 is the first flexible version. Schemas only: the
broker does not serve it yet (issue 27).
"""

from ..types import CompactString, FlexibleSchema, Int16, Int32, Int64, Schema, String

API_KEY = 25


def _request(version: int) -> Schema:
    if version < 3:
        return Schema(("transactional_id", String), ("producer_id", Int64), ("producer_epoch", Int16),
                      ("group_id", String), name=f"AddOffsetsToTxnRequestV{version}")
    return FlexibleSchema(("transactional_id", CompactString), ("producer_id", Int64), ("producer_epoch", Int16),
                          ("group_id", CompactString), name=f"AddOffsetsToTxnRequestV{version}")


def _response(version: int) -> Schema:
    schema = Schema if version < 3 else FlexibleSchema
    return schema(("throttle_time_ms", Int32), ("error_code", Int16), name=f"AddOffsetsToTxnResponseV{version}")


REQUEST = {version: _request(version) for version in range(4)}
RESPONSE = {version: _response(version) for version in range(4)}

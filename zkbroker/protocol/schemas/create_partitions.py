"""CreatePartitions (37, Kafka 1.0, KIP-195): raise a topic's partition count, with the new partitions'
replicas given or assigned by the broker. v1 is v0 (the throttle applies after the response, KIP-219); v2 on
are flexible."""

from ..types import Array, Boolean, Int16, Int32, NullableArray, NullableString, Schema, String

API_KEY = 37

REQUEST = {
    version: Schema(
        ("topics", Array(("name", String), ("count", Int32),
                         ("assignments", NullableArray(("broker_ids", Array(Int32)))))),
        ("timeout_ms", Int32),
        ("validate_only", Boolean),
        name=f"CreatePartitionsRequestV{version}")
    for version in range(2)
}

RESPONSE = {
    version: Schema(
        ("throttle_time_ms", Int32),
        ("results", Array(("name", String), ("error_code", Int16), ("error_message", NullableString))),
        name=f"CreatePartitionsResponseV{version}")
    for version in range(2)
}

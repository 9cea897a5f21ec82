"""DescribeCluster (60, Kafka 2.8, KIP-700): the brokers, the controller and the cluster id, from any broker --
the Admin API's own Metadata. v0 is flexible; v1 (Kafka 3.7, KIP-919) adds the endpoint type asked for and
answered: 1 brokers, 2 controllers (which only a KRaft controller serves). v1 is served because kafka-python
3.0's describe_cluster reads the endpoint type whatever version it got (docs/admin-api.md)."""

from ..types import Boolean, CompactArray, CompactNullableString, CompactString, FlexibleSchema, Int8, Int16, Int32

API_KEY = 60

#: cluster_authorized_operations when the request did not ask for them (Kafka's Integer.MIN_VALUE)
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
#: ... and when it did, with no authorizer: every operation on the cluster resource, one bit per AclOperation
#: code (CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
#: IDEMPOTENT_WRITE 12)
ALL_CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))

ENDPOINT_BROKERS = 1
ENDPOINT_CONTROLLERS = 2


def _request(version: int) -> FlexibleSchema:
    fields = [("include_cluster_authorized_operations", Boolean)]
    if version >= 1:
        fields.append(("endpoint_type", Int8))
    return FlexibleSchema(*fields, name=f"DescribeClusterRequestV{version}")


def _response(version: int) -> FlexibleSchema:
    fields = [("throttle_time_ms", Int32), ("error_code", Int16), ("error_message", CompactNullableString)]
    if version >= 1:
        fields.append(("endpoint_type", Int8))
    fields += [
        ("cluster_id", CompactString),
        ("controller_id", Int32),
        ("brokers", CompactArray(("broker_id", Int32), ("host", CompactString), ("port", Int32),
                                 ("rack", CompactNullableString))),
        ("cluster_authorized_operations", Int32),
    ]
    return FlexibleSchema(*fields, name=f"DescribeClusterResponseV{version}")


REQUEST = {version: _request(version) for version in range(2)}
RESPONSE = {version: _response(version) for version in range(2)}

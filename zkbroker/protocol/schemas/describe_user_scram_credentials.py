"""DescribeUserScramCredentials (50, Kafka 2.7, KIP-554): each user's SCRAM mechanisms and iteration counts (never
the credential). Flexible from v0. Mechanisms: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512. A null user list asks for all."""

from ..types import (
                             CompactArray,
                             CompactNullableArray,
                             CompactNullableString,
                             CompactString,
                             FlexibleSchema,
                             Int8,
                             Int16,
                             Int32,
)

API_KEY = 50

REQUEST = {0: FlexibleSchema(("users", CompactNullableArray(("name", CompactString))),
                             name="DescribeUserScramCredentialsRequestV0")}

RESPONSE = {0: FlexibleSchema(
    ("throttle_time_ms", Int32), ("error_code", Int16), ("error_message", CompactNullableString),
    ("results", CompactArray(("user", CompactString), ("error_code", Int16), ("error_message", CompactNullableString),
                             ("credential_infos", CompactArray(("mechanism", Int8), ("iterations", Int32))))),
    name="DescribeUserScramCredentialsResponseV0")}

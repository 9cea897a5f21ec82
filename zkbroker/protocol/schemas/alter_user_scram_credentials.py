"""AlterUserScramCredentials (51, Kafka 2.7, KIP-554): delete a user's credential for a mechanism, or upsert one
from a salt and the salted password (the client runs PBKDF2; the broker derives the stored and server keys).
Flexible from v0. Mechanisms: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512."""

from ..types import CompactArray, CompactBytes, CompactNullableString, CompactString, FlexibleSchema, Int8, Int16, Int32

API_KEY = 51

REQUEST = {0: FlexibleSchema(
    ("deletions", CompactArray(("name", CompactString), ("mechanism", Int8))),
    ("upsertions", CompactArray(("name", CompactString), ("mechanism", Int8), ("iterations", Int32),
                                ("salt", CompactBytes), ("salted_password", CompactBytes))),
    name="AlterUserScramCredentialsRequestV0")}

RESPONSE = {0: FlexibleSchema(
    ("throttle_time_ms", Int32),
    ("results", CompactArray(("user", CompactString), ("error_code", Int16), ("error_message", CompactNullableString))),
    name="AlterUserScramCredentialsResponseV0")}

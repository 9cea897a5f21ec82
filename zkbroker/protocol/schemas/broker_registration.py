"""BrokerRegistration (62): a KRaft broker introduces itself to the active controller (KIP-631, controller
listener only). Version 0, flexible: its id, the cluster id it was formatted for, an incarnation id new at every
start, its listeners, the features it supports and its rack. The answer carries the broker epoch the registration
got (-1 on error); the broker names it in every heartbeat.
"""

from ..types import (
    CompactArray,
    CompactNullableString,
    CompactString,
    FlexibleSchema,
    Int16,
    Int32,
    Int64,
    UInt16,
    Uuid,
)

API_KEY = 62

REQUEST = {
    0: FlexibleSchema(
        ("broker_id", Int32),
        ("cluster_id", CompactString),
        ("incarnation_id", Uuid),
        ("listeners", CompactArray(("name", CompactString), ("host", CompactString), ("port", UInt16),
                                   ("security_protocol", Int16))),
        ("features", CompactArray(("name", CompactString), ("min_supported_version", Int16),
                                  ("max_supported_version", Int16))),
        ("rack", CompactNullableString),
        name="BrokerRegistrationRequestV0"),
}

RESPONSE = {
    0: FlexibleSchema(("throttle_time_ms", Int32), ("error_code", Int16), ("broker_epoch", Int64),
                      name="BrokerRegistrationResponseV0"),
}

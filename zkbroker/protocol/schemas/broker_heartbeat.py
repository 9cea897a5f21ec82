"""BrokerHeartbeat (63): a KRaft broker's lease with the active controller (KIP-631, controller listener only).
Version 0, flexible. The request says how far the broker's metadata has caught up (CurrentMetadataOffset) and
whether it wants to be fenced or to shut down; the answer whether it is caught up, fenced, and may shut down
now (after a controlled shutdown moved its leaderships away).
"""

from ..types import Boolean, FlexibleSchema, Int16, Int32, Int64

API_KEY = 63

REQUEST = {
    0: FlexibleSchema(("broker_id", Int32), ("broker_epoch", Int64), ("current_metadata_offset", Int64),
                      ("want_fence", Boolean), ("want_shut_down", Boolean), name="BrokerHeartbeatRequestV0"),
}

RESPONSE = {
    0: FlexibleSchema(("throttle_time_ms", Int32), ("error_code", Int16), ("is_caught_up", Boolean),
                      ("is_fenced", Boolean), ("should_shut_down", Boolean), name="BrokerHeartbeatResponseV0"),
}

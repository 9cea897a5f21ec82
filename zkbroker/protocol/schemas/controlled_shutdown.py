"""ControlledShutdown (7): broker -> controller, "move my leaderships away before I stop".

v0 (0.8.x) is sent with a non-standard request header without client_id (see headers.py);
v1 is the same body under the standard header. The answer lists the partitions the broker
still leads; it retries until the list is empty.
"""

from ..types import Array, Int16, Int32, Schema, String

API_KEY = 7

REQUEST = {
    version: Schema(("broker_id", Int32), name=f"ControlledShutdownRequestV{version}")
    for version in (0, 1)
}

RESPONSE = {
    version: Schema(
        ("error_code", Int16),
        ("partitions_remaining", Array(("topic", String), ("partition", Int32))),
        name=f"ControlledShutdownResponseV{version}",
    )
    for version in (0, 1)
}

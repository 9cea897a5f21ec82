"""FindCoordinator (10) -- ConsumerMetadataRequest in 0.8.2: which broker serves a group.

v0 carries only the group id; the answer is an error code and one broker.
"""

from ..types import Int16, Int32, Schema, String

API_KEY = 10

REQUEST = {0: Schema(("group_id", String), name="FindCoordinatorRequestV0")}

RESPONSE = {
    0: Schema(
        ("error_code", Int16),
        ("node_id", Int32),
        ("host", String),
        ("port", Int32),
        name="FindCoordinatorResponseV0",
    )
}

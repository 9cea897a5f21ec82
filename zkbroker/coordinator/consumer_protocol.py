"""The "consumer" protocol type's payloads (Kafka's ConsumerProtocol, version 0): what a member sends in
JoinGroup (its subscription) and what the leader hands each member in SyncGroup (its assignment). The broker
never needs them to run a group -- they are opaque bytes to the coordinator -- but tools read them to say
which member owns which partition. Later versions append fields; a reader of version 0 ignores them.
"""

from __future__ import annotations

from zkbroker.protocol.types import Array, Int16, Int32, NullableBytes, Schema, String

SUBSCRIPTION = Schema(("version", Int16), ("topics", Array(String)), ("user_data", NullableBytes),
                      name="ConsumerProtocolSubscription")
ASSIGNMENT = Schema(("version", Int16), ("partitions", Array(("topic", String), ("partitions", Array(Int32)))),
                    ("user_data", NullableBytes), name="ConsumerProtocolAssignment")


def decode_subscription(data: bytes) -> list[str]:
    if not data:
        return []
    value, _ = SUBSCRIPTION.decode(memoryview(data), 0)
    return list(value.topics)


def encode_subscription(topics: list[str]) -> bytes:
    return SUBSCRIPTION.encode({"version": 0, "topics": topics, "user_data": None})


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of an assignment; empty for no assignment at all."""
    if not data:
        return []
    value, _ = ASSIGNMENT.decode(memoryview(data), 0)
    return [(t.topic, p) for t in value.partitions for p in t.partitions]


def encode_assignment(partitions: list[tuple[str, int]]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return ASSIGNMENT.encode({"version": 0, "partitions": [{"topic": t, "partitions": ps}
                                                           for t, ps in by_topic.items()], "user_data": None})

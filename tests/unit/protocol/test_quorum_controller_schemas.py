"""The quorum controller's RPCs (AlterPartition 56, BrokerRegistration 62, BrokerHeartbeat 63, UnregisterBroker 64,
AllocateProducerIds 67): every version round-trips, and the bytes of a few are written out by hand from Kafka
3.7's message JSON (flexible: compact arrays and strings are length + 1, a tag buffer ends every struct)."""

from __future__ import annotations

import pytest

from zkbroker.protocol.api import REQUEST_SCHEMAS, RESPONSE_SCHEMAS

TOPIC_ID = bytes(range(16))

REQUESTS = {
    (56, 0): {"broker_id": 1, "broker_epoch": 7, "topics": [
        {"topic_name": "t", "partitions": [{"partition_index": 0, "leader_epoch": 2, "new_isr": [1, 2],
                                            "partition_epoch": 3}]}]},
    (56, 1): {"broker_id": 1, "broker_epoch": 7, "topics": [
        {"topic_name": "t", "partitions": [{"partition_index": 0, "leader_epoch": 2, "new_isr": [1, 2],
                                            "leader_recovery_state": 0, "partition_epoch": 3}]}]},
    (56, 2): {"broker_id": 1, "broker_epoch": 7, "topics": [
        {"topic_id": TOPIC_ID, "partitions": [{"partition_index": 0, "leader_epoch": 2, "new_isr": [1, 2],
                                               "leader_recovery_state": 0, "partition_epoch": 3}]}]},
    (56, 3): {"broker_id": 1, "broker_epoch": 7, "topics": [
        {"topic_id": TOPIC_ID, "partitions": [{"partition_index": 0, "leader_epoch": 2,
                                               "new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": 7}],
                                               "leader_recovery_state": 0, "partition_epoch": 3}]}]},
    (62, 0): {"broker_id": 1, "cluster_id": "c", "incarnation_id": TOPIC_ID,
              "listeners": [{"name": "PLAINTEXT", "host": "h", "port": 9092, "security_protocol": 0}],
              "features": [{"name": "metadata.version", "min_supported_version": 1, "max_supported_version": 19}],
              "rack": None},
    (63, 0): {"broker_id": 1, "broker_epoch": 7, "current_metadata_offset": 9, "want_fence": False,
              "want_shut_down": True},
    (64, 0): {"broker_id": 3},
    (67, 0): {"broker_id": 1, "broker_epoch": 7},
}


def _response(key: int, version: int) -> dict:
    if key == 56:
        partition = {"partition_index": 0, "error_code": 0, "leader_id": 1, "leader_epoch": 2, "isr": [1],
                     "leader_recovery_state": 0, "partition_epoch": 4}
        if version < 1:
            del partition["leader_recovery_state"]
        topic = {"topic_id": TOPIC_ID} if version >= 2 else {"topic_name": "t"}
        return {"throttle_time_ms": 0, "error_code": 0, "topics": [{**topic, "partitions": [partition]}]}
    return {62: {"throttle_time_ms": 0, "error_code": 0, "broker_epoch": 7},
            63: {"throttle_time_ms": 0, "error_code": 0, "is_caught_up": True, "is_fenced": False,
                 "should_shut_down": False},
            64: {"throttle_time_ms": 0, "error_code": 0, "error_message": None},
            67: {"throttle_time_ms": 0, "error_code": 0, "producer_id_start": 1000, "producer_id_len": 1000}}[key]


@pytest.mark.parametrize("key, version", sorted(REQUESTS))
def test_each_request_and_response_round_trips(key, version):
    for schema, value in ((REQUEST_SCHEMAS[(key, version)], REQUESTS[(key, version)]),
                          (RESPONSE_SCHEMAS[(key, version)], _response(key, version))):
        encoded = schema.encode(value)
        decoded, end = schema.decode(memoryview(encoded), 0)
        assert end == len(encoded)
        assert schema.encode(decoded) == encoded


def test_broker_heartbeat_v0_request_bytes():
    encoded = REQUEST_SCHEMAS[(63, 0)].encode(REQUESTS[(63, 0)])
    assert encoded == (b"\x00\x00\x00\x01" + (7).to_bytes(8, "big") + (9).to_bytes(8, "big")
                       + b"\x00\x01" + b"\x00")


def test_alter_partition_v2_request_bytes_name_the_topic_by_id():
    encoded = REQUEST_SCHEMAS[(56, 2)].encode(REQUESTS[(56, 2)])
    partition = (b"\x00\x00\x00\x00" + b"\x00\x00\x00\x02" + b"\x03" + b"\x00\x00\x00\x01\x00\x00\x00\x02"
                 + b"\x00" + b"\x00\x00\x00\x03" + b"\x00")
    assert encoded == (b"\x00\x00\x00\x01" + (7).to_bytes(8, "big") + b"\x02" + TOPIC_ID + b"\x02" + partition
                       + b"\x00" + b"\x00")


def test_broker_registration_response_v0_bytes():
    encoded = RESPONSE_SCHEMAS[(62, 0)].encode(_response(62, 0))
    assert encoded == b"\x00\x00\x00\x00" + b"\x00\x00" + (7).to_bytes(8, "big") + b"\x00"

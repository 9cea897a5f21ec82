"""Every znode's JSON byte for byte as Kafka 0.8.2 writes it (reference: kafka-0.8-internals.md §1)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkbroker.zk import paths
from zkbroker.zk.znodes import (
    BrokerRegistration,
    ConfigChange,
    ConsumerRegistration,
    ControllerRegistration,
    EntityConfig,
    LeaderIsrState,
    PartitionReplicas,
    TopicAssignment,
    ZnodeFormatError,
    decode_config_change,
    decode_controller_epoch,
    decode_offset,
    decode_preferred_election,
    decode_reassignment,
    encode_config_change,
    encode_controller_epoch,
    encode_entity_config_change,
    encode_offset,
    encode_preferred_election,
    encode_reassignment,
)


def test_broker_registration_bytes():
    reg = BrokerRegistration(1, "h", 9092, -1, "1425000000000")
    assert reg.encode() == b'{"version":1,"host":"h","port":9092,"jmx_port":-1,"timestamp":"1425000000000"}'
    assert BrokerRegistration.decode(1, reg.encode()) == reg


def test_broker_registration_same_endpoint_ignores_timestamp():
    a = BrokerRegistration(1, "h", 9092, -1, "1")
    assert a.same_endpoint(BrokerRegistration(1, "h", 9092, -1, "2"))
    assert not a.same_endpoint(BrokerRegistration(1, "h", 9093, -1, "1"))


def test_controller_bytes_and_legacy_plain_integer():
    reg = ControllerRegistration(2, "1425000000000")
    assert reg.encode() == b'{"version":1,"brokerid":2,"timestamp":"1425000000000"}'
    assert ControllerRegistration.decode(reg.encode()) == reg
    assert ControllerRegistration.decode(b"3").broker_id == 3  # Kafka 0.8.0 wrote a bare id


def test_controller_epoch_is_a_decimal_string():
    assert encode_controller_epoch(3) == b"3"
    assert decode_controller_epoch(b"3") == 3
    with pytest.raises(ZnodeFormatError):
        decode_controller_epoch(b"three")


def test_partition_state_bytes():
    state = LeaderIsrState(leader=1, leader_epoch=0, controller_epoch=1, isr=(1, 2))
    assert state.encode() == b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":[1,2]}'
    assert LeaderIsrState.decode(state.encode()) == state


@given(st.integers(-1, 2**31 - 1), st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1),
       st.lists(st.integers(0, 2**31 - 1), max_size=6))
def test_partition_state_fast_codec_writes_what_json_writes_and_reads_it_back(leader, leader_epoch, epoch, isr):
    state = LeaderIsrState(leader, leader_epoch, epoch, tuple(isr))
    assert state.encode() == json.dumps({"version": 1, "leader": leader, "leader_epoch": leader_epoch,
                                         "controller_epoch": epoch, "isr": isr}, separators=(",", ":")).encode()
    assert LeaderIsrState.decode(state.encode()) == state


def test_topic_assignment_uses_string_partition_keys_in_numeric_order():
    assignment = TopicAssignment({10: (1,), 0: (1, 2), 1: (2, 0)})
    assert assignment.encode() == b'{"version":1,"partitions":{"0":[1,2],"1":[2,0],"10":[1]}}'
    assert TopicAssignment.decode(assignment.encode()) == assignment


def test_topic_config_values_are_strings_and_empty_is_an_empty_object():
    assert EntityConfig({}).encode() == b'{"version":1,"config":{}}'
    assert EntityConfig({"retention.ms": "1000"}).encode() == b'{"version":1,"config":{"retention.ms":"1000"}}'


def test_config_change_notifications_in_every_form_kafka_2x_reads():
    assert encode_entity_config_change(ConfigChange("topics", "t")) == b'{"version":2,"entity_path":"topics/t"}'
    assert encode_entity_config_change(ConfigChange("brokers", "<default>")) == (
        b'{"version":2,"entity_path":"brokers/<default>"}')
    assert decode_config_change(b'{"version":2,"entity_path":"brokers/1"}') == ConfigChange("brokers", "1")
    # a user's client: the entity type is the first element, the rest is the name
    assert decode_config_change(b'{"version":2,"entity_path":"users/alice/clients/app"}') == ConfigChange(
        "users", "alice/clients/app")
    assert decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"t"}') == ConfigChange(
        "topics", "t")
    assert decode_config_change(b'{"version":1,"entity_type":"clients","entity_name":"c"}') == ConfigChange(
        "clients", "c")


@pytest.mark.parametrize("data", [
    b"", b"{", b"42", b"[]", b'{"version":3,"entity_path":"topics/t"}', b'{"entity_path":"topics/t"}',
    b'{"version":2}', b'{"version":2,"entity_path":"topics"}', b'{"version":2,"entity_path":"topics/"}',
    b'{"version":2,"entity_path":"groups/g"}', b'{"version":2,"entity_path":7}',
    b'{"version":1,"entity_type":"brokers","entity_name":"1"}', b'{"version":1,"entity_type":"topics"}',
])
def test_a_config_change_notification_in_no_known_form_is_refused(data):
    with pytest.raises(ZnodeFormatError):
        decode_config_change(data)


def test_admin_nodes():
    assert encode_config_change("mytopic") == b'"mytopic"'
    assert decode_config_change(b'"mytopic"') == ConfigChange("topics", "mytopic")
    moves = [PartitionReplicas("t", 0, (4, 5, 6))]
    assert encode_reassignment(moves) == b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[4,5,6]}]}'
    assert decode_reassignment(encode_reassignment(moves)) == moves
    assert encode_preferred_election([("t", 0)]) == b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
    assert decode_preferred_election(encode_preferred_election([("t", 0)])) == [("t", 0)]


def test_consumer_nodes():
    reg = ConsumerRegistration({"topicA": 2}, "static", "1425000000000")
    assert reg.encode() == b'{"version":1,"subscription":{"topicA":2},"pattern":"static","timestamp":"1425000000000"}'
    assert ConsumerRegistration.decode(reg.encode()) == reg
    assert encode_offset(42) == b"42" and decode_offset(b"42") == 42


@pytest.mark.parametrize("data", [b"", b"not json", b"[]", b'{"version":1}', b'{"leader":"1","leader_epoch":0,'
                                  b'"controller_epoch":1,"isr":[]}', b'{"leader":2147483648,"leader_epoch":0,'
                                  b'"controller_epoch":1,"isr":[]}', b'{"leader":true,"leader_epoch":0,'
                                  b'"controller_epoch":1,"isr":[]}', b'{"leader":1,"leader_epoch":0,'
                                  b'"controller_epoch":1,"isr":[1.5]}', b'{"leader":1,"leader_epoch":0,'
                                  b'"controller_epoch":1,"isr":"1"}'])
def test_malformed_state_is_rejected_with_one_error_type(data):
    with pytest.raises(ZnodeFormatError):
        LeaderIsrState.decode(data)


def test_paths_and_chroot():
    assert paths.partition_state_path("t", 3) == "/brokers/topics/t/partitions/3/state"
    assert paths.consumer_offset_path("g", "t", 0) == "/consumers/g/offsets/t/0"
    assert paths.split_chroot("a:1,b:2/kafka/x") == ("a:1,b:2", "/kafka/x")
    assert paths.split_chroot("a:1") == ("a:1", "")
    assert paths.COMMON_PATHS == ("/consumers", "/brokers/ids", "/brokers/topics", "/config/changes",
                                  "/config/topics", "/admin/delete_topics")


def test_producer_id_block_is_kafkas_json_and_blocks_follow_one_another():
    from zkbroker.server.producer_id_manager import next_block
    from zkbroker.zk.znodes import ProducerIdBlock

    block = ProducerIdBlock(2, 1000, 1999)
    assert block.encode() == b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}'
    assert ProducerIdBlock.decode(block.encode()) == block
    assert next_block(1, None) == ProducerIdBlock(1, 0, 999)
    assert next_block(3, block) == ProducerIdBlock(3, 2000, 2999)
    from zkbroker.server.producer_id_manager import ProducerIdsExhaustedError

    with pytest.raises(ProducerIdsExhaustedError):  # Long.MAX_VALUE: no block fits after it
        next_block(1, ProducerIdBlock(2, 2**63 - 1000, 2**63 - 1))

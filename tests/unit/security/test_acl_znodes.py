"""The ACL znodes and change notifications byte for byte as Kafka 2.x's SimpleAclAuthorizer writes them."""

from __future__ import annotations

import pytest

from zkbroker.security.acl import AclEntry, AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType
from zkbroker.security.acl_znodes import (
    acl_change_prefix,
    acl_znode_path,
    decode_acl_change,
    decode_acls,
    encode_acl_change,
    encode_acls,
)
from zkbroker.zk.znodes import ZnodeFormatError

ALICE_READ = AclEntry("User:alice", AclPermissionType.ALLOW, AclOperation.READ, "*")
BOB_DENY = AclEntry("User:bob", AclPermissionType.DENY, AclOperation.DESCRIBE_CONFIGS, "10.0.0.1")


def test_paths_of_literal_and_prefixed_acls():
    assert acl_znode_path(ResourcePattern(ResourceType.TOPIC, "t")) == "/kafka-acl/Topic/t"
    assert acl_znode_path(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster")) == "/kafka-acl/Cluster/kafka-cluster"
    assert (acl_znode_path(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.PREFIXED))
            == "/kafka-acl-extended/prefixed/TransactionalId/tx")
    assert acl_change_prefix(ResourcePattern(ResourceType.GROUP, "g")) == "/kafka-acl-changes/acl_changes_"
    assert (acl_change_prefix(ResourcePattern(ResourceType.GROUP, "g", PatternType.PREFIXED))
            == "/kafka-acl-extended-changes/acl_changes_")


def test_acl_znode_json_is_kafkas():
    assert encode_acls([ALICE_READ]) == (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}')


def test_acl_znode_round_trip():
    assert decode_acls(encode_acls([ALICE_READ, BOB_DENY])) == {ALICE_READ, BOB_DENY}
    assert b'"operation":"DescribeConfigs"' in encode_acls([BOB_DENY])


def test_acl_znode_as_kafka_writes_it_with_spaces_and_another_key_order():
    data = (b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Deny","operation": "Read",'
            b'"principal": "User:alice"}]}')
    assert decode_acls(data) == {AclEntry("User:alice", AclPermissionType.DENY, AclOperation.READ, "host1")}


def test_empty_znode_means_no_acls():
    assert decode_acls(b"") == frozenset()
    assert decode_acls(None) == frozenset()


@pytest.mark.parametrize("data", [
    b"not json", b'{"version":2,"acls":[]}', b'{"acls":[]}',
    b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Maybe","operation":"Read","host":"*"}]}',
    b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","host":"*"}]}',
])
def test_malformed_acl_znodes_are_refused_with_a_format_error(data):
    with pytest.raises(ZnodeFormatError):
        decode_acls(data)


def test_literal_change_notification_is_type_colon_name():
    pattern = ResourcePattern(ResourceType.TOPIC, "my:topic")
    assert encode_acl_change(pattern) == b"Topic:my:topic"
    assert decode_acl_change(b"Topic:my:topic", extended=False) == pattern
    # Kafka 2.4+ writes the enum name
    assert decode_acl_change(b"TRANSACTIONAL_ID:tx", extended=False) == ResourcePattern(
        ResourceType.TRANSACTIONAL_ID, "tx")


def test_extended_change_notification_is_json():
    pattern = ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED)
    assert encode_acl_change(pattern) == (
        b'{"version":1,"resourceType":"Group","name":"app-","patternType":"PREFIXED"}')
    assert decode_acl_change(encode_acl_change(pattern), extended=True) == pattern
    assert decode_acl_change(b'{"version":1,"resourceType":"GROUP","name":"app-","patternType":"PREFIXED"}',
                             extended=True) == pattern


@pytest.mark.parametrize("data,extended", [
    (b"no-separator", False), (b"Planet:x", False), (b"\xff:x", False),
    (b'{"version":2,"resourceType":"Group","name":"g","patternType":"PREFIXED"}', True),
    (b'{"version":1,"resourceType":"Group","name":"g","patternType":"MATCH"}', True),
])
def test_malformed_change_notifications_are_refused(data, extended):
    with pytest.raises(ZnodeFormatError):
        decode_acl_change(data, extended=extended)

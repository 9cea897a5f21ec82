"""SimpleAclAuthorizer's decisions: the pure cases of Kafka's EndToEndAuthorizationTest and AclAuthorizerTest."""

from __future__ import annotations

import pytest

from zkbroker.security.acl import (
    AUTHORIZATION_ERROR,
    AclAuthorizer,
    AclEntry,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    Resource,
    ResourcePattern,
    ResourceType,
    parse_host,
    parse_super_users,
    validate,
)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
ALICE, BOB = "User:alice", "User:bob"
HOST = "192.168.0.1"
TOPIC = Resource(ResourceType.TOPIC, "e2etopic")
GROUP = Resource(ResourceType.GROUP, "group")
CLUSTER = Resource(ResourceType.CLUSTER, "kafka-cluster")


def topic(name: str, pattern: PatternType = PatternType.LITERAL) -> ResourcePattern:
    return ResourcePattern(ResourceType.TOPIC, name, pattern)


def acl(op: AclOperation, principal: str = ALICE, permission: AclPermissionType = ALLOW,
        host: str = "*") -> AclEntry:
    return AclEntry(principal, permission, op, host)


def authorizer(acls: dict, **kwargs) -> AclAuthorizer:
    return AclAuthorizer(acls, **kwargs)


def test_produce_needs_write_and_describe_comes_with_it():
    az = authorizer({topic("e2etopic"): [acl(Op.WRITE)]})
    assert az.authorize(ALICE, HOST, Op.WRITE, TOPIC)
    assert az.authorize(ALICE, HOST, Op.DESCRIBE, TOPIC)  # implied: metadata for the topic is allowed


def test_produce_without_describe_or_write_is_refused_with_topic_authorization_failed():
    az = authorizer({topic("e2etopic"): [acl(Op.READ, BOB)]})
    assert not az.authorize(ALICE, HOST, Op.DESCRIBE, TOPIC)
    assert not az.authorize(ALICE, HOST, Op.WRITE, TOPIC)
    assert AUTHORIZATION_ERROR[ResourceType.TOPIC] == 29


def test_describe_alone_does_not_allow_write():
    az = authorizer({topic("e2etopic"): [acl(Op.DESCRIBE)]})
    assert az.authorize(ALICE, HOST, Op.DESCRIBE, TOPIC)
    assert not az.authorize(ALICE, HOST, Op.WRITE, TOPIC)


def test_consume_without_read_on_the_group_is_refused_with_group_authorization_failed():
    az = authorizer({topic("e2etopic"): [acl(Op.READ)], ResourcePattern(ResourceType.GROUP, "other"): [acl(Op.READ)]})
    assert az.authorize(ALICE, HOST, Op.READ, TOPIC)
    assert not az.authorize(ALICE, HOST, Op.READ, GROUP)
    assert AUTHORIZATION_ERROR[ResourceType.GROUP] == 30


def test_implied_operations():
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert authorizer({topic("e2etopic"): [acl(op)]}).authorize(ALICE, HOST, Op.DESCRIBE, TOPIC), op
    for op in (Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS):
        assert not authorizer({topic("e2etopic"): [acl(op)]}).authorize(ALICE, HOST, Op.DESCRIBE, TOPIC), op
    az = authorizer({topic("e2etopic"): [acl(Op.ALTER_CONFIGS)]})
    assert az.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, TOPIC)
    assert not authorizer({topic("e2etopic"): [acl(Op.DESCRIBE_CONFIGS)]}).authorize(
        ALICE, HOST, Op.ALTER_CONFIGS, TOPIC)
    assert not authorizer({topic("e2etopic"): [acl(Op.READ)]}).authorize(ALICE, HOST, Op.WRITE, TOPIC)


def test_all_allows_every_operation():
    az = authorizer({topic("e2etopic"): [acl(Op.ALL)]})
    for op in Op:
        assert az.authorize(ALICE, HOST, op, TOPIC), op


def test_deny_wins_over_allow():
    az = authorizer({topic("e2etopic"): [acl(Op.READ), acl(Op.READ, permission=DENY)]})
    assert not az.authorize(ALICE, HOST, Op.READ, TOPIC)


def test_deny_from_a_wildcard_principal_or_a_wildcard_resource_wins_over_a_literal_allow():
    az = authorizer({topic("e2etopic"): [acl(Op.WRITE)], topic("*"): [acl(Op.WRITE, "User:*", DENY)]})
    assert not az.authorize(ALICE, HOST, Op.WRITE, TOPIC)


def test_deny_all_denies_everything_but_a_deny_of_read_leaves_describe():
    az = authorizer({topic("e2etopic"): [acl(Op.ALL), acl(Op.READ, permission=DENY)]})
    assert not az.authorize(ALICE, HOST, Op.READ, TOPIC)
    assert az.authorize(ALICE, HOST, Op.DESCRIBE, TOPIC)
    assert az.authorize(ALICE, HOST, Op.WRITE, TOPIC)
    az = authorizer({topic("e2etopic"): [acl(Op.ALL), acl(Op.ALL, permission=DENY)]})
    assert not az.authorize(ALICE, HOST, Op.DESCRIBE, TOPIC)


def test_prefixed_acls_match_names_that_start_with_the_prefix():
    az = authorizer({topic("e2e", PatternType.PREFIXED): [acl(Op.WRITE)]})
    assert az.authorize(ALICE, HOST, Op.WRITE, TOPIC)
    assert az.authorize(ALICE, HOST, Op.WRITE, Resource(ResourceType.TOPIC, "e2e"))
    assert not az.authorize(ALICE, HOST, Op.WRITE, Resource(ResourceType.TOPIC, "e2"))
    assert not az.authorize(ALICE, HOST, Op.WRITE, Resource(ResourceType.TOPIC, "other"))
    # a prefixed group ACL does not cover a topic of that name
    assert not authorizer({ResourcePattern(ResourceType.GROUP, "e2e", PatternType.PREFIXED): [acl(Op.READ)]}
                          ).authorize(ALICE, HOST, Op.READ, TOPIC)


def test_a_literal_acl_is_not_a_prefix():
    az = authorizer({topic("e2e"): [acl(Op.WRITE)]})
    assert not az.authorize(ALICE, HOST, Op.WRITE, TOPIC)


def test_prefixed_deny_wins_over_literal_allow():
    az = authorizer({topic("e2etopic"): [acl(Op.READ)],
                     topic("e2e", PatternType.PREFIXED): [acl(Op.READ, permission=DENY)]})
    assert not az.authorize(ALICE, HOST, Op.READ, TOPIC)


def test_wildcard_resource_covers_every_name_of_its_type():
    az = authorizer({topic("*"): [acl(Op.READ)]})
    assert az.authorize(ALICE, HOST, Op.READ, TOPIC)
    assert az.authorize(ALICE, HOST, Op.READ, Resource(ResourceType.TOPIC, "any"))
    assert not az.authorize(ALICE, HOST, Op.READ, GROUP)


def test_wildcard_principal_matches_every_user():
    az = authorizer({topic("e2etopic"): [acl(Op.READ, "User:*")]})
    assert az.authorize(ALICE, HOST, Op.READ, TOPIC)
    assert az.authorize(BOB, HOST, Op.READ, TOPIC)


def test_principals_are_compared_whole_type_included():
    az = authorizer({topic("e2etopic"): [acl(Op.READ, "User:alice")]})
    assert not az.authorize("User:alice2", HOST, Op.READ, TOPIC)
    assert not az.authorize("Group:alice", HOST, Op.READ, TOPIC)


def test_hosts():
    az = authorizer({topic("e2etopic"): [acl(Op.READ, host="192.168.0.1"), acl(Op.WRITE, host="*")]})
    assert az.authorize(ALICE, "192.168.0.1", Op.READ, TOPIC)
    assert not az.authorize(ALICE, "192.168.0.2", Op.READ, TOPIC)
    assert az.authorize(ALICE, "192.168.0.2", Op.WRITE, TOPIC)
    az = authorizer({topic("e2etopic"): [acl(Op.READ), acl(Op.READ, permission=DENY, host="10.0.0.9")]})
    assert not az.authorize(ALICE, "10.0.0.9", Op.READ, TOPIC)
    assert az.authorize(ALICE, "10.0.0.8", Op.READ, TOPIC)


def test_super_user_is_allowed_everything_even_against_a_deny():
    az = authorizer({topic("e2etopic"): [acl(Op.ALL, "User:*", DENY)]}, super_users=["User:admin"])
    assert az.authorize("User:admin", HOST, Op.WRITE, TOPIC)
    assert az.authorize("User:admin", HOST, Op.CLUSTER_ACTION, CLUSTER)
    assert not az.authorize(ALICE, HOST, Op.WRITE, TOPIC)


def test_no_acl_found_is_refused_by_default_and_allowed_when_configured():
    assert not authorizer({}).authorize(ALICE, HOST, Op.READ, TOPIC)
    assert authorizer({}, allow_everyone_if_no_acl_found=True).authorize(ALICE, HOST, Op.READ, TOPIC)


def test_allow_everyone_if_no_acl_found_does_not_open_a_resource_that_has_acls_for_someone_else():
    az = authorizer({topic("e2etopic"): [acl(Op.READ, BOB)]}, allow_everyone_if_no_acl_found=True)
    assert not az.authorize(ALICE, HOST, Op.READ, TOPIC)
    assert az.authorize(ALICE, HOST, Op.READ, Resource(ResourceType.TOPIC, "open"))


def test_from_config_reads_super_users_and_allow_everyone():
    az = AclAuthorizer.from_config({"super.users": "User:admin; User:broker", "allow.everyone.if.no.acl.found": "true"})
    assert az.super_users == {"User:admin", "User:broker"}
    assert az.allow_everyone_if_no_acl_found
    assert not AclAuthorizer.from_config({}).allow_everyone_if_no_acl_found
    with pytest.raises(AclError, match="allow.everyone.if.no.acl.found"):
        AclAuthorizer.from_config({"allow.everyone.if.no.acl.found": "yes"})


def test_set_acls_replaces_and_an_empty_set_removes():
    az = authorizer({topic("e2etopic"): [acl(Op.READ)]})
    az.set_acls(topic("e2etopic"), [acl(Op.WRITE)])
    assert not az.authorize(ALICE, HOST, Op.READ, TOPIC)
    az.set_acls(topic("e2etopic"), [])
    assert az.acls() == {}


def test_unsupported_operation_for_a_resource_type_is_refused():
    group = ResourcePattern(ResourceType.GROUP, "g")
    with pytest.raises(AclError, match="Write is not an operation on a Group"):
        validate(group, acl(Op.WRITE))
    validate(group, acl(Op.ALL))
    # the cache takes whatever ZooKeeper holds: a broker never fails on another tool's ACL
    assert not authorizer({group: [acl(Op.WRITE)]}).authorize(ALICE, HOST, Op.READ, Resource(ResourceType.GROUP, "g"))


def test_bad_principals_hosts_and_patterns_are_refused():
    with pytest.raises(AclError):
        AclEntry("alice", ALLOW, Op.READ)
    with pytest.raises(AclError):
        parse_host("not-an-ip")
    assert parse_host("::0001") == "::1"
    with pytest.raises(AclError):
        ResourcePattern(ResourceType.TOPIC, "*", PatternType.PREFIXED)
    with pytest.raises(AclError):
        ResourcePattern(ResourceType.TOPIC, "")
    assert parse_super_users("") == frozenset()


def test_names_parse_as_znode_labels_and_as_wire_enum_names():
    assert AclOperation.parse("DescribeConfigs") is AclOperation.parse("DESCRIBE_CONFIGS") is Op.DESCRIBE_CONFIGS
    assert ResourceType.parse("TRANSACTIONAL_ID") is ResourceType.parse("TransactionalId")
    with pytest.raises(AclError, match="unknown operation"):
        AclOperation.parse("Fly")


def test_kafka_strings_for_the_acls_tool():
    assert str(acl(Op.READ)) == "User:alice has Allow permission for operations: Read from hosts: *"
    assert str(topic("t", PatternType.PREFIXED)) == "Topic:PREFIXED:t"

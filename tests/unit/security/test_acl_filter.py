"""AclBindingFilter as DescribeAcls/DeleteAcls select ACLs (KIP-140, KIP-290): open fields match anything, MATCH
selects the patterns that apply to a name, wire codes (1 any, 2 match) parse and unknown ones are refused."""

import pytest

from zkbroker.security.acl import (
    AclEntry,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from zkbroker.security.acl_filter import AclBindingFilter

TOPIC = ResourceType.TOPIC
ALICE_READ = AclEntry("User:alice", AclPermissionType.ALLOW, AclOperation.READ)
LITERAL = ResourcePattern(TOPIC, "app-orders")
WILDCARD = ResourcePattern(TOPIC, "*")
PREFIX = ResourcePattern(TOPIC, "app-", PatternType.PREFIXED)
OTHER_PREFIX = ResourcePattern(TOPIC, "web-", PatternType.PREFIXED)
GROUP = ResourcePattern(ResourceType.GROUP, "app-orders")


def test_match_selects_the_literal_name_the_wildcard_and_each_prefix_of_the_name():
    f = AclBindingFilter(TOPIC, "app-orders", "MATCH")
    assert [p for p in (LITERAL, WILDCARD, PREFIX, OTHER_PREFIX, GROUP) if f.matches_pattern(p)] == [
        LITERAL, WILDCARD, PREFIX]


def test_a_literal_filter_selects_its_exact_pattern_and_open_fields_match_anything():
    assert AclBindingFilter(TOPIC, "app-").matches_pattern(PREFIX) is False
    assert AclBindingFilter(TOPIC, "app-", PatternType.PREFIXED).matches_pattern(PREFIX)
    assert AclBindingFilter(None, None, None).matches(GROUP, ALICE_READ)
    assert not AclBindingFilter(None, None, None, principal="User:bob").matches(GROUP, ALICE_READ)
    assert not AclBindingFilter(None, None, None, operation=AclOperation.WRITE).matches(GROUP, ALICE_READ)


def test_wire_codes():
    f = AclBindingFilter.from_wire(2, "t", 4, None, None, 1, 3)
    assert (f.resource_type, f.pattern_type, f.operation, f.permission) == (
        TOPIC, PatternType.PREFIXED, None, AclPermissionType.ALLOW)
    assert AclBindingFilter.from_wire(1, None, 2, None, None, 1, 1).pattern_type == "MATCH"
    with pytest.raises(AclError, match="unknown operation code 0"):
        AclBindingFilter.from_wire(2, "t", 3, None, None, 0, 1)

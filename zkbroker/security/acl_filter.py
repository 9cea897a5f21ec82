"""ACL bindings and binding filters, as DescribeAcls, DeleteAcls and kafka-acls select ACLs (Kafka's
AclBindingFilter, KIP-140 and KIP-290). A filter field left open (None) matches anything; a pattern-type filter
of MATCH selects the patterns that would apply to the named resource: its literal name, the wildcard `*`, and
every prefix pattern the name starts with. Wire codes: 1 is ANY for every enum, 2 is MATCH for pattern types."""

from __future__ import annotations

from dataclasses import dataclass

from .acl import (
    WILDCARD_RESOURCE,
    AclEntry,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

ANY = 1
MATCH = 2


def _by_code(cls, code: int, what: str):
    for member in cls:
        if member.code == code:
            return member
    raise AclError(f"unknown {what} code {code}")


def resource_type_of(code: int) -> ResourceType:
    return _by_code(ResourceType, code, "resource type")


def operation_of(code: int) -> AclOperation:
    return _by_code(AclOperation, code, "operation")


def permission_of(code: int) -> AclPermissionType:
    return _by_code(AclPermissionType, code, "permission type")


def pattern_type_of(code: int) -> PatternType:
    return _by_code(PatternType, code, "pattern type")


@dataclass(frozen=True)
class AclBindingFilter:
    resource_type: ResourceType | None = None
    name: str | None = None
    pattern_type: PatternType | str | None = PatternType.LITERAL  # "MATCH", a PatternType, or None for any
    principal: str | None = None
    host: str | None = None
    operation: AclOperation | None = None
    permission: AclPermissionType | None = None

    @classmethod
    def from_wire(cls, resource_type: int, name: str | None, pattern_type: int, principal: str | None,
                  host: str | None, operation: int, permission: int) -> AclBindingFilter:
        """A filter as the wire carries it; raises AclError for codes Kafka refuses (UNKNOWN, 0)."""
        pattern: PatternType | str | None
        pattern = None if pattern_type == ANY else "MATCH" if pattern_type == MATCH else pattern_type_of(pattern_type)
        return cls(None if resource_type == ANY else resource_type_of(resource_type), name, pattern, principal, host,
                   None if operation == ANY else operation_of(operation),
                   None if permission == ANY else permission_of(permission))

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type is not None and pattern.resource_type is not self.resource_type:
            return False
        if self.pattern_type == "MATCH":
            if self.name is None:
                return True
            if pattern.pattern_type is PatternType.PREFIXED:
                return self.name.startswith(pattern.name)
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        if self.pattern_type is not None and pattern.pattern_type is not self.pattern_type:
            return False
        return self.name is None or pattern.name == self.name

    def matches_entry(self, entry: AclEntry) -> bool:
        return ((self.principal is None or entry.principal == self.principal)
                and (self.host is None or entry.host == self.host)
                and (self.operation is None or entry.operation is self.operation)
                and (self.permission is None or entry.permission is self.permission))

    def matches(self, pattern: ResourcePattern, entry: AclEntry) -> bool:
        return self.matches_pattern(pattern) and self.matches_entry(entry)

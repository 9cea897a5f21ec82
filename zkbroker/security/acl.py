"""ACLs and the decisions of Kafka 2.x's `kafka.security.auth.SimpleAclAuthorizer` (DESIGN §19).

An ACL says: principal P is allowed (or denied) operation O on resources matching a pattern, from host H.
A request is authorized when its principal is a super user, or when the ACLs matching the resource
(literal name, the wildcard `*`, and every prefixed pattern the name starts with) hold no Deny for it and
at least one Allow; a resource with no ACLs at all is open only if `allow.everyone.if.no.acl.found`.
Allows imply: Read, Write, Delete or Alter imply Describe, AlterConfigs implies DescribeConfigs, and All
matches every operation. Denies imply nothing but through All (a Deny of Read does not deny Describe).

The ZooKeeper side (the znode JSON, the change notifications) is in `acl_znodes.py`; this module never
touches ZooKeeper, so the authorizer's cache is fed by whoever watches the change nodes.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource's name


class AclError(ValueError):
    """An ACL, principal or pattern that Kafka would refuse (whose fault: whoever wrote it)."""


def _from_name(cls, text: str, what: str):
    """Kafka parses these names case-insensitively, and the wire's enum names carry underscores
    (`CLUSTER_ACTION`) where the znode's carry none (`ClusterAction`): accept both."""
    wanted = text.replace("_", "").lower()
    for member in cls:
        if member.label.lower() == wanted:
            return member
    raise AclError(f"unknown {what} {text!r}")


class ResourceType(enum.Enum):
    """What an ACL protects; `label` is the name in znode paths and JSON, `code` the wire's."""

    TOPIC = ("Topic", 2)
    GROUP = ("Group", 3)
    CLUSTER = ("Cluster", 4)
    TRANSACTIONAL_ID = ("TransactionalId", 5)
    DELEGATION_TOKEN = ("DelegationToken", 6)

    def __init__(self, label: str, code: int) -> None:
        self.label = label
        self.code = code

    @classmethod
    def parse(cls, text: str) -> ResourceType:
        return _from_name(cls, text, "resource type")


class AclOperation(enum.Enum):
    ALL = ("All", 2)
    READ = ("Read", 3)
    WRITE = ("Write", 4)
    CREATE = ("Create", 5)
    DELETE = ("Delete", 6)
    ALTER = ("Alter", 7)
    DESCRIBE = ("Describe", 8)
    CLUSTER_ACTION = ("ClusterAction", 9)
    DESCRIBE_CONFIGS = ("DescribeConfigs", 10)
    ALTER_CONFIGS = ("AlterConfigs", 11)
    IDEMPOTENT_WRITE = ("IdempotentWrite", 12)

    def __init__(self, label: str, code: int) -> None:
        self.label = label
        self.code = code

    @classmethod
    def parse(cls, text: str) -> AclOperation:
        return _from_name(cls, text, "operation")


class AclPermissionType(enum.Enum):
    DENY = ("Deny", 2)
    ALLOW = ("Allow", 3)

    def __init__(self, label: str, code: int) -> None:
        self.label = label
        self.code = code

    @classmethod
    def parse(cls, text: str) -> AclPermissionType:
        return _from_name(cls, text, "permission type")


class PatternType(enum.Enum):
    LITERAL = ("Literal", 3)
    PREFIXED = ("Prefixed", 4)

    def __init__(self, label: str, code: int) -> None:
        self.label = label
        self.code = code

    @classmethod
    def parse(cls, text: str) -> PatternType:
        return _from_name(cls, text, "pattern type")


# An Allow of the key also allows these (Kafka's AclAuthorizer: implied Describe and DescribeConfigs).
_IMPLIED_BY = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}

# What an ACL on each resource type may name (AclEntry.supportedOperations); All is always accepted.
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: frozenset({
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE, AclOperation.DELETE,
        AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset({
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
}

# The error a denied request answers, by the resource it was denied on (AclEntry.authorizationError).
AUTHORIZATION_ERROR = {
    ResourceType.TOPIC: 29,  # TOPIC_AUTHORIZATION_FAILED
    ResourceType.GROUP: 30,  # GROUP_AUTHORIZATION_FAILED
    ResourceType.CLUSTER: 31,  # CLUSTER_AUTHORIZATION_FAILED
    ResourceType.TRANSACTIONAL_ID: 53,  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    ResourceType.DELEGATION_TOKEN: 65,  # DELEGATION_TOKEN_AUTHORIZATION_FAILED
}


def parse_principal(text: str) -> str:
    """`Type:name` (Kafka's KafkaPrincipal string), returned as given once checked."""
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise AclError(f"expected a principal of the form Type:name, got {text!r}")
    return text


def parse_host(text: str) -> str:
    """`*` or an IP address, written as Kafka compares it (InetAddress.getHostAddress's form)."""
    if text == WILDCARD_HOST:
        return text
    try:
        return str(ipaddress.ip_address(text))
    except ValueError as e:
        raise AclError(f"expected * or an IP address as host, got {text!r}") from e


def parse_super_users(value: str | None) -> frozenset[str]:
    """`super.users`: principals separated by semicolons (`User:admin;User:broker`)."""
    if not value:
        return frozenset()
    return frozenset(parse_principal(p.strip()) for p in value.split(";") if p.strip())


@dataclass(frozen=True)
class AclEntry:
    """One access control entry: who, Allow or Deny, which operation, from where."""

    principal: str
    permission: AclPermissionType
    operation: AclOperation
    host: str = WILDCARD_HOST

    def __post_init__(self) -> None:
        parse_principal(self.principal)

    def __str__(self) -> str:
        # AclCommand's line for an ACL (SimpleAclAuthorizer's Acl.toString).
        return (f"{self.principal} has {self.permission.label} permission for operations: "
                f"{self.operation.label} from hosts: {self.host}")

    def applies_to(self, principal: str, host: str) -> bool:
        return (self.principal in (principal, WILDCARD_PRINCIPAL)
                and self.host in (host, WILDCARD_HOST))


@dataclass(frozen=True)
class Resource:
    """The concrete thing a request touches (a topic's name, a group id, the cluster)."""

    resource_type: ResourceType
    name: str


@dataclass(frozen=True)
class ResourcePattern:
    """What an ACL is attached to: a literal name (`*` meaning every name) or a name prefix."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if not self.name:
            raise AclError("a resource pattern needs a name")
        if self.pattern_type is PatternType.PREFIXED and self.name == WILDCARD_RESOURCE:
            raise AclError("the wildcard resource * is a literal pattern, not a prefix")

    def __str__(self) -> str:
        # AclCommand's `Topic:LITERAL:t` (Kafka 2.0-2.3's Resource.toString).
        return f"{self.resource_type.label}:{self.pattern_type.name}:{self.name}"

    def matches(self, resource: Resource) -> bool:
        if resource.resource_type is not self.resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return resource.name.startswith(self.name)
        return self.name in (resource.name, WILDCARD_RESOURCE)


def validate(pattern: ResourcePattern, entry: AclEntry) -> None:
    """Refuse an ACL naming an operation its resource type does not have (as kafka-acls does)."""
    if entry.operation is not AclOperation.ALL and entry.operation not in SUPPORTED_OPERATIONS[pattern.resource_type]:
        raise AclError(f"{entry.operation.label} is not an operation on a {pattern.resource_type.label}")


class AclAuthorizer:
    """SimpleAclAuthorizer's decisions over a cache of ACLs per resource pattern.

    The cache is replaced pattern by pattern (`set_acls`), as the broker does when a change notification
    names a pattern whose znode it then re-reads.
    """

    def __init__(self, acls: Mapping[ResourcePattern, Iterable[AclEntry]] | None = None, *,
                 super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False) -> None:
        self._acls: dict[ResourcePattern, frozenset[AclEntry]] = {}
        for pattern, entries in (acls or {}).items():
            self.set_acls(pattern, entries)
        self.super_users = frozenset(parse_principal(p) for p in super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> AclAuthorizer:
        """The broker properties Kafka's authorizer reads: `super.users`, `allow.everyone.if.no.acl.found`."""
        allow = str(config.get("allow.everyone.if.no.acl.found", "false")).strip().lower()
        if allow not in ("true", "false"):
            raise AclError(f"allow.everyone.if.no.acl.found must be true or false, got {allow!r}")
        return cls(super_users=parse_super_users(config.get("super.users")),
                   allow_everyone_if_no_acl_found=allow == "true")

    def set_acls(self, pattern: ResourcePattern, entries: Iterable[AclEntry]) -> None:
        # Not validated: the cache mirrors what ZooKeeper holds, whoever wrote it (the tool validates).
        entries = frozenset(entries)
        if entries:
            self._acls[pattern] = entries
        else:
            self._acls.pop(pattern, None)

    def acls(self) -> dict[ResourcePattern, frozenset[AclEntry]]:
        return dict(self._acls)

    def matching_acls(self, resource: Resource) -> frozenset[AclEntry]:
        """Every ACL whose pattern covers the resource: its literal name, `*`, and each prefix of the name."""
        found: set[AclEntry] = set()
        rtype, name = resource.resource_type, resource.name
        for literal in (name, WILDCARD_RESOURCE):
            found |= self._acls.get(ResourcePattern(rtype, literal), frozenset())
        for end in range(1, len(name) + 1):
            found |= self._acls.get(ResourcePattern(rtype, name[:end], PatternType.PREFIXED), frozenset())
        return frozenset(found)

    def authorize(self, principal: str, host: str, operation: AclOperation, resource: Resource) -> bool:
        if principal in self.super_users:
            return True
        acls = self.matching_acls(resource)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        mine = [acl for acl in acls if acl.applies_to(principal, host)]
        denied = {AclOperation.ALL, operation}
        if any(acl.permission is AclPermissionType.DENY and acl.operation in denied for acl in mine):
            return False
        allowed = _IMPLIED_BY.get(operation, frozenset({operation})) | {AclOperation.ALL}
        return any(acl.permission is AclPermissionType.ALLOW and acl.operation in allowed for acl in mine)

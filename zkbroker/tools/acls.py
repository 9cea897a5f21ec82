"""`zkbroker acls`: Kafka 2.x's kafka-acls.sh (kafka.admin.AclCommand) with its flags and its output, in both forms
(DESIGN §19):

- `--authorizer-properties zookeeper.connect=ZK` reads and writes the ACL znodes itself, as Kafka 2.0-2.3's
  AclCommand did through SimpleAclAuthorizer, and prints its lines: ``Current ACLs for resource `Topic:LITERAL:t`: ``
  then `\\tUser:alice has Allow permission for operations: Read from hosts: *`.
- `--bootstrap-server B` goes through CreateAcls, DescribeAcls and DeleteAcls and prints Kafka 2.x's AdminClient
  form: ``ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`` and
  `(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)`.

`--producer` stands for Write, Describe and Create on the topics (and Write, Describe on a transactional id,
IdempotentWrite on the cluster with --idempotent); `--consumer` for Read and Describe on the topics and Read on
the group. Without --operation an ACL allows or denies All.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

from zkbroker.client.admin_client import AdminClient, AdminError
from zkbroker.client.security import ClientSecurity
from zkbroker.security import acl_store
from zkbroker.security.acl import (
    CLUSTER_NAME,
    AclEntry,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_host,
    parse_principal,
    validate,
)
from zkbroker.security.acl_filter import (
    ANY,
    AclBindingFilter,
    operation_of,
    pattern_type_of,
    permission_of,
    resource_type_of,
)
from zkbroker.tools.common import ToolError, add_command_config, command_config, zookeeper

NL = "\n"


def add_command(commands) -> None:
    p = commands.add_parser("acls", help="add, remove or list ACLs (kafka-acls.sh)",
                            description="Add, remove or list the ACLs of the authorizer (Kafka's AclCommand)")
    p.add_argument("--authorizer-properties", nargs="+", metavar="KEY=VALUE",
                   help="zookeeper.connect=host:port[/chroot]: work on the ACL znodes directly")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="work through the brokers' ACL APIs")
    add_command_config(p)
    action = p.add_mutually_exclusive_group()
    action.add_argument("--add", action="store_true", help="Indicates you are trying to add ACLs.")
    action.add_argument("--remove", action="store_true", help="Indicates you are trying to remove ACLs.")
    action.add_argument("--list", action="store_true", help="List ACLs for the specified resource.")
    p.add_argument("--topic", action="append", default=[], help="topic to which ACLs should be added or removed")
    p.add_argument("--group", action="append", default=[], help="Consumer Group to which the ACLs should be added")
    p.add_argument("--cluster", action="store_true", help="Add/Remove cluster ACLs.")
    p.add_argument("--transactional-id", action="append", default=[], help="The transactionalId of the ACLs")
    p.add_argument("--resource-pattern-type", default="literal", metavar="TYPE",
                   help="literal or prefixed (and any or match with --list or --remove); default literal")
    p.add_argument("--allow-principal", action="append", default=[], metavar="P", help="principal in Type:name form")
    p.add_argument("--deny-principal", action="append", default=[], metavar="P", help="principal in Type:name form")
    p.add_argument("--allow-host", action="append", default=[], metavar="H", help="IP address, default *")
    p.add_argument("--deny-host", action="append", default=[], metavar="H", help="IP address, default *")
    p.add_argument("--operation", action="append", default=[], metavar="OP",
                   help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, AlterConfigs, "
                        "DescribeConfigs, IdempotentWrite, All (default All)")
    p.add_argument("--producer", action="store_true", help="the ACLs a producer needs")
    p.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs (with --group)")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")
    p.add_argument("--force", action="store_true", help="Assume Yes to all queries and do not prompt.")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not (args.add or args.remove or args.list):
        raise ToolError("Command must include exactly one action: --list, --add, --remove.")
    if bool(args.authorizer_properties) == bool(args.bootstrap_server):
        raise ToolError("Only one of --bootstrap-server or --authorizer-properties must be specified")
    try:
        pattern_type = _pattern_type(args)
        patterns = _patterns(args, pattern_type)
        backend = _ZooKeeper(_zk_connect(args.authorizer_properties)) if args.authorizer_properties \
            else _Brokers(args.bootstrap_server, command_config(args))
        try:
            if args.add:
                return _add(backend, _acls_by_pattern(args, patterns))
            if args.remove:
                return _remove(backend, args, patterns, pattern_type)
            return _list(backend, patterns, pattern_type)
        finally:
            backend.close()
    except AclError as e:
        raise ToolError(str(e)) from None
    except AdminError as e:
        raise ToolError(f"Error while executing ACL command: {e}") from None


# ---- arguments ------------------------------------------------------------------------------------------------

def _zk_connect(properties: list[str]) -> str:
    for prop in properties:
        key, _, value = prop.partition("=")
        if key.strip() == "zookeeper.connect" and value.strip():
            return value.strip()
    raise ToolError("--authorizer-properties must give zookeeper.connect=host:port[/chroot]")


def _pattern_type(args: argparse.Namespace) -> PatternType | str | None:
    text = args.resource_pattern_type.strip().upper()
    if text in ("ANY", "MATCH"):
        if args.add:
            raise ToolError(f"A '--resource-pattern-type' value of '{text}' is not valid when adding acls.")
        return None if text == "ANY" else "MATCH"
    return PatternType.parse(text)


def _patterns(args: argparse.Namespace, pattern_type) -> list[ResourcePattern | AclBindingFilter]:
    """The resources named; with --list/--remove an ANY or MATCH pattern type makes them filters."""
    named = [(ResourceType.TOPIC, t) for t in args.topic] + [(ResourceType.GROUP, g) for g in args.group]
    named += [(ResourceType.TRANSACTIONAL_ID, i) for i in args.transactional_id]
    if args.cluster or (args.producer and args.idempotent):
        named.append((ResourceType.CLUSTER, CLUSTER_NAME))
    if args.consumer and not args.group:
        raise ToolError("With --consumer you must specify a --group")
    if (args.producer or args.consumer) and not args.topic:
        raise ToolError("With --producer or --consumer you must specify a --topic")
    if not named and args.add:
        raise ToolError("You must specify one of: --topic, --cluster, --group, --transactional-id when trying to "
                        "add ACLs.")
    if isinstance(pattern_type, PatternType):
        return [ResourcePattern(rtype, name, pattern_type) for rtype, name in named]
    return [AclBindingFilter(rtype, name, pattern_type) for rtype, name in named]


def _operations(args: argparse.Namespace, resource_type: ResourceType) -> list[AclOperation]:
    if args.producer or args.consumer:
        wanted = {
            ResourceType.TOPIC: ([AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE] if args.producer
                                 else []) + ([AclOperation.READ, AclOperation.DESCRIBE] if args.consumer else []),
            ResourceType.GROUP: [AclOperation.READ] if args.consumer else [],
            ResourceType.TRANSACTIONAL_ID: [AclOperation.WRITE, AclOperation.DESCRIBE] if args.producer else [],
            ResourceType.CLUSTER: [AclOperation.IDEMPOTENT_WRITE] if args.idempotent else [],
        }
        return list(dict.fromkeys(wanted.get(resource_type, [])))
    return [AclOperation.parse(op) for op in args.operation] or [AclOperation.ALL]


def _entries(args: argparse.Namespace, resource_type: ResourceType) -> set[AclEntry]:
    if not args.allow_principal and not args.deny_principal:
        raise ToolError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    entries = set()
    for permission, principals, hosts in ((AclPermissionType.ALLOW, args.allow_principal, args.allow_host),
                                          (AclPermissionType.DENY, args.deny_principal, args.deny_host)):
        for principal in principals:
            for host in hosts or ["*"]:
                for operation in _operations(args, resource_type):
                    entries.add(AclEntry(parse_principal(principal), permission, operation, parse_host(host)))
    return entries


def _acls_by_pattern(args: argparse.Namespace, patterns: list) -> dict[ResourcePattern, set[AclEntry]]:
    out = {}
    for pattern in patterns:
        entries = _entries(args, pattern.resource_type)
        for entry in entries:
            validate(pattern, entry)
        if entries:
            out[pattern] = entries
    return out


# ---- the two backends -----------------------------------------------------------------------------------------

class _ZooKeeper:
    """Kafka 2.0-2.3's AclCommand through SimpleAclAuthorizer: the znodes, and its strings."""

    def __init__(self, connect: str) -> None:
        self._cm = zookeeper(connect)
        self.zk = self._cm.__enter__()

    def close(self) -> None:
        self._cm.__exit__(None, None, None)

    def add(self, pattern: ResourcePattern, entries: set[AclEntry]) -> None:
        acl_store.add(self.zk, pattern, entries)

    def remove(self, pattern: ResourcePattern, entries: set[AclEntry] | None) -> None:
        acl_store.remove(self.zk, pattern, entries)

    def acls(self) -> dict[ResourcePattern, frozenset[AclEntry]]:
        return acl_store.load_all(self.zk)

    @staticmethod
    def pattern_text(pattern: ResourcePattern) -> str:
        return str(pattern)

    @staticmethod
    def entry_text(entry: AclEntry) -> str:
        return str(entry)


class _Brokers:
    """Kafka 2.x's AclCommand through the AdminClient: CreateAcls, DescribeAcls, DeleteAcls."""

    def __init__(self, bootstrap: str, security: ClientSecurity | None) -> None:
        self.client = AdminClient(bootstrap, client_id="zkbroker-acls", security=security)

    def close(self) -> None:
        self.client.close()

    def add(self, pattern: ResourcePattern, entries: set[AclEntry]) -> None:
        self.client.create_acls([{"resource_type": pattern.resource_type.code, "resource_name": pattern.name,
                                  "resource_pattern_type": pattern.pattern_type.code, "principal": e.principal,
                                  "host": e.host, "operation": e.operation.code, "permission_type": e.permission.code}
                                 for e in entries])

    def remove(self, pattern: ResourcePattern, entries: set[AclEntry] | None) -> None:
        base = {"resource_type_filter": pattern.resource_type.code, "resource_name_filter": pattern.name,
                "pattern_type_filter": pattern.pattern_type.code}
        if entries is None:
            filters = [{**base, "principal_filter": None, "host_filter": None, "operation": ANY,
                        "permission_type": ANY}]
        else:
            filters = [{**base, "principal_filter": e.principal, "host_filter": e.host, "operation": e.operation.code,
                        "permission_type": e.permission.code} for e in entries]
        self.client.delete_acls(filters)

    def acls(self) -> dict[ResourcePattern, frozenset[AclEntry]]:
        resources = self.client.describe_acls({
            "resource_type_filter": ANY, "resource_name_filter": None, "pattern_type_filter": ANY,
            "principal_filter": None, "host_filter": None, "operation": ANY, "permission_type": ANY})
        return {ResourcePattern(resource_type_of(r.resource_type), r.resource_name, pattern_type_of(r.pattern_type)):
                frozenset(AclEntry(a.principal, permission_of(a.permission_type), operation_of(a.operation), a.host)
                          for a in r.acls) for r in resources}

    @staticmethod
    def pattern_text(pattern: ResourcePattern) -> str:
        return (f"ResourcePattern(resourceType={pattern.resource_type.name}, name={pattern.name}, "
                f"patternType={pattern.pattern_type.name})")

    @staticmethod
    def entry_text(entry: AclEntry) -> str:
        return (f"(principal={entry.principal}, host={entry.host}, operation={entry.operation.name}, "
                f"permissionType={entry.permission.name})")


# ---- actions --------------------------------------------------------------------------------------------------

def _block(backend, title: str, pattern: ResourcePattern, entries) -> str:
    lines = NL.join("\t" + backend.entry_text(e) for e in sorted(entries, key=str))
    return f"{title} `{backend.pattern_text(pattern)}`: {NL} {lines} {NL}"


def _add(backend, wanted: dict[ResourcePattern, set[AclEntry]]) -> int:
    for pattern, entries in wanted.items():
        print(_block(backend, "Adding ACLs for resource", pattern, entries))
        backend.add(pattern, entries)
    return _list(backend, list(wanted), None)


def _remove(backend, args: argparse.Namespace, patterns: list, pattern_type) -> int:
    if not patterns:
        raise ToolError("You must specify one of: --topic, --cluster, --group, --transactional-id when trying to "
                        "remove ACLs.")
    current = backend.acls()
    for selector in patterns:
        for pattern in [p for p in current if _selected(selector, p)]:
            if args.allow_principal or args.deny_principal:
                entries = _entries(args, pattern.resource_type) & current[pattern]
                question = (f"Are you sure you want to remove ACLs: {NL} "
                            f"{NL.join(chr(9) + backend.entry_text(e) for e in sorted(entries, key=str))} {NL}"
                            f" from resource `{backend.pattern_text(pattern)}`? (y/n)")
            else:
                entries = None
                question = (f"Are you sure you want to delete all ACLs for resource "
                            f"`{backend.pattern_text(pattern)}`? (y/n)")
            if not args.force and not _confirm(question):
                continue
            backend.remove(pattern, entries)
    return _list(backend, patterns, pattern_type)


def _confirm(question: str) -> bool:
    print(question)
    return sys.stdin.readline().strip().lower() == "y"


def _selected(selector, pattern: ResourcePattern) -> bool:
    if isinstance(selector, ResourcePattern):
        return selector == pattern
    return selector.matches_pattern(pattern)


def _list(backend, patterns: list, pattern_type) -> int:
    current = backend.acls()
    shown: dict[ResourcePattern, frozenset[AclEntry]] = defaultdict(frozenset)
    for pattern, entries in current.items():
        if not patterns or any(_selected(s, pattern) for s in patterns):
            shown[pattern] = entries
    for pattern in sorted(shown, key=str):
        print(_block(backend, "Current ACLs for resource", pattern, shown[pattern]))
    return 0


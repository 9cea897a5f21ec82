"""The ACL znodes exactly as Kafka 2.x's SimpleAclAuthorizer writes them (DESIGN §19).

`/kafka-acl/<Type>/<name>` (and `/kafka-acl-extended/prefixed/<Type>/<name>`) holds
`{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}`;
an empty or missing node means no ACLs. A change is announced by a sequential `acl_changes_N`: under
`/kafka-acl-changes` its data is `<Type>:<name>` for a literal pattern, under `/kafka-acl-extended-changes`
it is `{"version":1,"resourceType":"Topic","name":"t","patternType":"PREFIXED"}`. Kafka 2.4+ writes the
type in upper case (`TOPIC:t`); both spellings are read. Paths come from the one table, `zk/paths.py`.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..zk import paths
from ..zk.znodes import ZnodeFormatError, _dump, _field, _int, _obj, _objects, _str
from .acl import AclEntry, AclError, AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType

ACL_VERSION = 1


def acl_znode_path(pattern: ResourcePattern) -> str:
    return paths.acl_path(pattern.pattern_type.name, pattern.resource_type.label, pattern.name)


def acl_change_prefix(pattern: ResourcePattern) -> str:
    return paths.acl_change_path(pattern.pattern_type.name)


def _sort_key(entry: AclEntry) -> tuple:
    return entry.principal, entry.permission.label, entry.operation.label, entry.host


def encode_acls(entries: Iterable[AclEntry]) -> bytes:
    return _dump({"version": ACL_VERSION, "acls": [
        {"principal": e.principal, "permissionType": e.permission.label, "operation": e.operation.label,
         "host": e.host}
        for e in sorted(set(entries), key=_sort_key)]})


def decode_acls(data: bytes | None) -> frozenset[AclEntry]:
    if not data:
        return frozenset()
    what = "ACL znode"
    obj = _obj(data, what)
    version = _int(_field(obj, "version", what), f"{what} version")
    if version != ACL_VERSION:
        raise ZnodeFormatError(f"{what} has version {version}, expected {ACL_VERSION}")
    try:
        return frozenset(
            AclEntry(principal=_str(_field(item, "principal", what), "principal"),
                     permission=AclPermissionType.parse(_str(_field(item, "permissionType", what), "permissionType")),
                     operation=AclOperation.parse(_str(_field(item, "operation", what), "operation")),
                     host=_str(_field(item, "host", what), "host"))
            for item in _objects(_field(obj, "acls", what), f"{what} acls"))
    except AclError as e:
        raise ZnodeFormatError(f"{what}: {e}") from e


def encode_acl_change(pattern: ResourcePattern) -> bytes:
    """The data of the change node announcing that `pattern`'s ACLs changed."""
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{pattern.resource_type.label}:{pattern.name}".encode()
    return _dump({"version": ACL_VERSION, "resourceType": pattern.resource_type.label, "name": pattern.name,
                  "patternType": pattern.pattern_type.name})


def decode_acl_change(data: bytes | None, *, extended: bool) -> ResourcePattern:
    """The pattern a change node names; `extended` for nodes under /kafka-acl-extended-changes."""
    what = "ACL change notification"
    try:
        if not extended:
            text = (data or b"").decode("utf-8")
            rtype, sep, name = text.partition(":")
            if not sep:
                raise ZnodeFormatError(f"{what} is not ResourceType:name: {text[:80]!r}")
            return ResourcePattern(ResourceType.parse(rtype), name)
        obj = _obj(data, what)
        version = _int(_field(obj, "version", what), f"{what} version")
        if version > ACL_VERSION:
            raise ZnodeFormatError(f"{what} has unsupported version {version}")
        return ResourcePattern(ResourceType.parse(_str(_field(obj, "resourceType", what), "resourceType")),
                               _str(_field(obj, "name", what), "name"),
                               PatternType.parse(_str(_field(obj, "patternType", what), "patternType")))
    except (AclError, UnicodeDecodeError) as e:
        raise ZnodeFormatError(f"{what}: {e}") from e

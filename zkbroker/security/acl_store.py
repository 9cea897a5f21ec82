"""Reading and writing ACLs in ZooKeeper through a ZkClient (kafka.zk.KafkaZkClient's ACL half): the one place
the ACL znodes are written, by the broker's CreateAcls/DeleteAcls and by `zkbroker acls --authorizer-properties`.

A change is a conditional write of the pattern's znode (retried on a version conflict, as SimpleAclAuthorizer's
updateResourceAcls), an emptied znode is deleted, and every change is announced by a sequential change node so
that every broker's cache re-reads the pattern. Blocking calls: never on an event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from ..zk import paths
from . import acl_znodes
from .acl import AclEntry, PatternType, ResourcePattern, ResourceType


def load_all(zk) -> dict[ResourcePattern, frozenset[AclEntry]]:
    """Every ACL znode's entries (malformed ones raise ZnodeFormatError, naming it)."""
    found = {}
    for pattern_type in PatternType:
        for resource_type in ResourceType:
            root = paths.acl_path(pattern_type.name, resource_type.label, "").rstrip("/")
            for name in zk.get_children(root):
                pattern = ResourcePattern(resource_type, name, pattern_type)
                entries = acl_znodes.decode_acls(zk.get(acl_znodes.acl_znode_path(pattern))[0])
                if entries:
                    found[pattern] = entries
    return found


def update(zk, pattern: ResourcePattern, change: Callable[[frozenset[AclEntry]], Iterable[AclEntry]]) -> None:
    """Replace the pattern's ACLs by `change(current)`, conditionally, then announce the change."""
    path = acl_znodes.acl_znode_path(pattern)
    kazoo = zk.kazoo
    while True:
        try:
            data, stat = kazoo.get(path)
        except NoNodeError:
            data, stat = None, None
        current = acl_znodes.decode_acls(data)
        wanted = frozenset(change(current))
        if wanted == current:
            return
        try:
            if stat is None:
                kazoo.create(path, acl_znodes.encode_acls(wanted), makepath=True)
            elif wanted:
                kazoo.set(path, acl_znodes.encode_acls(wanted), version=stat.version)
            else:
                kazoo.delete(path, version=stat.version)
            break
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue  # someone else changed it meanwhile: read again
    kazoo.create(acl_znodes.acl_change_prefix(pattern), acl_znodes.encode_acl_change(pattern), sequence=True,
                 makepath=True)


def add(zk, pattern: ResourcePattern, entries: Iterable[AclEntry]) -> None:
    entries = frozenset(entries)
    update(zk, pattern, lambda current: current | entries)


def remove(zk, pattern: ResourcePattern, entries: Iterable[AclEntry] | None = None) -> None:
    """Remove these entries, or every ACL of the pattern when `entries` is None."""
    gone = None if entries is None else frozenset(entries)
    update(zk, pattern, lambda current: frozenset() if gone is None else current - gone)

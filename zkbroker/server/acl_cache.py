"""The authorizer's cache of ACLs and its ZooKeeper side (SimpleAclAuthorizer's loadCache and its
ZkNodeChangeNotificationListener): every ACL znode is read at start; then each new change node under
`/kafka-acl-changes` or `/kafka-acl-extended-changes` names a pattern whose znode is read again. So an ACL added
with `zkbroker acls` (or CreateAcls on any broker) is in force on every broker without a restart.

The callbacks run on the ZkClient's event thread; the authorizer's cache is replaced pattern by pattern (one dict
assignment), and request handlers read it on the event loop without a lock. The decisions themselves are
`security/acl.py`'s, pure.
"""

from __future__ import annotations

import logging

from zkbroker.security import acl_znodes
from zkbroker.security.acl import AclAuthorizer, PatternType, ResourcePattern, ResourceType
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import ZnodeFormatError

log = logging.getLogger("zkbroker.server.AclCache")

_CHANGE_PATHS = ((paths.ACL_CHANGES, False), (paths.ACL_EXTENDED_CHANGES, True))


class AclCache:
    def __init__(self, zk: ZkClient, authorizer: AclAuthorizer) -> None:
        self.zk = zk
        self.authorizer = authorizer
        self._seen: dict[str, set[str]] = {path: set() for path, _ in _CHANGE_PATHS}

    def startup(self) -> None:
        """Read every ACL znode, then watch the change paths (notifications already there are not replayed:
        the znodes read now hold their outcome)."""
        for path, extended in _CHANGE_PATHS:
            self.zk.ensure_path(path)
            self._seen[path] = set(self.zk.get_children(path))
            self.zk.subscribe_child_changes(
                path, lambda p, children, extended=extended: self._on_changes(p, children or [], extended))
        for pattern_type in PatternType:
            for resource_type in ResourceType:
                root = paths.acl_path(pattern_type.name, resource_type.label, "").rstrip("/")
                for name in self.zk.get_children(root):
                    self._load(ResourcePattern(resource_type, name, pattern_type))
        log.info("Loaded the ACLs of %d resource patterns from ZooKeeper", len(self.authorizer.acls()))

    def _on_changes(self, path: str, children: list[str], extended: bool) -> None:
        new = sorted(set(children) - self._seen[path])
        self._seen[path] = set(children)
        for child in new:
            data, stat = self.zk.get(f"{path}/{child}")
            if stat is None:
                continue  # expired by whoever cleans notifications
            try:
                pattern = acl_znodes.decode_acl_change(data, extended=extended)
            except ZnodeFormatError as e:
                log.warning("Ignoring ACL change notification %s/%s: %s", path, child, e)
                continue
            self._load(pattern)

    def _load(self, pattern: ResourcePattern) -> None:
        data, _ = self.zk.get(acl_znodes.acl_znode_path(pattern))
        try:
            entries = acl_znodes.decode_acls(data)
        except ZnodeFormatError as e:
            log.warning("Ignoring the unreadable ACLs of %s: %s", pattern, e)
            return
        self.authorizer.set_acls(pattern, entries)
        log.info("Processing ACL change for %s: %d ACLs", pattern, len(entries))

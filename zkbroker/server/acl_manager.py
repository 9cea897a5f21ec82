"""CreateAcls, DescribeAcls and DeleteAcls (KIP-140, KIP-290): the Admin API's side of the authorizer (Kafka's
AclAuthorizer.createAcls/acls/deleteAcls). Describe reads the broker's cache; Create and Delete write the znodes
through `security/acl_store.py` (off the event loop) and announce each change, so every broker's cache follows.

Each answers what Kafka answers: SECURITY_DISABLED (54) without an authorizer, INVALID_REQUEST (42) for a binding
or filter Kafka refuses (an unknown code, a Write on a group, the wildcard as a prefix).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from zkbroker.security import acl_store
from zkbroker.security.acl import AclAuthorizer, AclEntry, AclError, ResourcePattern, parse_host, validate
from zkbroker.security.acl_filter import (
    AclBindingFilter,
    operation_of,
    pattern_type_of,
    permission_of,
    resource_type_of,
)
from zkbroker.zk.client import ZkClient

log = logging.getLogger("zkbroker.server.AclManager")

NONE = 0
INVALID_REQUEST = 42
SECURITY_DISABLED = 54
UNKNOWN_SERVER_ERROR = -1
LITERAL = 3


def _binding(row: Any, version: int) -> tuple[ResourcePattern, AclEntry]:
    pattern = ResourcePattern(resource_type_of(row.resource_type), row.resource_name,
                              pattern_type_of(row.resource_pattern_type if version >= 1 else LITERAL))
    entry = AclEntry(row.principal, permission_of(row.permission_type), operation_of(row.operation),
                     parse_host(row.host))
    validate(pattern, entry)
    return pattern, entry


def _filter(row: Any, version: int) -> AclBindingFilter:
    return AclBindingFilter.from_wire(row.resource_type_filter, row.resource_name_filter,
                                      row.pattern_type_filter if version >= 1 else LITERAL, row.principal_filter,
                                      row.host_filter, row.operation, row.permission_type)


def _acl_row(entry: AclEntry) -> dict:
    return {"principal": entry.principal, "host": entry.host, "operation": entry.operation.code,
            "permission_type": entry.permission.code}


class AclManager:
    def __init__(self, zk: ZkClient, authorizer: AclAuthorizer | None) -> None:
        self.zk = zk
        self.authorizer = authorizer

    async def _off_loop(self, fn: Callable, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def describe(self, request: Any, version: int) -> dict:
        if self.authorizer is None:
            return {"error_code": SECURITY_DISABLED, "error_message": "No Authorizer is configured on the broker",
                    "resources": []}
        try:
            wanted = _filter(request, version)
        except AclError as e:
            return {"error_code": INVALID_REQUEST, "error_message": str(e), "resources": []}
        resources = []
        for pattern, entries in sorted(self.authorizer.acls().items(), key=lambda kv: str(kv[0])):
            matching = [e for e in sorted(entries, key=str) if wanted.matches(pattern, e)]
            if matching:
                resources.append({"resource_type": pattern.resource_type.code, "resource_name": pattern.name,
                                  "pattern_type": pattern.pattern_type.code, "acls": [_acl_row(e) for e in matching]})
        return {"error_code": NONE, "error_message": None, "resources": resources}

    async def create(self, request: Any, version: int) -> list[dict]:
        if self.authorizer is None:
            return [{"error_code": SECURITY_DISABLED, "error_message": "No Authorizer is configured on the broker"}
                    for _ in request.creations]
        return await self._off_loop(self._create, request, version)

    def _create(self, request: Any, version: int) -> list[dict]:
        results = []
        for row in request.creations:
            try:
                pattern, entry = _binding(row, version)
                acl_store.add(self.zk, pattern, [entry])
                log.info("Added ACL %s on %s", entry, pattern)
                results.append({"error_code": NONE, "error_message": None})
            except AclError as e:
                results.append({"error_code": INVALID_REQUEST, "error_message": str(e)})
            except Exception as e:  # ZooKeeper unavailable
                log.warning("Could not create an ACL: %r", e)
                results.append({"error_code": UNKNOWN_SERVER_ERROR, "error_message": str(e)})
        return results

    async def delete(self, request: Any, version: int) -> list[dict]:
        if self.authorizer is None:
            return [{"error_code": SECURITY_DISABLED, "error_message": "No Authorizer is configured on the broker",
                     "matching_acls": []} for _ in request.filters]
        return await self._off_loop(self._delete, request, version)

    def _delete(self, request: Any, version: int) -> list[dict]:
        results = []
        for row in request.filters:
            try:
                wanted = _filter(row, version)
            except AclError as e:
                results.append({"error_code": INVALID_REQUEST, "error_message": str(e), "matching_acls": []})
                continue
            matched = []
            for pattern, entries in acl_store.load_all(self.zk).items():
                gone = [e for e in entries if wanted.matches(pattern, e)]
                if gone:
                    acl_store.remove(self.zk, pattern, gone)
                    matched += [{"error_code": NONE, "error_message": None,
                                 "resource_type": pattern.resource_type.code, "resource_name": pattern.name,
                                 "pattern_type": pattern.pattern_type.code, **_acl_row(e)} for e in gone]
            log.info("Deleted %d ACLs matching %s", len(matched), wanted)
            results.append({"error_code": NONE, "error_message": None, "matching_acls": matched})
        return results


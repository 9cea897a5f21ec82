"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554): the Admin API's side of the SCRAM
credentials in `/config/users/<user>` (security/scram.py holds the formats). Describe answers mechanisms and
iteration counts, never a credential; Alter derives a credential from the client's salt and salted password,
writes it beside the user's quotas and announces the change. Blocking ZooKeeper calls: run off the event loop."""

from __future__ import annotations

import logging
from typing import Any

from zkbroker.security.scram import ScramError, credential_from_salted_password, scram_credentials
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import ConfigChange, EntityConfig, ZnodeFormatError, encode_entity_config_change

log = logging.getLogger("zkbroker.server.UserScramCredentials")

MECHANISM_CODES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
CODE_OF = {name: code for code, name in MECHANISM_CODES.items()}
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNSUPPORTED_SASL_MECHANISM = 33
UNACCEPTABLE_CREDENTIAL = 93


def _config(zk: ZkClient, user: str) -> dict[str, str]:
    data, _ = zk.get(paths.user_config_path(user))
    return EntityConfig.decode(data, paths.user_config_path(user)).config if data else {}


def describe(zk: ZkClient, request: Any) -> list[dict]:
    users = [u.name for u in request.users] if request.users is not None else zk.get_children(paths.CONFIG_USERS)
    results = []
    for user in dict.fromkeys(users):
        try:
            credentials = scram_credentials(_config(zk, user)) if "/" not in user else {}
        except (ScramError, ZnodeFormatError) as e:
            results.append({"user": user, "error_code": -1, "error_message": str(e), "credential_infos": []})
            continue
        if not credentials:
            if request.users is not None:
                results.append({"user": user, "error_code": RESOURCE_NOT_FOUND,
                                "error_message": f"Attempt to describe a user credential that does not exist: {user}",
                                "credential_infos": []})
            continue
        results.append({"user": user, "error_code": 0, "error_message": None, "credential_infos": [
            {"mechanism": CODE_OF[m], "iterations": c.iterations} for m, c in sorted(credentials.items())]})
    return results


def alter(zk: ZkClient, request: Any) -> list[dict]:
    changes: dict[str, list] = {}
    for row in request.deletions:
        changes.setdefault(row.name, []).append(("delete", row))
    for row in request.upsertions:
        changes.setdefault(row.name, []).append(("upsert", row))
    results = []
    for user, ops in changes.items():
        error, message = 0, None
        mechanisms = [MECHANISM_CODES.get(row.mechanism) for _, row in ops]
        if not user or "/" in user:
            error, message = UNACCEPTABLE_CREDENTIAL, f"Illegal user name {user!r}"
        elif None in mechanisms:
            error, message = UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
        elif len(set(mechanisms)) != len(mechanisms):
            error, message = DUPLICATE_RESOURCE, f"A user credential cannot be altered twice in one request: {user}"
        else:
            try:
                config = _config(zk, user)
                for (kind, row), mechanism in zip(ops, mechanisms, strict=True):
                    if kind == "delete":
                        if mechanism not in config:
                            raise LookupError(f"Attempt to delete a user credential that does not exist: {user}")
                        del config[mechanism]
                    else:
                        config[mechanism] = str(credential_from_salted_password(
                            mechanism, row.salt, row.salted_password, row.iterations))
                zk.create_or_set(paths.user_config_path(user), EntityConfig(config).encode())
                zk.kazoo.create(paths.config_change_path(paths.CONFIG_CHANGE_PREFIX),
                                encode_entity_config_change(ConfigChange("users", user)), sequence=True, makepath=True)
                log.info("Altered the SCRAM credentials of user %s: %s", user,
                         ", ".join(f"{kind} {m}" for (kind, _), m in zip(ops, mechanisms, strict=True)))
            except LookupError as e:
                error, message = RESOURCE_NOT_FOUND, str(e)
            except (ScramError, ZnodeFormatError) as e:
                error, message = UNACCEPTABLE_CREDENTIAL, str(e)
        results.append({"user": user, "error_code": error, "error_message": message})
    return results


"""The broker's client quotas: the quota znodes read from ZooKeeper (`/config/users/<user>[/clients/<id>]`,
`/config/clients/<id>`, with `<default>` entries), re-read on a `/config/changes` notification for users or
clients, and one ClientQuotaManager per quota type (`quota_manager.py`, pure) fed by the request handlers."""

from __future__ import annotations

import logging
import time
from typing import Any

from zkbroker.server.quota_manager import FETCH, PRODUCE, REQUEST, ClientQuotaManager, QuotaEntity
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import ConfigChange, EntityConfig, ZnodeFormatError, encode_entity_config_change

log = logging.getLogger("zkbroker.server.ClientQuotas")

QUOTA_KEYS = (PRODUCE, FETCH, REQUEST)
CONFIG_CLIENTS = "/config/clients"


def _read(zk: ZkClient, path: str) -> dict[str, str]:
    data, _ = zk.get(path)
    if not data:
        return {}
    try:
        config = EntityConfig.decode(data, path).config
    except ZnodeFormatError as e:
        log.warning("Ignoring unreadable quotas at %s: %s", path, e)
        return {}
    return {k: v for k, v in config.items() if k in QUOTA_KEYS}  # a user's SCRAM credentials are not quotas


def load_quota_configs(zk: ZkClient) -> dict[QuotaEntity, dict[str, str]]:
    found: dict[QuotaEntity, dict[str, str]] = {}
    for user in zk.get_children(paths.CONFIG_USERS):
        user_path = f"{paths.CONFIG_USERS}/{user}"
        found[(user, None)] = _read(zk, user_path)
        for client in zk.get_children(f"{user_path}/clients"):
            found[(user, client)] = _read(zk, f"{user_path}/clients/{client}")
    for client in zk.get_children(CONFIG_CLIENTS):
        found[(None, client)] = _read(zk, f"{CONFIG_CLIENTS}/{client}")
    return {entity: config for entity, config in found.items() if config}


class ClientQuotas:
    def __init__(self, zk: ZkClient, samples: int = 11, window_s: float = 1.0, clock=time.monotonic) -> None:
        self.zk = zk
        self.clock = clock
        self.produce = ClientQuotaManager(PRODUCE, samples, window_s)
        self.fetch = ClientQuotaManager(FETCH, samples, window_s)
        self.request = ClientQuotaManager(REQUEST, samples, window_s, max_throttle_ms=int(window_s * 1000))

    def reload(self) -> None:
        """Read every quota znode (at start, and on a users or clients config change: they are few)."""
        configs = load_quota_configs(self.zk)
        for manager in (self.produce, self.fetch, self.request):
            manager.update(configs)
        if configs:
            log.info("Client quotas in force: %s", {f"{u or ''}/{c or ''}": q for (u, c), q in configs.items()})

    def usage(self) -> list[dict]:
        """Every quota entity in use, per quota type (ClientQuotaManager.usage)."""
        now = self.clock()
        return [row for manager in (self.produce, self.fetch, self.request) for row in manager.usage(now)]

    def record_produce(self, principal: str, client_id: str | None, size: int) -> int:
        return self.produce.record(_user(principal), client_id or "", size, self.clock())

    def record_fetch(self, principal: str, client_id: str | None, size: int) -> int:
        return self.fetch.record(_user(principal), client_id or "", size, self.clock())

    def record_request_time(self, principal: str, client_id: str | None, seconds: float) -> int:
        """A request's handler time, counted as Kafka counts it: percent of one thread (1 ms = 0.1)."""
        return self.request.record(_user(principal), client_id or "", seconds * 100.0, self.clock())


def _user(principal: str) -> str:
    """The user name a quota is kept for: the principal's name (`User:alice` -> `alice`)."""
    return principal.partition(":")[2] or principal


# ---- DescribeClientQuotas and AlterClientQuotas (KIP-546) -------------------------------------------------------

ENTITY_TYPES = {"user": 0, "client-id": 1}  # a quota entity's components: (user, client id)
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
INVALID_REQUEST = 42


class QuotaRequestError(ValueError):
    """An entity or key Kafka refuses (INVALID_REQUEST)."""


def _wire_entity(entity: QuotaEntity) -> list[dict]:
    out = []
    for kind, name in zip(ENTITY_TYPES, entity, strict=True):
        if name is not None:
            out.append({"entity_type": kind, "entity_name": None if name == paths.DEFAULT_ENTITY else name})
    return out


def _entity_of(components: list) -> QuotaEntity:
    names: list[str | None] = [None, None]
    for component in components:
        index = ENTITY_TYPES.get(component.entity_type)
        if index is None:
            raise QuotaRequestError(f"Unhandled client quota entity type: {component.entity_type}")
        if names[index] is not None:
            raise QuotaRequestError(f"Duplicate {component.entity_type} in the entity")
        names[index] = component.entity_name if component.entity_name is not None else paths.DEFAULT_ENTITY
    if names == [None, None]:
        raise QuotaRequestError("Invalid empty client quota entity")
    return names[0], names[1]


def _entity_path(entity: QuotaEntity) -> str:
    """`users/alice`, `clients/app`, `users/alice/clients/app` (the /config/<path> and the notification's)."""
    user, client = entity
    if user is None:
        return f"clients/{client}"
    return f"users/{user}" if client is None else f"users/{user}/clients/{client}"


def describe_client_quotas(zk: ZkClient, request: Any) -> list[dict]:
    """The entries matching the request's components (off the event loop: reads every quota znode)."""
    wanted = {}
    for component in request.components:
        index = ENTITY_TYPES.get(component.entity_type)
        if index is None:
            raise QuotaRequestError(f"Unhandled client quota entity type: {component.entity_type}")
        wanted[index] = component
    entries = []
    for entity, config in sorted(load_quota_configs(zk).items(), key=lambda kv: str(kv[0])):
        if request.strict and any(name is not None and i not in wanted for i, name in enumerate(entity)):
            continue
        if all(_component_matches(entity[i], c) for i, c in wanted.items()):
            entries.append({"entity": _wire_entity(entity),
                            "values": [{"key": k, "value": float(v)} for k, v in sorted(config.items())]})
    return entries


def _component_matches(name: str | None, component: Any) -> bool:
    if name is None:
        return False
    if component.match_type == MATCH_EXACT:
        return name == (component.match if component.match is not None else paths.DEFAULT_ENTITY)
    if component.match_type == MATCH_DEFAULT:
        return name == paths.DEFAULT_ENTITY
    return name != paths.DEFAULT_ENTITY


def alter_client_quotas(zk: ZkClient, request: Any) -> list[dict]:
    """Each entry's result; a valid one is written (keeping a user's SCRAM credentials) and announced."""
    results = []
    for entry in request.entries:
        result = {"error_code": 0, "error_message": None, "entity": list(entry.entity)}
        try:
            entity = _entity_of(entry.entity)
            for op in entry.ops:
                if op.key not in QUOTA_KEYS:
                    raise QuotaRequestError(f"Invalid configuration key {op.key}")
            if not request.validate_only:
                path = f"/config/{_entity_path(entity)}"
                data, _ = zk.get(path)
                config = EntityConfig.decode(data, path).config if data else {}
                for op in entry.ops:
                    if op.remove:
                        config.pop(op.key, None)
                    else:
                        config[op.key] = str(op.value)
                zk.create_or_set(path, EntityConfig(config).encode())
                zk.kazoo.create(paths.config_change_path(paths.CONFIG_CHANGE_PREFIX),
                                encode_entity_config_change(ConfigChange(*_entity_path(entity).split("/", 1))),
                                sequence=True, makepath=True)
        except (QuotaRequestError, ZnodeFormatError) as e:
            result.update(error_code=INVALID_REQUEST, error_message=str(e))
        results.append(result)
    return results

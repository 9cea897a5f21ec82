"""The broker's client quotas: the quota znodes read from ZooKeeper (`/config/users/<user>[/clients/<id>]`,
`/config/clients/<id>`, with `<default>` entries), re-read on a `/config/changes` notification for users or
clients, and one ClientQuotaManager per quota type (`quota_manager.py`, pure) fed by the request handlers."""

from __future__ import annotations

import logging
import time

from zkbroker.server.quota_manager import FETCH, PRODUCE, REQUEST, ClientQuotaManager, QuotaEntity
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import EntityConfig, ZnodeFormatError

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

    def reload(self) -> None:
        """Read every quota znode (at start, and on a users or clients config change: they are few)."""
        configs = load_quota_configs(self.zk)
        for manager in (self.produce, self.fetch):
            manager.update(configs)
        if configs:
            log.info("Client quotas in force: %s", {f"{u or ''}/{c or ''}": q for (u, c), q in configs.items()})

    def record_produce(self, principal: str, client_id: str | None, size: int) -> int:
        return self.produce.record(_user(principal), client_id or "", size, self.clock())

    def record_fetch(self, principal: str, client_id: str | None, size: int) -> int:
        return self.fetch.record(_user(principal), client_id or "", size, self.clock())


def _user(principal: str) -> str:
    """The user name a quota is kept for: the principal's name (`User:alice` -> `alice`)."""
    return principal.partition(":")[2] or principal

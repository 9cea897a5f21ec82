"""The live brokers as `/brokers/ids` lists them: one reading of the registrations for the controller (its
context) and for every broker (its MetadataCache), so both skip the same unreadable entries the same way."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from typing import Protocol

from zkbroker.zk import paths
from zkbroker.zk.znodes import BrokerRegistration, ZnodeFormatError


class ManyReader(Protocol):
    def get_many(self, node_paths: list[str]) -> list[tuple[bytes | None, object]]: ...


def read_broker_registrations(zk: ManyReader, children: Iterable[str],
                              log: logging.Logger | logging.LoggerAdapter) -> dict[int, BrokerRegistration]:
    """The registration of each child of `/brokers/ids`, read together (ZkClient.get_many). A child that is not
    a broker id, or whose JSON we cannot read, is logged at WARN and left out, as 0.8.2 left out what it could
    not parse; one that vanished since `children` was listed (its broker went away) is left out silently."""
    ids: list[tuple[str, int]] = []
    for child in children:
        try:
            ids.append((child, int(child)))
        except ValueError as e:
            log.warning("Ignoring unreadable broker registration %s: %s", child, e)
    brokers: dict[int, BrokerRegistration] = {}
    found = zk.get_many([paths.broker_path(broker_id) for _, broker_id in ids])
    for (child, broker_id), (data, stat) in zip(ids, found):
        if stat is None:
            continue
        try:
            brokers[broker_id] = dataclasses.replace(BrokerRegistration.decode(broker_id, data),
                                                     epoch=getattr(stat, "czxid", -1))
        except ZnodeFormatError as e:
            log.warning("Ignoring unreadable broker registration %s: %s", child, e)
    return brokers

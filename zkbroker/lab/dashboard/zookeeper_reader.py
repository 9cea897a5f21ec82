"""The dashboard's one ZooKeeper client: reads only (it has no method that writes). It keeps one kazoo
session to the lab's connect string (chroot included), reconnecting by itself, and reads in pipelined
batches: every `get` of a round is sent before the first answer is awaited (DESIGN §9)."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat

from zkbroker.lab.dashboard.snapshot import PartitionTruth, Registration, Stat, ZooKeeperSnapshot
from zkbroker.zk import paths
from zkbroker.zk.znodes import (
    BrokerRegistration,
    ConsumerRegistration,
    ControllerRegistration,
    EntityConfig,
    LeaderIsrState,
    TopicAssignment,
    ZnodeFormatError,
    decode_controller_epoch,
    decode_offset,
)

READ_TIMEOUT_S = 3.0
# The tree view's top level: what a 0.8.2 cluster keeps in ZooKeeper (ZooInspector shows the same).
TREE_ROOTS = ("/brokers", "/controller", "/controller_epoch", "/admin", "/consumers", "/config")

_log = logging.getLogger("zkbroker.lab.dashboard.kazoo")
_log.addHandler(logging.NullHandler())
_log.propagate = False


class ZooKeeperUnreachable(RuntimeError):
    """No server of a quorum answered in time."""


def to_stat(stat: ZnodeStat) -> Stat:
    return Stat(stat.czxid, stat.mzxid, stat.ctime, stat.mtime, stat.version, stat.cversion, stat.ephemeralOwner,
                stat.dataLength, stat.numChildren)


class ZooKeeperReader:
    def __init__(self, connect: str, timeout_s: float = READ_TIMEOUT_S) -> None:
        self.connect = connect
        self.timeout_s = timeout_s
        self.client = KazooClient(hosts=connect, timeout=10.0, logger=_log,
                                  connection_retry={"max_tries": -1, "max_delay": 1.0})

    def start(self) -> None:
        """Start connecting in the background; reads fail with ZooKeeperUnreachable until connected."""
        self.client.start_async()

    def close(self) -> None:
        self.client.stop()
        self.client.close()

    @property
    def connected(self) -> bool:
        return self.client.state == KazooState.CONNECTED

    # ---- pipelined reads -------------------------------------------------------------------------------

    def _round(self, calls: Iterable[tuple[str, str]]) -> list[object]:
        """Send every (op, path) of a round, then await each: op is get or children. A missing node
        answers None."""
        if not self.connected:
            raise ZooKeeperUnreachable(f"not connected to {self.connect}")
        pending = [(self.client.get_async(path) if op == "get" else self.client.get_children_async(path))
                   for op, path in calls]
        out = []
        for result in pending:
            try:
                out.append(result.get(timeout=self.timeout_s))
            except NoNodeError:
                out.append(None)
            except (KazooException, KazooTimeoutError) as e:
                raise ZooKeeperUnreachable(f"{type(e).__name__} reading {self.connect}") from None
        return out

    def snapshot(self) -> ZooKeeperSnapshot:
        """The controller and its epoch, the registrations, each topic's assignment and each partition's
        state with its zkVersion, in three pipelined rounds."""
        try:
            controller, epoch, ids, topics = self._round([
                ("get", paths.CONTROLLER), ("get", paths.CONTROLLER_EPOCH),
                ("children", paths.BROKER_IDS), ("children", paths.BROKER_TOPICS)])
        except ZooKeeperUnreachable:
            return ZooKeeperSnapshot(reachable=False)
        broker_ids = sorted(int(c) for c in ids or () if c.isdigit())
        topic_names = sorted(topics or ())
        try:
            answers = self._round([("get", paths.broker_path(b)) for b in broker_ids]
                                  + [("get", paths.topic_path(t)) for t in topic_names]
                                  + [("get", paths.topic_config_path(t)) for t in topic_names])
            registrations = {}
            for b, answer in zip(broker_ids, answers):
                if answer is not None:
                    data, stat = answer
                    try:
                        reg = BrokerRegistration.decode(b, data)
                        host, port = reg.host, reg.port
                    except ZnodeFormatError:
                        host, port = "?", 0
                    registrations[b] = Registration(b, host, port, stat.ephemeralOwner, stat.ctime)
            assignments = {}
            topic_configs = {}
            for t, answer in zip(topic_names, answers[len(broker_ids) + len(topic_names):]):
                try:
                    topic_configs[t] = EntityConfig.decode(answer[0]).config if answer and answer[0] else {}
                except ZnodeFormatError:
                    topic_configs[t] = {}
            for t, answer in zip(topic_names, answers[len(broker_ids):len(broker_ids) + len(topic_names)]):
                try:
                    assignments[t] = TopicAssignment.decode(answer[0] if answer else None, t).partitions
                except ZnodeFormatError:
                    assignments[t] = {}
            keys = [(t, p) for t in topic_names for p in sorted(assignments[t])]
            states = self._round([("get", paths.partition_state_path(t, p)) for t, p in keys])
        except ZooKeeperUnreachable:
            return ZooKeeperSnapshot(reachable=False)
        partitions = []
        for (t, p), answer in zip(keys, states):
            replicas = tuple(assignments[t][p])
            try:
                state = LeaderIsrState.decode(answer[0]) if answer else None
            except ZnodeFormatError:
                state = None
            if state is None:
                partitions.append(PartitionTruth(t, p, replicas))
            else:
                partitions.append(PartitionTruth(t, p, replicas, state.leader, state.leader_epoch,
                                                 state.controller_epoch, state.isr, answer[1].version))
        controller_id = elected_at = None
        if controller is not None:
            try:
                controller_id = ControllerRegistration.decode(controller[0]).broker_id
                elected_at = controller[1].ctime
            except ZnodeFormatError:
                pass
        epoch_value = epoch_version = None
        if epoch is not None:
            try:
                epoch_value, epoch_version = decode_controller_epoch(epoch[0]), epoch[1].version
            except ZnodeFormatError:
                pass
        return ZooKeeperSnapshot(True, controller_id, elected_at, epoch_value, epoch_version, registrations,
                                 tuple(partitions), topic_configs)

    def node(self, path: str) -> dict | None:
        """One znode for the tree view: its data (text when UTF-8, else base64), its Stat and its children's
        names; None when it does not exist. `/` lists the tree's roots."""
        if path == "/":
            present = [p for p, answer in zip(TREE_ROOTS, self._round(("get", p) for p in TREE_ROOTS))
                       if answer is not None]
            return {"path": "/", "data": None, "encoding": None, "stat": None,
                    "children": [p.lstrip("/") for p in present]}
        got, children = self._round([("get", path), ("children", path)])
        if got is None:
            return None
        data, stat = got
        try:
            text, encoding = (data or b"").decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            text, encoding = base64.b64encode(data).decode(), "base64"
        return {"path": path, "data": text if data is not None else None, "encoding": encoding,
                "stat": to_stat(stat).as_json(), "children": sorted(children or ())}

    def consumer_groups(self) -> dict[str, dict]:
        """Every ZooKeeper consumer group: members (`ids`), owners and offsets per partition."""
        (groups,) = self._round([("children", paths.CONSUMERS)])
        names = sorted(groups or ())
        layers = self._round([(op, f"{paths.consumer_group_path(g)}/{sub}") for g in names
                              for op, sub in (("children", "ids"), ("children", "owners"), ("children", "offsets"))])
        out: dict[str, dict] = {}
        reads: list[tuple[str, str, object]] = []
        for i, g in enumerate(names):
            ids, owner_topics, offset_topics = layers[3 * i:3 * i + 3]
            out[g] = {"members": {}, "owners": {}, "offsets": {}}
            reads += [(g, "members", cid) for cid in ids or ()]
            reads += [(g, "owners", t) for t in owner_topics or ()]
            reads += [(g, "offsets", t) for t in offset_topics or ()]
        topic_lists = self._round(("get", paths.consumer_id_path(g, x)) if what == "members" else
                                  ("children", f"{paths.consumer_group_path(g)}/{what}/{x}") for g, what, x in reads)
        leaves: list[tuple[str, str, str, int]] = []
        for (g, what, x), answer in zip(reads, topic_lists):
            if what == "members":
                try:
                    reg = ConsumerRegistration.decode(answer[0] if answer else None)
                    out[g]["members"][x] = {"subscription": reg.subscription, "pattern": reg.pattern}
                except ZnodeFormatError:
                    out[g]["members"][x] = {"subscription": {}, "pattern": "?"}
            else:
                leaves += [(g, what, x, int(p)) for p in answer or () if p.isdigit()]
        values = self._round(("get", f"{paths.consumer_group_path(g)}/{what}/{t}/{p}") for g, what, t, p in leaves)
        for (g, what, t, p), answer in zip(leaves, values):
            if answer is None:
                continue
            if what == "owners":
                out[g]["owners"][(t, p)] = answer[0].decode(errors="replace")
            else:
                try:
                    out[g]["offsets"][(t, p)] = decode_offset(answer[0])
                except ZnodeFormatError:
                    pass
        return out

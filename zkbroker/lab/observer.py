"""What a scenario sees of its lab: ZooKeeper's state (registrations, the controller, each partition's leader
and ISR, topics and deletions), the processes, the brokers' logs, and at the end every replica of a partition
read from its segment files with the leader's high watermark — the checker's inputs (zkbroker/lab/checker.py).

Reads never block a scenario for long: while no ZooKeeper quorum answers, a read gives "unknown" (None)
within a couple of seconds instead of waiting for the quorum to return.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from zkbroker.client.connection import BrokerConnection
from zkbroker.coordinator.consumer_protocol import decode_assignment
from zkbroker.lab.checker import PartitionState
from zkbroker.lab.cluster import BrokerEntry, ClusterFile, LabCluster, LabError
from zkbroker.lab.lab_security import LabClients
from zkbroker.lab.processes import process_state
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.message_set import iter_entries, iter_messages
from zkbroker.topic_partition import TopicPartition
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import ControllerRegistration, LeaderIsrState, TopicAssignment, ZnodeFormatError

READ_TIMEOUT_S = 2.0
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"

class Unknown(Exception):
    """ZooKeeper did not answer in time (no quorum, or the lab's ZooKeeper is cut off)."""


@dataclass(frozen=True)
class CoordinatorGroup:
    """A coordinator group as its coordinator describes it (DescribeGroups)."""
    state: str  # Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    owners: dict[TopicPartition, str]  # partition -> the owning member's client id (Stable groups only)


@dataclass(frozen=True)
class Leadership:
    leader: int | None  # None: no leader (-1 in the znode)
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int


class LabObserver:
    """A scenario's view of one lab; open for the run, closed at its end."""

    def __init__(self, lab: LabCluster) -> None:
        self.lab = lab
        self.cluster: ClusterFile = lab.load()
        self.clients: LabClients = self.cluster.clients  # as the lab's admin on a secured lab
        self.zk = ZkClient(self.cluster.zookeeper, session_timeout_ms=30000, name="scenario")
        self.zk.start()

    def close(self) -> None:
        self.zk.close()

    def _connection(self, host: str, port: int, timeout_s: float) -> BrokerConnection:
        return BrokerConnection(host, port, client_id="zkbroker-scenario", timeout_s=timeout_s,
                                security=self.clients.security)

    def reload(self) -> ClusterFile:
        """cluster.json again (a start changes a pid)."""
        self.cluster = self.lab.load()
        return self.cluster

    # ---- ZooKeeper ----------------------------------------------------------------------------------------

    def _call(self, method: str, path: str):
        try:
            return getattr(self.zk.kazoo, method + "_async")(path).get(timeout=READ_TIMEOUT_S)
        except NoNodeError:
            return None
        except (KazooException, KazooTimeoutError) as e:
            raise Unknown(str(e) or type(e).__name__) from None

    def get(self, path: str) -> tuple[bytes, object] | None:
        return self._call("get", path)

    def children(self, path: str) -> list[str]:
        return sorted(self._call("get_children", path) or [])

    def registered(self) -> set[int]:
        return {int(c) for c in self.children(paths.BROKER_IDS) if c.isdigit()}

    def controller(self) -> int | None:
        found = self.get(paths.CONTROLLER)
        if found is None:
            return None
        try:
            return ControllerRegistration.decode(found[0]).broker_id
        except ZnodeFormatError:
            return None

    def controller_epoch(self) -> int | None:
        found = self.get(paths.CONTROLLER_EPOCH)
        return int(found[0]) if found is not None and found[0].strip().isdigit() else None

    def leadership(self, topic: str, partition: int) -> Leadership | None:
        found = self.get(paths.partition_state_path(topic, partition))
        if found is None:
            return None
        state = LeaderIsrState.decode(found[0])
        return Leadership(state.leader if state.leader >= 0 else None, state.leader_epoch, state.isr,
                          found[1].version)

    def assignment(self, topic: str) -> dict[int, tuple[int, ...]] | None:
        found = self.get(paths.topic_path(topic))
        if found is None:
            return None
        return dict(TopicAssignment.decode(found[0], topic).partitions)

    def state_stats(self, topic: str) -> dict[int, tuple[Leadership, int]] | None:
        """Each partition's leadership and the zxid of the transaction that last wrote its `state` znode, read
        together; None when the topic does not exist."""
        assignment = self.assignment(topic)
        if assignment is None:
            return None
        asks = {p: self.zk.kazoo.get_async(paths.partition_state_path(topic, p)) for p in sorted(assignment)}
        out = {}
        for partition, ask in asks.items():
            try:
                data, stat = ask.get(timeout=READ_TIMEOUT_S * 5)
            except NoNodeError:
                continue
            except (KazooException, KazooTimeoutError) as e:
                raise Unknown(str(e) or type(e).__name__) from None
            state = LeaderIsrState.decode(data)
            out[partition] = (Leadership(state.leader if state.leader >= 0 else None, state.leader_epoch, state.isr,
                                         stat.version), stat.mzxid)
        return out

    def consumer_owners(self, group: str, topic: str) -> dict[int, str]:
        """{partition: the consumer thread that owns it} in a ZooKeeper consumer group."""
        owners = {}
        for child in self.children(paths.consumer_owners_path(group, topic)):
            found = self.get(paths.consumer_owner_path(group, topic, int(child)))
            if found is not None:
                owners[int(child)] = found[0].decode(errors="replace")
        return owners

    # ---- the group coordinator ------------------------------------------------------------------------------

    def coordinator_group(self, group: str) -> CoordinatorGroup:
        """A coordinator group's state and owners, from its coordinator (FindCoordinator at any running broker,
        then DescribeGroups); the coordinator hands out assignments in Stable groups only."""
        for entry in self.cluster.brokers:
            if not self.running(entry.id):
                continue
            try:
                with self._connection(entry.host, entry.port, READ_TIMEOUT_S) as conn:
                    found = conn.send(ApiKey.FIND_COORDINATOR, 0, {"group_id": group})
                if found.error_code != ErrorCode.NONE:
                    raise Unknown(f"no coordinator for group {group} (error {found.error_code})")
                with self._connection(found.host, found.port, READ_TIMEOUT_S) as conn:
                    described = conn.send(ApiKey.DESCRIBE_GROUPS, 0, {"group_ids": [group]}).groups[0]
            except OSError:
                continue
            if described.error_code != ErrorCode.NONE:
                raise Unknown(f"group {group} cannot be described (error {described.error_code})")
            owners = {TopicPartition(topic, partition): member.client_id for member in described.members
                      for topic, partition in decode_assignment(bytes(member.member_assignment))}
            return CoordinatorGroup(described.state, owners)
        raise Unknown(f"no broker answered for group {group}")

    def deletion_pending(self, topic: str) -> bool:
        return self.get(paths.delete_topic_path(topic)) is not None

    # ---- ZooKeeper servers and processes --------------------------------------------------------------------

    def zookeeper_roles(self) -> dict[int, str]:
        from zkbroker.lab.zookeeper import server_role

        return {z.id: ("down" if z.pid is not None and process_state(z.pid) != "running"
                       else server_role(z.port, z.host, timeout=1.0)) for z in self.cluster.zookeepers}

    def zookeeper_quorum(self) -> bool:
        roles = self.zookeeper_roles()
        if not roles:  # an external ZooKeeper: it answers or it does not
            try:
                self.get(paths.BROKER_IDS)
                return True
            except Unknown:
                return False
        serving = sum(1 for role in roles.values() if role in ("leader", "follower", "standalone"))
        return serving > len(roles) // 2

    def broker(self, broker_id: int) -> BrokerEntry:
        return self.cluster.broker(broker_id)

    def running(self, broker_id: int) -> bool:
        pid = self.reload().broker(broker_id).pid
        return pid is not None and process_state(pid) == "running"

    def log_contains(self, broker_id: int, pattern: str, since: int = 0) -> bool:
        """Whether the broker's server.log (from byte `since`) has a line matching the regex."""
        text = self.server_log(broker_id)[since:]
        return re.search(pattern, text, re.MULTILINE) is not None

    def server_log(self, broker_id: int) -> str:
        path = Path(self.broker(broker_id).config).parent / "server.log"
        try:
            return path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    # ---- the replicas, for the checker ----------------------------------------------------------------------

    def partition_dir(self, broker_id: int, topic: str, partition: int) -> Path:
        return Path(self.broker(broker_id).config).parent / "data" / f"{topic}-{partition}"

    def replica_log(self, broker_id: int, topic: str, partition: int) -> dict[int, bytes]:
        """{offset: value} of one replica, read from its segment files (a torn tail is left out)."""
        out: dict[int, bytes] = {}
        for segment in sorted(self.partition_dir(broker_id, topic, partition).glob("*.log")):
            for message in iter_messages(segment.read_bytes(), verify_crc=False):
                out[message.offset] = message.value if message.value is not None else b""
        return out

    def high_watermark(self, broker_id: int, topic: str, partition: int) -> int | None:
        """The HW the broker answers a consumer's fetch with; None when it cannot answer as leader."""
        entry = self.broker(broker_id)
        try:
            with self._connection(entry.host, entry.port, 5) as conn:
                response = conn.send(ApiKey.FETCH, 0, {
                    "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0,
                    "topics": [{"topic": topic, "partitions": [
                        {"partition": partition, "fetch_offset": 0, "max_bytes": 1}]}]})
        except OSError:
            return None
        row = response.topics[0].partitions[0]
        return row.high_watermark if row.error_code == ErrorCode.NONE else None

    def settled(self, tps: list[TopicPartition]) -> bool:
        """Every partition has a live leader that answers with its HW, every live replica is in its ISR, and each
        has applied the current leadership (its own view: the same leader and leader epoch) and its log ends at
        the HW: a replica that restarted may still be listed in the ISR while it has not truncated yet, and a new
        leader's HW (0.8's, learned from its last leader's answers) may lag records every replica already holds
        until they fetch again (the writes have stopped when this is asked, so the HW catches up)."""
        try:
            views: dict[int, dict] = {}
            for tp in tps:
                leadership = self.leadership(tp.topic, tp.partition)
                assignment = self.assignment(tp.topic) or {}
                if leadership is None or leadership.leader is None or not self.running(leadership.leader):
                    return False
                live = [r for r in assignment.get(tp.partition, ()) if self.running(r)]
                if not set(live) <= set(leadership.isr):
                    return False
                hw = self.high_watermark(leadership.leader, tp.topic, tp.partition)
                if hw is None:
                    return False
                for replica in live:
                    if replica not in views:
                        views[replica] = self._broker_view(replica)
                    mine = views[replica].get((tp.topic, tp.partition))
                    if mine is None or (mine["leader"], mine["leader_epoch"]) != (leadership.leader,
                                                                                   leadership.leader_epoch) \
                            or mine["leo"] != hw:
                        return False
        except (Unknown, LabError, KeyError):
            return False
        return True

    def _broker_view(self, broker_id: int) -> dict[tuple[str, int], dict]:
        """The broker's own view of each partition it holds (its control socket's `state`)."""
        return {(p["topic"], p["partition"]): p for p in self.lab.broker_state(broker_id)["partitions"]}

    def final_state(self, tp: TopicPartition) -> PartitionState:
        """The partition as a consumer would read it (the leader's log below its HW) beside every live ISR
        member's log (their agreement below the HW is what the checker compares). No leader, or a leader that
        does not answer: leader None."""
        try:
            leadership = self.leadership(tp.topic, tp.partition)
        except Unknown:
            leadership = None
        leader = leadership.leader if leadership is not None else None
        hw = None
        if leader is not None and self.running(leader):
            hw = self.high_watermark(leader, tp.topic, tp.partition)
        if hw is None:
            return PartitionState(tp.topic, tp.partition, 0, None, {})
        members = [b for b in leadership.isr if self.running(b)]
        if leader not in members:
            members.append(leader)
        return PartitionState(tp.topic, tp.partition, hw, leader,
                              {b: self.replica_log(b, tp.topic, tp.partition) for b in members})


def cut_log(partition_dir: Path, keep: int) -> int:
    """A crash that lost a log's unflushed tail: keep the first `keep` offsets of the partition's log (every
    later entry goes; a record batch, or a compressed wrapper, goes whole once any of its offsets is past
    them), and remove the broker's clean-shutdown marker, so it recovers the log when it starts. Returns the
    messages removed."""
    removed = 0
    limit: int | None = None
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        cut = None
        for entry in iter_entries(data):
            first = entry.batch.base_offset if entry.magic == 2 else entry.offset
            last = entry.batch.last_offset if entry.magic == 2 else entry.offset
            if limit is None:
                limit = first + keep
            if last >= limit:
                if cut is None:
                    cut = entry.position
                removed += last - first + 1
        if cut is not None:
            with open(segment, "r+b") as f:
                f.truncate(cut)
    (partition_dir.parent / CLEAN_SHUTDOWN_MARKER).unlink(missing_ok=True)
    return removed

"""What the dashboard knows at one moment, as plain frozen data: ZooKeeper's truth (read by
`zookeeper_reader`), each broker process as the lab sees it, and each broker's own view (its lab control
socket's `state`, read by `broker_state`). The views (`views.py`) are pure functions of these."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Stat:
    """A znode's Stat, the fields ZooInspector shows (times in epoch milliseconds)."""

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    ephemeral_owner: int  # the session id that owns an ephemeral node; 0 for a persistent one
    data_length: int
    num_children: int

    def as_json(self) -> dict:
        return {"czxid": hex(self.czxid), "mzxid": hex(self.mzxid), "ctime": self.ctime, "mtime": self.mtime,
                "version": self.version, "cversion": self.cversion,
                "ephemeralOwner": session_text(self.ephemeral_owner), "dataLength": self.data_length,
                "numChildren": self.num_children}


def session_text(session: int | None) -> str | None:
    """A ZooKeeper session id as ZooKeeper prints it (`0x1000a2b3c4d0000`); None for no session."""
    return None if not session else f"0x{session:x}"


@dataclass(frozen=True)
class Registration:
    """`/brokers/ids/N` as read: the address and the session that owns the ephemeral node."""

    broker: int
    host: str
    port: int
    session: int
    registered_at: int  # the znode's ctime


@dataclass(frozen=True)
class PartitionTruth:
    """`/brokers/topics/T` (the assignment) and `.../partitions/P/state` with its zkVersion, as read."""

    topic: str
    partition: int
    replicas: tuple[int, ...]  # assigned replicas, the first the preferred leader
    leader: int | None = None  # None: no state znode yet; -1: no leader
    leader_epoch: int | None = None
    controller_epoch: int | None = None
    isr: tuple[int, ...] = ()
    zk_version: int | None = None


@dataclass(frozen=True)
class ZooKeeperSnapshot:
    """ZooKeeper's truth for the views; `reachable` false when no server of a quorum answered."""

    reachable: bool
    controller: int | None = None
    controller_elected_at: int | None = None  # /controller's ctime
    controller_epoch: int | None = None
    controller_epoch_zk_version: int | None = None
    registrations: dict[int, Registration] = field(default_factory=dict)
    partitions: tuple[PartitionTruth, ...] = ()
    # Each topic's config overrides (/config/topics/T), as the Admin API, `configs` or `topics --config` left them
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class BrokerProcess:
    """A broker of cluster.json as the lab sees it from outside: its process and the network faults on it."""

    id: int
    host: str
    port: int
    pid: int | None
    process: str  # running, paused or dead (zkbroker.lab.processes.process_state)
    cut_off_from: tuple[str, ...] = ()  # lab nodes a partition in force separates it from


@dataclass(frozen=True)
class ZooKeeperServer:
    id: int
    host: str
    port: int
    pid: int | None
    role: str  # leader, follower, standalone, looking or down
    process: str = "running"  # running, paused, dead (or unknown: not the lab's process)


@dataclass(frozen=True)
class ReplicaBelief:
    """What one broker believes of one partition: the LeaderAndIsr it applied, its metadata cache's leader,
    its replica's high watermark and log end, its last stable offset and how many transactions are open in it."""

    topic: str
    partition: int
    leader: int | None = None
    leader_epoch: int | None = None
    isr: tuple[int, ...] | None = None
    zk_version: int | None = None  # the leader's cached zkVersion of the state znode (its ISR writes use it)
    controller_epoch: int | None = None
    metadata_leader: int | None = None
    hw: int | None = None
    leo: int | None = None
    log_start: int | None = None
    lso: int | None = None
    open_transactions: int | None = None


@dataclass(frozen=True)
class BrokerBelief:
    """A broker's answer to its control socket's `state` query."""

    broker: int
    controller_epoch: int | None = None  # the controller epoch it last heard
    session: int | None = None  # its own ZooKeeper session
    is_controller: bool | None = None
    partitions: tuple[ReplicaBelief, ...] = ()
    zookeeper_connected: bool | None = None
    faults: tuple[dict, ...] = ()  # the fault points in force on it (zkbroker/fault_points.py)
    connections: tuple[dict, ...] = ()  # its open connections: listener, principal, client id, address
    quotas: tuple[dict, ...] = ()  # each quota entity in use: bound, rate, last throttle

    def replica(self, topic: str, partition: int) -> ReplicaBelief | None:
        for r in self.partitions:
            if r.topic == topic and r.partition == partition:
                return r
        return None

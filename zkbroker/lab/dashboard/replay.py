"""Replay: the cluster as the timeline tells it at a moment of a run, rebuilt as the same snapshots the live
views use, so the time slider scrubs the very same views back (RaftScope's time slider). Pure.

What the timeline does not say is left unknown rather than guessed: registrations are unknown (as when
ZooKeeper does not answer) unless the timeline records them, a broker that recorded no
`leader_and_isr_applied` has no belief at that moment; assignments come from the caller (ZooKeeper's, now)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from zkbroker.lab.dashboard.events import broker_of, partition_of
from zkbroker.lab.dashboard.snapshot import (
    BrokerBelief,
    BrokerProcess,
    PartitionTruth,
    Registration,
    ReplicaBelief,
    ZooKeeperServer,
    ZooKeeperSnapshot,
)
from zkbroker.lab.network import NetworkError, Partition, separated

_PROCESS_STATES = {"process_started": "running", "process_resumed": "running", "process_paused": "paused",
                   "process_killed": "dead", "process_stopped": "dead"}


def snapshot_at(events: Iterable[dict], at: float, brokers: Iterable[BrokerProcess],
                zookeepers: Iterable[ZooKeeperServer], assignments: Mapping[tuple[str, int], tuple[int, ...]],
                nodes: Iterable[str] = ()) -> tuple[ZooKeeperSnapshot, list[BrokerProcess],
                                                    dict[int, BrokerBelief], list[ZooKeeperServer]]:
    """(ZooKeeper's truth, the broker processes, the brokers' beliefs, the ZooKeeper servers) at `at` (epoch
    ms), from the events up to it. `brokers` and `zookeepers` are the lab's now (ids, addresses); `nodes` the
    lab network's node names, to expand `zookeeper` in a partition."""
    brokers, zookeepers = list(brokers), list(zookeepers)
    events = sorted((e for e in events if isinstance(e.get("ts"), (int, float))), key=lambda e: e["ts"])
    started_later = {e.get("node") for e in events if e["ts"] > at and e.get("kind") == "process_started"}
    process = {b.id: ("dead" if f"broker:{b.id}" in started_later else "running") for b in brokers}
    roles = {z.id: z.role for z in zookeepers}
    zk_process = {z.id: ("dead" if f"zookeeper:{z.id}" in started_later else "running") for z in zookeepers}
    controller = elected_at = epoch = None
    registrations: dict[int, Registration] = {}
    truths: dict[tuple[str, int], dict] = {}
    applied: dict[int, dict[tuple[str, int], dict]] = {}
    epoch_seen: dict[int, int] = {}
    partitions: list[Partition] = []
    for e in (e for e in events if e["ts"] <= at):
        kind, ts = e.get("kind"), e["ts"]
        node = e.get("node")
        if kind in _PROCESS_STATES and isinstance(node, str) and node.startswith("broker:"):
            process[int(node.split(":")[1])] = _PROCESS_STATES[kind]
        elif kind in _PROCESS_STATES and isinstance(node, str) and node.startswith("zookeeper:"):
            zk_process[int(node.split(":")[1])] = _PROCESS_STATES[kind]
        elif kind == "zookeeper_role" and isinstance(e.get("server"), int):
            roles[e["server"]] = e.get("role", "down")
        elif kind == "controller_elected":
            controller, epoch, elected_at = e.get("broker"), e.get("epoch"), int(ts)
        elif kind == "controller_resigned" and e.get("broker") == controller:
            controller = None
        elif kind == "broker_registered" and broker_of(e) is not None:
            b = broker_of(e)
            registrations[b] = Registration(b, e.get("host", ""), e.get("port", 0), _session(e.get("session")), int(ts))
        elif kind == "broker_expired" and broker_of(e) is not None:
            registrations.pop(broker_of(e), None)
        elif kind in ("leader_changed", "isr_changed") and partition_of(e):
            truth = truths.setdefault(partition_of(e), {})
            for key in ("leader", "leader_epoch", "isr", "zk_version", "controller_epoch"):
                if key in e:
                    truth[key] = e[key]
        elif kind == "leader_and_isr_applied" and partition_of(e) and broker_of(e) is not None:
            applied.setdefault(broker_of(e), {}).setdefault(partition_of(e), {}).update(
                {k: e[k] for k in ("leader", "leader_epoch", "isr", "zk_version") if k in e})
            if isinstance(e.get("controller_epoch"), int):
                epoch_seen[broker_of(e)] = e["controller_epoch"]
        elif kind == "hw_moved" and partition_of(e) and broker_of(e) is not None:
            applied.setdefault(broker_of(e), {}).setdefault(partition_of(e), {})["hw"] = e.get("to")
        elif kind == "fault_applied" and e.get("fault") == "partition":
            partitions.append(Partition(node, tuple(e.get("peers") or ()), bool(e.get("one_way"))))
        elif kind == "fault_healed" and e.get("fault") == "partition":
            healed = Partition(node, tuple(e.get("peers") or ()), bool(e.get("one_way")))
            partitions = [p for p in partitions if p != healed]
    keys = sorted(set(assignments) | set(truths))
    registrations_recorded = any(e.get("kind") in ("broker_registered", "broker_expired") for e in events)
    zk = ZooKeeperSnapshot(
        reachable=registrations_recorded, controller=controller, controller_elected_at=elected_at,
        controller_epoch=epoch, registrations=registrations,
        partitions=tuple(PartitionTruth(t, p, tuple(assignments.get((t, p), ())),
                                        truths.get((t, p), {}).get("leader"),
                                        truths.get((t, p), {}).get("leader_epoch"),
                                        truths.get((t, p), {}).get("controller_epoch"),
                                        tuple(truths.get((t, p), {}).get("isr", ())),
                                        truths.get((t, p), {}).get("zk_version")) for t, p in keys))
    try:
        cut = separated(partitions, nodes)
    except NetworkError:  # a node the lab no longer has
        cut = {}
    processes = [BrokerProcess(b.id, b.host, b.port, b.pid, process[b.id], tuple(cut.get(f"broker:{b.id}", ())))
                 for b in brokers]
    beliefs = {b: BrokerBelief(b, epoch_seen.get(b), None, None,
                               tuple(ReplicaBelief(t, p, v.get("leader"), v.get("leader_epoch"),
                                                   tuple(v["isr"]) if "isr" in v else None, v.get("zk_version"),
                                                   hw=v.get("hw"))
                                     for (t, p), v in sorted(parts.items())))
               for b, parts in applied.items()}
    servers = [ZooKeeperServer(z.id, z.host, z.port, z.pid, roles[z.id], zk_process[z.id]) for z in zookeepers]
    return zk, processes, beliefs, servers


def _session(value: object) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value, 16)
        except ValueError:
            return 0
    return 0

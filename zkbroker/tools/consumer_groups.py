"""`zkbroker consumer-groups`: Kafka 2.x's kafka-consumer-groups.sh for coordinator groups (DESIGN §12).

    zkbroker consumer-groups --bootstrap-server HOST:PORT (--list | --describe --group G | --delete --group G)

`--list` asks every broker for the groups it coordinates (ListGroups) and prints their ids, one a line.
`--describe` asks the group's coordinator (FindCoordinator) for its members (DescribeGroups) and committed offsets
(OffsetFetch v2 with null topics: all of them at once), the partition leaders
for their log end offsets (ListOffsets), and prints one row per partition, owned or committed, in Kafka 2.x's
columns and widths. A group without active members first says so on stderr, and its rows show `-` for CONSUMER-ID,
HOST and CLIENT-ID; a rebalancing one warns on stderr. `--delete` asks the group's coordinator to forget an empty
group and its offsets (DeleteGroups): `Deletion of requested consumer groups ('G') was successful.`, as Kafka 2.x
prints it. `--reset-offsets` and `--delete-offsets` move or forget a group's offsets (consumer_group_offsets.py).
ZooKeeper groups stay with `consumer-offset-checker`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from zkbroker import admin
from zkbroker.client.connection import BrokerConnection
from zkbroker.client.security import ClientSecurity
from zkbroker.coordinator.consumer_protocol import decode_assignment
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode, for_code
from zkbroker.tools import consumer_group_offsets
from zkbroker.tools.common import ToolError, add_command_config, command_config

MISSING = "-"
HEADER = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
          "CLIENT-ID")


def add_command(commands) -> None:
    p = commands.add_parser("consumer-groups",
                            help="list coordinator groups, or describe one (kafka-consumer-groups.sh)",
                            description="List all consumer groups, describe a consumer group.")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT]",
                   help="The server(s) to connect to.")
    add_command_config(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="List all consumer groups.")
    action.add_argument("--describe", action="store_true", help="Describe consumer group and list offset lag.")
    action.add_argument("--delete", action="store_true", help="Pass in groups to delete topic partition offsets "
                        "and ownership information over the entire consumer group.")
    action.add_argument("--reset-offsets", action="store_true", help="Reset offsets of consumer group.")
    action.add_argument("--delete-offsets", action="store_true", help="Delete offsets of consumer group.")
    p.add_argument("--group", help="The consumer group we wish to act on.")
    consumer_group_offsets.add_arguments(p)
    p.add_argument("--timeout", type=int, default=5000, metavar="MS", help="Socket timeout in ms (default 5000).")
    p.set_defaults(run=run)


@dataclass(frozen=True)
class Row:
    group: str
    topic: str
    partition: int
    offset: int | None
    log_end_offset: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None

    def cells(self) -> tuple[str, ...]:
        lag = None if self.offset is None or self.log_end_offset is None else self.log_end_offset - self.offset
        return tuple(MISSING if v is None else str(v) for v in (
            self.group, self.topic, self.partition, self.offset, self.log_end_offset, lag, self.consumer_id,
            self.host, self.client_id))


def format_describe(rows: list[Row]) -> list[str]:
    """Kafka 2.x's printOffsets: a blank line, the header, the rows; GROUP, TOPIC, CONSUMER-ID and HOST at least
    15 wide or as wide as their longest value."""
    cells = [r.cells() for r in rows]
    width = {i: max([15] + [len(c[i]) for c in cells]) for i in (0, 1, 6, 7)}
    pattern = (f"%-{width[0]}s %-{width[1]}s %-10s %-15s %-15s %-15s %-{width[6]}s %-{width[7]}s %s")
    return ["", pattern % HEADER, *(pattern % c for c in cells)]


def run(args: argparse.Namespace) -> int:
    action = next(a for a in ("list", "describe", "delete", "reset_offsets", "delete_offsets") if getattr(args, a))
    if action != "list" and not args.group:
        raise ToolError(f"Option [{action.replace('_', '-')}] takes one of these options: [group]")
    cluster = Cluster(args.bootstrap_server, args.timeout / 1000.0, security=command_config(args))
    try:
        if args.list:
            for group in cluster.list_groups():
                print(group)
        elif args.delete:
            delete(cluster, args.group)
        elif args.reset_offsets:
            consumer_group_offsets.reset_offsets(cluster, args)
        elif args.delete_offsets:
            consumer_group_offsets.delete_offsets(cluster, args)
        else:
            describe(cluster, args.group)
    finally:
        cluster.close()
    return 0


def describe(cluster: Cluster, group: str) -> None:
    coordinator = cluster.coordinator(group)
    described = coordinator.send(ApiKey.DESCRIBE_GROUPS, 0, {"group_ids": [group]}).groups[0]
    if described.error_code != ErrorCode.NONE:
        raise ToolError(f"Could not describe group {group}: {for_code(described.error_code)()}")
    if described.state == "Dead":
        raise ToolError(f"Consumer group '{group}' does not exist.")
    if described.state in ("PreparingRebalance", "CompletingRebalance"):
        print(f"Warning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
    owners: dict[tuple[str, int], tuple[str, str, str]] = {}
    for member in described.members:
        for tp in decode_assignment(bytes(member.member_assignment)):
            owners[tp] = (member.member_id, member.client_host, member.client_id)
    if not described.members:
        print(f"Consumer group '{group}' has no active members.", file=sys.stderr)
    committed = cluster.committed(coordinator, group)
    partitions = sorted(set(owners) | set(committed))
    ends = cluster.log_end_offsets(partitions)
    rows = [Row(group, topic, partition, committed.get((topic, partition)), ends.get((topic, partition)),
                *owners.get((topic, partition), (None, None, None))) for topic, partition in partitions]
    for line in format_describe(rows):
        print(line)


def delete(cluster: Cluster, group: str) -> None:
    response = cluster.coordinator(group).send(ApiKey.DELETE_GROUPS, 1, {"groups_names": [group]})
    (result,) = response.results
    if result.error_code != ErrorCode.NONE:
        raise ToolError(f"Deletion of some consumer groups failed: * Group '{group}' could not be deleted due to: "
                        f"{for_code(result.error_code)()}")
    print(f"Deletion of requested consumer groups ('{group}') was successful.")


class Cluster:
    """Connections to the brokers, found from the bootstrap servers' Metadata."""

    def __init__(self, bootstrap: str, timeout_s: float, client_id: str = "consumer-groups",
                 security: ClientSecurity | None = None) -> None:
        self.timeout_s = timeout_s
        self.client_id = client_id
        self.security = security
        self._connections: dict[int, BrokerConnection] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[tuple[str, int], int] = {}
        self.replicas: dict[tuple[str, int], tuple[int, ...]] = {}
        errors = []
        for server in [s.strip() for s in bootstrap.split(",") if s.strip()]:
            host, _, port = server.rpartition(":")
            if not host or not port.isdigit():
                raise ToolError(f"Invalid bootstrap server {server!r}: expected HOST:PORT")
            conn = BrokerConnection(host, int(port), client_id, timeout_s, security)
            try:
                metadata = conn.send(ApiKey.METADATA, 1, {"topics": None})
            except OSError as e:
                errors.append(f"{server}: {e}")
                continue
            finally:
                conn.close()
            self.brokers = {b.node_id: (b.host, b.port) for b in metadata.brokers}
            self.leaders = {(t.topic, p.partition): p.leader for t in metadata.topics for p in t.partitions}
            self.replicas = {(t.topic, p.partition): tuple(p.replicas) for t in metadata.topics for p in t.partitions}
            return
        raise ToolError(f"Cannot reach any bootstrap server ({'; '.join(errors)})")

    def connection(self, broker_id: int) -> BrokerConnection:
        if broker_id not in self._connections:
            host, port = self.brokers[broker_id]
            self._connections[broker_id] = BrokerConnection(host, port, self.client_id, self.timeout_s, self.security)
        return self._connections[broker_id]

    def list_groups(self) -> list[str]:
        groups: set[str] = set()
        for broker_id in sorted(self.brokers):
            response = self.connection(broker_id).send(ApiKey.LIST_GROUPS, 0, {})
            groups |= {g.group_id for g in response.groups if g.protocol_type in ("consumer", "")}
        return sorted(groups)

    def coordinator(self, group: str) -> BrokerConnection:
        any_broker = self.connection(min(self.brokers))
        response = any_broker.send(ApiKey.FIND_COORDINATOR, 0, {"group_id": group})
        if response.error_code != ErrorCode.NONE or response.node_id not in self.brokers:
            raise ToolError(f"The coordinator of group {group} is not available: "
                            f"{for_code(response.error_code)()}")
        return self.connection(response.node_id)

    def committed(self, coordinator: BrokerConnection, group: str) -> dict[tuple[str, int], int]:
        """Every offset the group has committed: OffsetFetch v2 with null topics asks for all of them at once
        (Kafka 2.x's tool does the same through its admin client)."""
        response = coordinator.send(ApiKey.OFFSET_FETCH, 2, {"group_id": group, "topics": None})
        errors = [response.error_code] + [p.error_code for t in response.topics for p in t.partitions]
        error = next((e for e in errors if e != ErrorCode.NONE), ErrorCode.NONE)
        if error != ErrorCode.NONE:
            raise ToolError(f"Could not fetch the offsets of group {group}: {for_code(error)()}")
        return {(t.topic, p.partition): p.offset for t in response.topics for p in t.partitions
                if p.offset >= 0 and t.topic != admin.OFFSETS_TOPIC}

    def offsets_for(self, partitions: list[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
        """ListOffsets v1 at each leader: the earliest (-2), latest (-1) or first offset at or after `timestamp`
        (-1 when none is) of each partition that answers."""
        by_leader: dict[int, dict[str, list]] = {}
        for topic, partition in partitions:
            leader = self.leaders.get((topic, partition), -1)
            if leader in self.brokers:
                by_leader.setdefault(leader, {}).setdefault(topic, []).append(
                    {"partition": partition, "timestamp": timestamp})
        out = {}
        for leader, topics in by_leader.items():
            response = self.connection(leader).send(ApiKey.LIST_OFFSETS, 1, {"replica_id": -1, "topics": [
                {"topic": t, "partitions": ps} for t, ps in topics.items()]})
            for t in response.topics:
                for p in t.partitions:
                    if p.error_code == ErrorCode.NONE:
                        out[(t.topic, p.partition)] = p.offset
        return out

    def commit(self, coordinator: BrokerConnection, group: str, offsets: dict[tuple[str, int], int]) -> None:
        """OffsetCommit v2 from outside the group (generation -1), as Kafka's tool commits a reset."""
        topics: dict[str, list] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            topics.setdefault(topic, []).append({"partition": partition, "offset": offset, "metadata": ""})
        response = coordinator.send(ApiKey.OFFSET_COMMIT, 2, {
            "group_id": group, "generation_id": -1, "member_id": "", "retention_time_ms": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]})
        errors = {(t.topic, p.partition): p.error_code for t in response.topics for p in t.partitions
                  if p.error_code != ErrorCode.NONE}
        if errors:
            raise ToolError("Could not commit the new offsets: " + ", ".join(
                f"{t}-{p}: {for_code(code)()}" for (t, p), code in sorted(errors.items())))

    def log_end_offsets(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for tp in partitions:
            leader = self.leaders.get(tp, -1)
            if leader in self.brokers:
                by_leader.setdefault(leader, []).append(tp)
        out = {}
        for leader, tps in by_leader.items():
            topics: dict[str, list] = {}
            for topic, partition in tps:
                topics.setdefault(topic, []).append({"partition": partition, "timestamp": -1, "max_num_offsets": 1})
            response = self.connection(leader).send(ApiKey.LIST_OFFSETS, 0, {"replica_id": -1, "topics": [
                {"topic": t, "partitions": ps} for t, ps in topics.items()]})
            for t in response.topics:
                for p in t.partitions:
                    if p.error_code == ErrorCode.NONE and p.offsets:
                        out[(t.topic, p.partition)] = p.offsets[0]
        return out

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()

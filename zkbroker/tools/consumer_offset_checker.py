"""`zkbroker consumer-offset-checker`: Kafka 0.8.2's kafka-consumer-offset-checker.sh
(kafka.tools.ConsumerOffsetChecker).

For each partition of the group's topics (`--topic t1,t2`, else the topics under `/consumers/<g>/owners`) it
prints the committed offset -- as 0.8.2 did, the one kept in `__consumer_offsets` (OffsetFetch v1 at the group's
coordinator, the leader of its offsets partition) if there is one, else `/consumers/<g>/offsets/<t>/<p>` -- the
log size (the leader's high watermark, from a ListOffsets request), the lag and the owner
(`/consumers/<g>/owners/<t>/<p>`, or `none`), in 0.8.2's format `%-15s %-30s %-3s %-15s %-15s %-15s %s`:

    Group           Topic                          Pid Offset          logSize         Lag             Owner
    billing         orders                         0   1200            1250            50              billing_host-1-0

As 0.8.2: a partition with no committed offset in a topic that has some prints offset -1 and lag `unknown`;
a partition whose leader is unknown prints `No broker for partition <t> - <p>`; `--broker-info` adds the
brokers asked. Where 0.8.2 printed `Exiting due to: ...` and exited 0 -- an unknown group, an unknown topic,
a topic without any committed offset -- zkbroker says so in one sentence on stderr and exits 1, except the last,
which prints `unknown` offset and lag.
"""

from __future__ import annotations

import argparse

from zkbroker import admin
from zkbroker.client.connection import BrokerConnection
from zkbroker.coordinator.lookup import partition_for
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode
from zkbroker.tools.common import ToolError, integer, read_partitions, skip_znode, topic_names, zookeeper
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import BrokerRegistration, LeaderIsrState, ZnodeFormatError, decode_offset

ROW = "%-15s %-30s %-3s %-15s %-15s %-15s %s"


def add_command(commands) -> None:
    p = commands.add_parser("consumer-offset-checker",
                            help="show a group's offsets, log sizes and lag (kafka-consumer-offset-checker.sh)",
                            description="Check the offset of your consumers.")
    p.add_argument("--zookeeper", default="localhost:2181", metavar="URLS", help="ZooKeeper connect string.")
    p.add_argument("--group", help="Consumer group.")
    p.add_argument("--topic", help="Comma-separated list of consumer topics (all topics if absent).")
    p.add_argument("--broker-info", action="store_true", help="Print broker info")
    p.add_argument("--socket.timeout.ms", dest="socket_timeout_ms", default="6000", metavar="MS",
                   help="Socket timeout to use when querying for offsets.")
    p.add_argument("--retry.backoff.ms", dest="retry_backoff_ms", default="3000", metavar="MS",
                   help="Accepted (0.8.2's retry back-off for offset queries); no effect.")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not args.group:
        raise ToolError('Missing required argument "[group]"')
    timeout_s = integer(args, "socket_timeout_ms", "socket.timeout.ms") / 1000.0
    group = args.group
    with zookeeper(args.zookeeper) as zk:
        if zk.kazoo.exists(paths.consumer_group_path(group)) is None and not args.topic:
            raise ToolError(f"Consumer group {group} does not exist in ZooKeeper")
        owners = paths.consumer_group_path(group) + "/owners"
        topics = [t for t in args.topic.split(",") if t] if args.topic else topic_names(zk, owners)
        partitions = {}
        for topic in topics:
            found = read_partitions(zk, topic)
            if found is not None:
                partitions[topic] = sorted(found)
            elif admin.topic_exists(zk, topic):
                continue  # unreadable: read_partitions said so
            elif args.topic:
                raise ToolError(f"Topic {topic} does not exist")
            else:
                skip_znode(f"{owners}/{topic}", f"topic {topic} does not exist")
        checker = _Checker(zk, group, timeout_s)
        try:
            checker.read_kafka_offsets(partitions)
            print(ROW % ("Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner"))
            for topic in sorted(partitions):
                for pid in partitions[topic]:
                    checker.print_partition(topic, pid)
            if args.broker_info:
                print("BROKER INFO")
                for broker_id, broker in checker.brokers.items():
                    if broker is not None:
                        print(f"{broker_id} -> {broker.host}:{broker.port}")
        finally:
            checker.close()
    return 0


class _Checker:
    def __init__(self, zk: ZkClient, group: str, timeout_s: float) -> None:
        self.zk = zk
        self.group = group
        self.timeout_s = timeout_s
        self.brokers: dict[int, BrokerRegistration | None] = {}
        self._connections: dict[int, BrokerConnection] = {}
        self.kafka_offsets: dict[tuple[str, int], int] = {}

    def read_kafka_offsets(self, partitions: dict[str, list[int]]) -> None:
        """The group's offsets in `__consumer_offsets`, from its coordinator, found through ZooKeeper (the leader of
        partition Utils.abs(hashCode) % partitions) so that the tool never creates the topic; none if it does not
        exist or its coordinator cannot answer."""
        assignment = read_partitions(self.zk, admin.OFFSETS_TOPIC) if admin.topic_exists(
            self.zk, admin.OFFSETS_TOPIC) else None
        if not assignment or not partitions:
            return
        leader = self.leader(admin.OFFSETS_TOPIC, partition_for(self.group, len(assignment)))
        broker = None if leader is None else self.broker(leader)
        if broker is None:
            return
        request = {"group_id": self.group, "topics": [{"topic": t, "partitions": ps} for t, ps in partitions.items()]}
        try:
            response = self._connection(broker).send(ApiKey.OFFSET_FETCH, 1, request)
        except OSError:
            self._connection(broker).close()
            return
        self.kafka_offsets = {(t.topic, p.partition): p.offset for t in response.topics for p in t.partitions
                              if p.error_code == ErrorCode.NONE and p.offset >= 0}

    def offset(self, topic: str, pid: int) -> str:
        if (topic, pid) in self.kafka_offsets:
            return str(self.kafka_offsets[(topic, pid)])
        path = paths.consumer_offset_path(self.group, topic, pid)
        data, _ = self.zk.get(path)
        if data is not None:
            try:
                return str(decode_offset(data))
            except ZnodeFormatError as e:
                skip_znode(path, str(e))
                return "unknown"
        if self.zk.kazoo.exists(paths.consumer_offsets_path(self.group, topic)) is not None:
            return "-1"
        return "unknown"

    def leader(self, topic: str, pid: int) -> int | None:
        path = paths.partition_state_path(topic, pid)
        data, _ = self.zk.get(path)
        if data is None:
            return None
        try:
            leader = LeaderIsrState.decode(data).leader
        except ZnodeFormatError as e:
            skip_znode(path, str(e))
            return None
        return leader if leader >= 0 else None

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id not in self.brokers:
            data, _ = self.zk.get(paths.broker_path(broker_id))
            try:
                self.brokers[broker_id] = BrokerRegistration.decode(broker_id, data)
            except ZnodeFormatError:
                print(f"Could not parse broker info due to Broker id {broker_id} does not exist")
                self.brokers[broker_id] = None
        return self.brokers[broker_id]

    def _connection(self, broker: BrokerRegistration) -> BrokerConnection:
        conn = self._connections.get(broker.broker_id)
        if conn is None:
            conn = self._connections[broker.broker_id] = BrokerConnection(
                broker.host, broker.port, "ConsumerOffsetChecker", self.timeout_s)
        return conn

    def log_size(self, broker: BrokerRegistration, topic: str, pid: int) -> str:
        conn = self._connection(broker)
        try:
            response = conn.send(ApiKey.LIST_OFFSETS, 0, {"replica_id": -1, "topics": [
                {"topic": topic, "partitions": [{"partition": pid, "timestamp": -1, "max_num_offsets": 1}]}]})
        except OSError as e:
            conn.close()
            raise ToolError(f"Cannot reach broker {broker.broker_id} at {broker.host}:{broker.port}: {e}") from None
        row = response.topics[0].partitions[0]
        if row.error_code != ErrorCode.NONE or not row.offsets:
            return "unknown"
        return str(row.offsets[0])

    def print_partition(self, topic: str, pid: int) -> None:
        offset = self.offset(topic, pid)
        owner, _ = self.zk.get(paths.consumer_owner_path(self.group, topic, pid))
        leader = self.leader(topic, pid)
        if leader is None:
            print(f"No broker for partition {topic} - {pid}")
            return
        broker = self.broker(leader)
        if broker is None:
            return
        log_size = self.log_size(broker, topic, pid)
        lag = "unknown" if offset in ("-1", "unknown") or log_size == "unknown" else str(int(log_size) - int(offset))
        print(ROW % (self.group, topic, pid, offset, log_size, lag,
                     owner.decode(errors="replace") if owner is not None else "none"))

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()

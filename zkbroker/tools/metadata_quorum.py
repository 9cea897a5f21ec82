"""`zkbroker metadata-quorum`: Kafka 3.7's kafka-metadata-quorum.sh (MetadataQuorumCommand).

    zkbroker metadata-quorum --bootstrap-server HOST:PORT[,HOST:PORT...] describe --status
    zkbroker metadata-quorum --bootstrap-server HOST:PORT describe --replication [--human-readable]

The bootstrap server is any controller or any KRaft broker: a controller's DescribeCluster names the cluster and
the active controller, which answers DescribeQuorum; a broker forwards DescribeQuorum to the active controller
(a ZooKeeper-mode broker is refused with one sentence). The output is Kafka 3.7's: `--status` labels
padded to column 24, `--replication` a table whose every cell is padded to its column's width and followed by
a tab (Kafka's ToolsUtils.prettyPrintTable), rows Leader, then Followers, then Observers.
"""

from __future__ import annotations

import argparse
import time

from zkbroker.client.connection import BrokerConnection
from zkbroker.client.security import ClientSecurity
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode
from zkbroker.raft import messages as m
from zkbroker.raft import wire
from zkbroker.tools.common import ToolError, add_command_config, command_config

DESCRIBE_QUORUM_VERSION = 1
DESCRIBE_CLUSTER_VERSION = 1
ENDPOINT_BROKERS, ENDPOINT_CONTROLLERS = 1, 2
REPLICATION_HEADERS = ("NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status")


def add_command(commands) -> None:
    p = commands.add_parser("metadata-quorum", help="describe the KRaft metadata quorum (kafka-metadata-quorum.sh)",
                            description="This tool describes kraft metadata quorum status.")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                   help="a host:port pair to use for establishing the connection to the Kafka cluster")
    add_command_config(p)
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    describe = verbs.add_parser("describe", help="Describe the metadata quorum info")
    describe.add_argument("--status", action="store_true", help="a short summary of the quorum status")
    describe.add_argument("--replication", action="store_true",
                          help="detailed information about the status of replication")
    describe.add_argument("--human-readable", action="store_true", help="human-readable output (with --replication)")
    describe.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.status and args.replication:
        raise ToolError("Only one of --status or --replication should be specified with describe sub-command")
    if not args.status and not args.replication:
        raise ToolError("One of --status or --replication must be specified with describe sub-command")
    if args.status and args.human_readable:
        raise ToolError("The option --human-readable is only supported along with --replication")
    cluster_id, quorum = describe(args.bootstrap_server, command_config(args))
    if args.status:
        print(format_status(cluster_id, quorum))
    else:
        print(format_replication(quorum, now_ms=int(time.time() * 1000) if args.human_readable else None), end="")
    return 0


def _address(server: str) -> tuple[str, int]:
    host, sep, port = server.rpartition(":")
    if not sep or not port.isdigit():
        raise ToolError(f"Invalid --bootstrap-server {server!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def _describe_cluster(bootstrap: str, security: ClientSecurity | None, endpoint_type: int = ENDPOINT_CONTROLLERS):
    """(server, DescribeCluster) from the first server of the comma-separated list that answers (as Kafka's tools
    take --bootstrap-server)."""
    failures = []
    for server in (s.strip() for s in bootstrap.split(",") if s.strip()):
        host, port = _address(server)
        try:
            with BrokerConnection(host, port, "metadata-quorum", timeout_s=15.0, security=security).connect() as conn:
                return (host, port), conn.send(ApiKey.DESCRIBE_CLUSTER, DESCRIBE_CLUSTER_VERSION,
                                               {"include_cluster_authorized_operations": False,
                                                "endpoint_type": endpoint_type})
        except OSError as exc:
            failures.append(f"{server} ({exc.strerror or exc})")
    raise ToolError(f"Cannot reach {', '.join(failures) or bootstrap}")


def describe(bootstrap: str, security: ClientSecurity | None = None) -> tuple[str, m.DescribeQuorumResponse]:
    """The cluster id, and the active controller's DescribeQuorum answer: asked of the active controller when the
    bootstrap server is a controller, or of the broker, which forwards it (KIP-590), when it is a broker."""
    server, cluster = _describe_cluster(bootstrap, security)
    if cluster.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE:  # a broker: it names no controllers
        target, what = server, f"broker at {server[0]}:{server[1]}"
        cluster = _describe_cluster(f"{server[0]}:{server[1]}", security, ENDPOINT_BROKERS)[1]
    elif cluster.error_code:
        raise ToolError(f"DescribeCluster failed with {ErrorCode(cluster.error_code).name}")
    else:
        endpoints = {b.broker_id: (b.host, b.port) for b in cluster.brokers}
        if cluster.controller_id < 0 or cluster.controller_id not in endpoints:
            raise ToolError("The metadata quorum has no leader yet: try again once an election is over")
        target, what = endpoints[cluster.controller_id], f"the active controller {cluster.controller_id}"
    try:
        with BrokerConnection(*target, "metadata-quorum", timeout_s=15.0, security=security).connect() as conn:
            if target == server and cluster.controller_id >= 0 and ApiKey.DESCRIBE_QUORUM not in {
                    k.api_key for k in conn.send(ApiKey.API_VERSIONS, 0, {}).api_keys}:
                raise ToolError(f"The {what} runs in ZooKeeper mode: there is no metadata quorum to describe (give "
                                f"--bootstrap-server a broker or controller of a KRaft cluster)")
            body = conn.send(ApiKey.DESCRIBE_QUORUM, DESCRIBE_QUORUM_VERSION,
                             wire.to_body(m.DescribeQuorumRequest(), DESCRIBE_QUORUM_VERSION))
    except OSError as exc:
        raise ToolError(f"Cannot reach {what}: {exc.strerror or exc}") from None
    quorum = wire.from_body(ApiKey.DESCRIBE_QUORUM, DESCRIBE_QUORUM_VERSION, False, body)
    if quorum.error_code:
        raise ToolError(f"DescribeQuorum failed with {ErrorCode(quorum.error_code).name} (the leader changed; "
                        f"try again)")
    return cluster.cluster_id, quorum


def _leader(quorum: m.DescribeQuorumResponse) -> m.ReplicaState:
    for voter in quorum.current_voters:
        if voter.replica_id == quorum.leader_id:
            return voter
    raise ToolError(f"The leader {quorum.leader_id} is not among the voters")


def format_status(cluster_id: str, quorum: m.DescribeQuorumResponse) -> str:
    leader = _leader(quorum)
    laggard = min(quorum.current_voters, key=lambda v: v.log_end_offset)  # the first of the lowest, as Kafka's min
    if laggard is leader:
        lag_time = 0
    elif leader.last_caught_up_timestamp >= 0 and laggard.last_caught_up_timestamp >= 0:
        lag_time = leader.last_caught_up_timestamp - laggard.last_caught_up_timestamp
    else:
        lag_time = -1
    rows = [("ClusterId:", cluster_id), ("LeaderId:", quorum.leader_id), ("LeaderEpoch:", quorum.leader_epoch),
            ("HighWatermark:", quorum.high_watermark),
            ("MaxFollowerLag:", leader.log_end_offset - laggard.log_end_offset),
            ("MaxFollowerLagTimeMs:", lag_time),
            ("CurrentVoters:", _ids(quorum.current_voters)), ("CurrentObservers:", _ids(quorum.observers))]
    return "\n".join(f"{label:<24}{value}" for label, value in rows)


def _ids(replicas: tuple[m.ReplicaState, ...]) -> str:
    return "[" + ",".join(str(r.replica_id) for r in replicas) + "]"


def format_replication(quorum: m.DescribeQuorumResponse, now_ms: int | None = None) -> str:
    """The table; `now_ms` given: timestamps as "N ms ago" (--human-readable)."""
    leader = _leader(quorum)

    def stamp(ms: int) -> str:
        if ms < 0:
            return "-1"
        return f"{max(0, now_ms - ms)} ms ago" if now_ms is not None else str(ms)

    groups = [([leader], "Leader"), ([v for v in quorum.current_voters if v is not leader], "Follower"),
              (list(quorum.observers), "Observer")]
    rows = [[str(r.replica_id), str(r.log_end_offset), str(leader.log_end_offset - r.log_end_offset),
             stamp(r.last_fetch_timestamp), stamp(r.last_caught_up_timestamp), status]
            for replicas, status in groups for r in replicas]
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(REPLICATION_HEADERS)]
    lines = ["".join(f"{cell:<{widths[i]}}\t" for i, cell in enumerate(row))
             for row in [list(REPLICATION_HEADERS), *rows]]
    return "".join(line + "\n" for line in lines)

"""`zkbroker preferred-replica-election`: Kafka 0.8.2's kafka-preferred-replica-election.sh
(kafka.admin.PreferredReplicaLeaderElectionCommand).

Writes `/admin/preferred_replica_election` (`{"version":1,"partitions":[{"topic":"foo","partition":0}]}`)
with the partitions of `--path-to-json-file` (`{"partitions":[{"topic":"foo","partition":1}]}`), or with every
partition when no file is given; the controller moves each partition's leadership to its preferred replica
(the head of its assigned replicas, if alive and in the ISR) and deletes the node. Prints, as 0.8.2:

    Successfully started preferred replica election for partitions Set([foo,0], [foo,1])

Partitions that do not exist are skipped with a message on stderr. An election still in progress (the node
exists) refuses a new one.
"""

from __future__ import annotations

import argparse
import sys

from kazoo.exceptions import NodeExistsError

from zkbroker import admin
from zkbroker.tools.common import ToolError, read_json_file, scala_set, skip_znode, topic_names, tp_string, zookeeper
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import ZnodeFormatError, decode_preferred_election, encode_preferred_election


def add_command(commands) -> None:
    p = commands.add_parser("preferred-replica-election",
                            help="move leadership back to the preferred replicas (kafka-preferred-replica-election.sh)",
                            description="This tool causes leadership for each partition to be transferred back to "
                                        "the 'preferred replica', it can be used to balance leadership among the "
                                        "servers.")
    p.add_argument("--zookeeper", metavar="URLS", help="REQUIRED: the ZooKeeper connection string host:port[/chroot]")
    p.add_argument("--path-to-json-file", metavar="FILE",
                   help='the partitions to elect for, as {"partitions": [{"topic": "foo", "partition": 1}]}; '
                        "defaults to all existing partitions")
    p.set_defaults(run=run)


def parse_election_data(data: object, source: str) -> set[tuple[str, int]]:
    """parsePreferredReplicaElectionData: the partitions listed, which must not repeat."""
    if not isinstance(data, dict) or "partitions" not in data:
        raise ToolError("Preferred replica election data is empty")
    entries = data["partitions"]
    if not isinstance(entries, list):
        raise ToolError(f"Invalid preferred replica election data in {source}: \"partitions\" must be a list")
    partitions = []
    for entry in entries:
        if (not isinstance(entry, dict) or not isinstance(entry.get("topic"), str)
                or not isinstance(entry.get("partition"), int) or isinstance(entry.get("partition"), bool)):
            raise ToolError(f"Invalid preferred replica election data in {source}: each partition needs a \"topic\" "
                            "string and a \"partition\" number")
        partitions.append((entry["topic"], entry["partition"]))
    duplicates = sorted({tp for tp in partitions if partitions.count(tp) > 1})
    if duplicates:
        raise ToolError("Preferred replica election data contains duplicate partitions: "
                        + ",".join(tp_string(*tp) for tp in duplicates))
    return set(partitions)


def run(args: argparse.Namespace) -> int:
    if not args.zookeeper:
        raise ToolError("Missing required argument \"[zookeeper]\"")
    requested = None
    if args.path_to_json_file:
        requested = parse_election_data(read_json_file(args.path_to_json_file), args.path_to_json_file)
    with zookeeper(args.zookeeper) as zk:
        partitions = requested if requested is not None else _all_partitions(zk)
        assignments = {topic: _assignment(zk, topic) for topic in {t for t, _ in partitions}}
        valid = [tp for tp in sorted(partitions) if _exists(assignments[tp[0]], *tp)]
        try:
            zk.kazoo.create(paths.PREFERRED_REPLICA_ELECTION, encode_preferred_election(valid), makepath=True)
        except NodeExistsError:
            data, _ = zk.get(paths.PREFERRED_REPLICA_ELECTION)
            try:
                current = scala_set(decode_preferred_election(data))
            except ZnodeFormatError:
                current = "an unreadable set of partitions"
            raise ToolError(f"Failed to start preferred replica election: Preferred replica leader election currently "
                            f"in progress for {current}. Aborting operation") from None
    print(f"Successfully started preferred replica election for partitions {scala_set(partitions)}")
    return 0


def _all_partitions(zk: ZkClient) -> set[tuple[str, int]]:
    """ZkUtils.getAllPartitions: the partitions that have a `partitions/<p>` node."""
    out = set()
    for topic in topic_names(zk):
        for child in zk.get_children(paths.partitions_path(topic)):
            if child.isdigit():
                out.add((topic, int(child)))
            else:
                skip_znode(f"{paths.partitions_path(topic)}/{child}", "not a partition id")
    return out


def _assignment(zk: ZkClient, topic: str) -> dict | None:
    try:
        return admin.read_assignment(zk, topic)
    except admin.AdminError:
        return None


def _exists(assignment: dict | None, topic: str, partition: int) -> bool:
    if assignment is None:
        print(f"Skipping preferred replica leader election for partition {tp_string(topic, partition)} since topic "
              f"{topic} doesn't exist", file=sys.stderr)
        return False
    if partition not in assignment:
        print(f"Skipping preferred replica leader election for partition {tp_string(topic, partition)} since it "
              "doesn't exist", file=sys.stderr)
        return False
    return True

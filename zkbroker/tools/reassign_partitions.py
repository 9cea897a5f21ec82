"""`zkbroker reassign-partitions`: Kafka 0.8.2's kafka-reassign-partitions.sh (kafka.admin.ReassignPartitionsCommand).

Three modes, with 0.8.2's JSON files:
- `--generate --topics-to-move-json-file F --broker-list "5,6"`: F is `{"topics":[{"topic":"foo"}],"version":1}`;
  prints the current assignment and a proposal spreading those topics over the listed brokers (0.8.2's
  replica assignment, so random);
- `--execute --reassignment-json-file F`: F is `{"version":1,"partitions":[{"topic":"foo","partition":0,
  "replicas":[5,6]}]}`; prints the current assignment (to roll back with) and writes
  `/admin/reassign_partitions`, which the controller carries out (controller/reassignment.py);
- `--verify --reassignment-json-file F`: per partition "completed successfully", "failed" or "is still in
  progress" (the code's wording; the 0.8.2 docs say "is in progress").
Partitions are printed sorted by topic and partition (0.8.2 printed them in hash order).

`--bootstrap-server B` instead goes through the Admin API, as Kafka 2.6's tool, and adds `--list` and `--cancel`
(reassign_partitions_admin.py).
"""

from __future__ import annotations

import argparse
import sys

from kazoo.exceptions import NodeExistsError

from zkbroker import admin
from zkbroker.tools.common import (
    ToolError,
    add_command_config,
    read_json_file,
    read_partitions,
    scala_set,
    tp_string,
    zookeeper,
)
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import PartitionReplicas, ZnodeFormatError, decode_reassignment, encode_reassignment

Moves = list[tuple[tuple[str, int], tuple[int, ...]]]


def add_command(commands) -> None:
    p = commands.add_parser("reassign-partitions", help="move partitions between brokers "
                            "(kafka-reassign-partitions.sh)",
                            description="This command moves topic partitions between replicas.")
    p.add_argument("--zookeeper", metavar="URLS", help="the ZooKeeper connection string host:port[/chroot]")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT",
                   help="the brokers to connect to, through the Admin API (instead of --zookeeper)")
    add_command_config(p)
    p.add_argument("--generate", action="store_true", help="generate a candidate partition reassignment "
                   "configuration (it does not execute it)")
    p.add_argument("--execute", action="store_true", help="kick off the reassignment of --reassignment-json-file")
    p.add_argument("--verify", action="store_true", help="verify whether the reassignment of "
                   "--reassignment-json-file completed")
    p.add_argument("--list", action="store_true", help="with --bootstrap-server: the reassignments in progress")
    p.add_argument("--cancel", action="store_true", help="with --bootstrap-server: cancel the reassignments of "
                   "--reassignment-json-file")
    p.add_argument("--additional", action="store_true", help="with --execute and --bootstrap-server: start it while "
                   "other reassignments are in progress")
    p.add_argument("--reassignment-json-file", metavar="FILE",
                   help='{"partitions": [{"topic": "foo", "partition": 1, "replicas": [1,2,3]}], "version": 1}')
    p.add_argument("--topics-to-move-json-file", metavar="FILE",
                   help='topics to move to --broker-list: {"topics": [{"topic": "foo"}], "version": 1}')
    p.add_argument("--broker-list", metavar="0,1,2", help="the brokers to move the topics of "
                   "--topics-to-move-json-file to")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    actions = [a for a in ("generate", "execute", "verify", "list", "cancel") if getattr(args, a)]
    if args.bootstrap_server:
        if args.zookeeper:
            raise ToolError("Only one of --bootstrap-server or --zookeeper must be specified")
        if len(actions) != 1:
            raise ToolError("Command must include exactly one action: --generate, --execute, --verify, --list or "
                            "--cancel")
        from zkbroker.tools import reassign_partitions_admin
        return reassign_partitions_admin.run(args, actions[0])
    if len(actions) != 1 or actions[0] in ("list", "cancel"):
        raise ToolError("Command must include exactly one action: --generate, --execute or --verify")
    if not args.zookeeper:
        raise ToolError("Missing required argument \"[zookeeper]\"")
    return {"generate": _generate, "execute": _execute, "verify": _verify}[actions[0]](args)


# ---- the JSON files --------------------------------------------------------------------------------------------

def parse_reassignment(data: object, source: str) -> Moves:
    """parsePartitionReassignmentDataWithoutDedup: (partition, replicas) in file order, repeats kept."""
    entries = data.get("partitions") if isinstance(data, dict) else None
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ToolError(f"Invalid reassignment data in {source}: \"partitions\" must be a list")
    moves = []
    for entry in entries:
        replicas = entry.get("replicas") if isinstance(entry, dict) else None
        if (not isinstance(entry, dict) or not isinstance(entry.get("topic"), str)
                or not _is_int(entry.get("partition")) or not isinstance(replicas, list)
                or not all(_is_int(r) and r >= 0 for r in replicas)):
            raise ToolError(f"Invalid reassignment data in {source}: each partition needs a \"topic\" string, a "
                            "\"partition\" number and a \"replicas\" list of broker ids")
        moves.append(((entry["topic"], entry["partition"]), tuple(replicas)))
    return moves


def parse_topics_to_move(data: object, source: str) -> list[str]:
    """ZkUtils.parseTopicsData."""
    entries = data.get("topics") if isinstance(data, dict) else None
    if entries is None:
        return []
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("topic"), str)
                                                for e in entries):
        raise ToolError(f"Invalid topics to move in {source}: \"topics\" must be a list of {{\"topic\": name}}")
    return [e["topic"] for e in entries]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _zk_data(assignment: dict[tuple[str, int], tuple[int, ...]]) -> str:
    """ZkUtils.getPartitionReassignmentZkData."""
    return encode_reassignment([PartitionReplicas(t, p, r) for (t, p), r in sorted(assignment.items())]).decode()


def _current_assignment(zk: ZkClient, topics) -> dict[tuple[str, int], tuple[int, ...]]:
    out = {}
    for topic in sorted(set(topics)):
        for partition, replicas in (read_partitions(zk, topic) or {}).items():
            out[(topic, partition)] = replicas
    return out


def _duplicates(items) -> list:
    items = list(items)
    return sorted({i for i in items if items.count(i) > 1})


# ---- the modes -------------------------------------------------------------------------------------------------

def generate_broker_list(args: argparse.Namespace) -> list[int]:
    """--generate's required options, checked, and its --broker-list (both forms of the tool)."""
    if not (args.topics_to_move_json_file and args.broker_list):
        raise ToolError("If --generate option is used, command must include both --topics-to-move-json-file and "
                        "--broker-list options")
    try:
        return [int(b) for b in args.broker_list.split(",")]
    except ValueError:
        raise ToolError(f"Invalid --broker-list \"{args.broker_list}\": it must be broker ids separated by commas") \
            from None


def _generate(args: argparse.Namespace) -> int:
    brokers = generate_broker_list(args)
    if _duplicates(brokers):
        raise ToolError("Broker list contains duplicate entries: " + ",".join(map(str, _duplicates(brokers))))
    topics = parse_topics_to_move(read_json_file(args.topics_to_move_json_file), args.topics_to_move_json_file)
    if _duplicates(topics):
        raise ToolError("List of topics to reassign contains duplicate entries: " + ",".join(_duplicates(topics)))
    with zookeeper(args.zookeeper) as zk:
        current = _current_assignment(zk, topics)
    proposed = {}
    for topic in sorted({t for t, _ in current}):
        partitions = {p: r for (t, p), r in current.items() if t == topic}
        assignment = admin.assign_replicas_to_brokers(brokers, len(partitions), len(partitions[min(partitions)]))
        proposed.update({(topic, p): r for p, r in assignment.items()})
    print(f"Current partition replica assignment\n\n{_zk_data(current)}")
    print(f"Proposed partition reassignment configuration\n\n{_zk_data(proposed)}")
    return 0


def _execute(args: argparse.Namespace) -> int:
    if not args.reassignment_json_file:
        raise ToolError("If --execute option is used, command must include --reassignment-json-file that was output "
                        "during the --generate option")
    source = args.reassignment_json_file
    moves = parse_reassignment(read_json_file(source), source)
    if not moves:
        raise ToolError(f"Partition reassignment data file {source} is empty")
    repeated = _duplicates(tp for tp, _ in moves)
    if repeated:
        raise ToolError("Partition reassignment contains duplicate topic partitions: "
                        + ",".join(tp_string(*tp) for tp in repeated))
    repeated_replicas = [(tp, _duplicates(r)) for tp, r in moves if _duplicates(r)]
    if repeated_replicas:
        raise ToolError("Partition replica lists may not contain duplicate entries: " + ". ".join(
            f"{tp_string(*tp)} contains multiple entries for {','.join(map(str, d))}" for tp, d in repeated_replicas))
    empty = [tp for tp, r in moves if not r]
    if empty:
        raise ToolError(f"The replica list of partition {tp_string(*empty[0])} is empty")
    requested = dict(moves)
    with zookeeper(args.zookeeper) as zk:
        current = _current_assignment(zk, {t for t, _ in requested})
        print(f"Current partition replica assignment\n\n{_zk_data(current)}\n\n"
              "Save this to use as the --reassignment-json-file option during rollback")
        valid = {tp: r for tp, r in requested.items() if _exists(zk, current, *tp)}
        try:
            zk.kazoo.create(paths.REASSIGN_PARTITIONS, _zk_data(valid).encode(), makepath=True)
        except NodeExistsError:
            data, _ = zk.get(paths.REASSIGN_PARTITIONS)
            try:
                in_progress = scala_set((m.topic, m.partition) for m in decode_reassignment(data))
            except ZnodeFormatError:
                in_progress = "an unreadable set of partitions"
            raise ToolError(f"Partition reassignment currently in progress for {in_progress}. Aborting operation") \
                from None
    print(f"Successfully started reassignment of partitions {_zk_data(requested)}")
    return 0


def _exists(zk: ZkClient, current: dict, topic: str, partition: int) -> bool:
    if (topic, partition) in current:
        return True
    if not admin.topic_exists(zk, topic):
        print(f"Skipping reassignment of partition {tp_string(topic, partition)} since topic {topic} doesn't exist",
              file=sys.stderr)
    else:
        print(f"Skipping reassignment of partition {tp_string(topic, partition)} since it doesn't exist",
              file=sys.stderr)
    return False


def _verify(args: argparse.Namespace) -> int:
    if not args.reassignment_json_file:
        raise ToolError("If --verify option is used, command must include --reassignment-json-file that was used "
                        "during the --execute option")
    source = args.reassignment_json_file
    requested = dict(parse_reassignment(read_json_file(source), source))
    print("Status of partition reassignment:")
    with zookeeper(args.zookeeper) as zk:
        data, _ = zk.get(paths.REASSIGN_PARTITIONS)
        try:
            in_progress = {(m.topic, m.partition) for m in decode_reassignment(data)} if data else set()
        except ZnodeFormatError:
            in_progress = set()
        current = _current_assignment(zk, {t for t, _ in requested})
    statuses = {}
    for tp, replicas in sorted(requested.items()):
        if tp in in_progress:
            statuses[tp] = "is still in progress"
        elif current.get(tp) == replicas:
            statuses[tp] = "completed successfully"
        else:
            print(f"ERROR: Assigned replicas ({','.join(map(str, current.get(tp, ())))}) don't match the list of "
                  f"replicas for reassignment ({','.join(map(str, replicas))}) for partition {tp_string(*tp)}")
            statuses[tp] = "failed"
    for tp, status in statuses.items():
        print(f"Reassignment of partition {tp_string(*tp)} {status}")
    return 0

"""`zkbroker reassign-partitions --bootstrap-server`: Kafka 2.6+'s kafka-reassign-partitions.sh through the Admin
API (KIP-455: AlterPartitionReassignments, ListPartitionReassignments), beside the `--zookeeper` form that writes
`/admin/reassign_partitions` (reassign_partitions.py, 0.8.2's). The JSON files are the same; the reassignment
JSON printed carries Kafka 2.x's `log_dirs` (`"any"` for each replica: zkbroker moves no replica between log
directories). Output, as Kafka:

    Current partition replica assignment                                         (--execute)

    {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}

    Save this to use as the --reassignment-json-file option during rollback
    Successfully started partition reassignment for t-0

    Status of partition reassignment:                                            (--verify)
    Reassignment of partition t-0 is still in progress.
    Reassignment of partition t-1 is complete.

    Current partition reassignments:                                             (--list)
    t-0: replicas: 1,2,3. adding: 3. removing: 1.

    Successfully cancelled partition reassignment for t-0                        (--cancel)

--verify ends, once every partition is done, with the lines in which Kafka clears the replication throttles
(zkbroker has none to clear).
"""

from __future__ import annotations

import argparse
import json

from zkbroker import admin
from zkbroker.client.admin_client import AdminClient, AdminError
from zkbroker.protocol.errors import ErrorCode
from zkbroker.tools.common import ToolError, command_config, java_exception, read_json_file

Moves = dict[tuple[str, int], tuple[int, ...]]


def run(args: argparse.Namespace, action: str) -> int:
    try:
        with AdminClient(args.bootstrap_server, client_id="zkbroker-reassign-partitions",
                         security=command_config(args)) as client:
            return _ACTIONS[action](client, args)
    except AdminError as e:
        raise ToolError(str(e)) from None
    except (OSError, ConnectionError) as e:
        raise ToolError(f"Cannot reach the cluster at {args.bootstrap_server}: {e}") from None


def reassignment_json(assignment: Moves) -> str:
    """Kafka 2.6's formatAsReassignmentJson: the partitions in order, each replica's log dir "any"."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def _names(partitions) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(partitions))


def _plural(partitions) -> str:
    return "" if len(partitions) == 1 else "s"


def _current(client: AdminClient, topics) -> Moves:
    cluster = client.metadata(sorted(set(topics)))
    return {(t, p): tuple(info.replicas) for t, parts in cluster.topics.items() for p, info in parts.items()}


def _moves(args: argparse.Namespace, what: str) -> Moves:
    from zkbroker.tools.reassign_partitions import parse_reassignment

    if not args.reassignment_json_file:
        raise ToolError(f"Missing required argument \"[reassignment-json-file]\" for --{what}")
    moves = parse_reassignment(read_json_file(args.reassignment_json_file), args.reassignment_json_file)
    if not moves:
        raise ToolError("Partition reassignment list cannot be empty.")
    seen = [tp for tp, _ in moves]
    repeated = sorted({tp for tp in seen if seen.count(tp) > 1})
    if repeated:
        raise ToolError("Cannot reassign the same partition more than once: " + _names(repeated))
    return dict(moves)


def _execute(client: AdminClient, args: argparse.Namespace) -> int:
    moves = _moves(args, "execute")
    current = _current(client, {t for t, _ in moves})
    missing = sorted(tp for tp in moves if tp not in current)
    if missing:
        raise ToolError("Unable to find partition: " + _names(missing))
    in_progress = client.list_partition_reassignments()
    if in_progress and not args.additional:
        raise ToolError("Cannot execute because there is an existing partition assignment.  Use --additional to "
                        "override this and create a new partition assignment in addition to the existing one.")
    print(f"Current partition replica assignment\n\n{reassignment_json({tp: current[tp] for tp in moves})}\n\n"
          "Save this to use as the --reassignment-json-file option during rollback")
    results = client.alter_partition_reassignments(moves)
    failed = {tp: r for tp, r in results.items() if r[0] != ErrorCode.NONE}
    if failed:
        raise ToolError("Error reassigning partition(s):\n" + "\n".join(
            f"{t}-{p}: {java_exception(*r)}" for (t, p), r in sorted(failed.items())))
    print(f"Successfully started partition reassignment{_plural(moves)} for {_names(moves)}")
    return 0


def _verify(client: AdminClient, args: argparse.Namespace) -> int:
    moves = _moves(args, "verify")
    in_progress = client.list_partition_reassignments(list(moves))
    current = _current(client, {t for t, _ in moves})
    print("Status of partition reassignment:")
    done = True
    for tp, target in sorted(moves.items()):
        name = f"{tp[0]}-{tp[1]}"
        if tp in in_progress:
            done = False
            print(f"Reassignment of partition {name} is still in progress.")
        elif tp not in current:
            print(f"Error verifying partition reassignment for {name}: the partition does not exist.")
        elif current[tp] == target:
            print(f"Reassignment of partition {name} is complete.")
        else:
            print(f"There is no active reassignment of partition {name}, but replica set is "
                  f"{','.join(map(str, current[tp]))} rather than {','.join(map(str, target))}.")
    if done:
        brokers = sorted(client.metadata([]).brokers)
        topics = sorted({t for t, _ in moves})
        print(f"\nClearing broker-level throttles on brokers {','.join(map(str, brokers))}")
        print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}")
    return 0


def _list(client: AdminClient, args: argparse.Namespace) -> int:
    listed = client.list_partition_reassignments()
    if not listed:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for (topic, partition), (replicas, adding, removing) in sorted(listed.items()):
        print(f"{topic}-{partition}: replicas: {','.join(map(str, replicas))}. adding: {','.join(map(str, adding))}. "
              f"removing: {','.join(map(str, removing))}.")
    return 0


def _cancel(client: AdminClient, args: argparse.Namespace) -> int:
    moves = _moves(args, "cancel")
    results = client.alter_partition_reassignments(dict.fromkeys(moves))
    cancelled = [tp for tp, (code, _) in results.items() if code == ErrorCode.NONE]
    failed = {tp: r for tp, r in results.items() if r[0] != ErrorCode.NONE}
    if cancelled:
        print(f"Successfully cancelled partition reassignment{_plural(cancelled)} for {_names(cancelled)}")
    if failed:
        raise ToolError("Error cancelling partition reassignment(s):\n" + "\n".join(
            f"{t}-{p}: {java_exception(*r)}" for (t, p), r in sorted(failed.items())))
    return 0


def _generate(client: AdminClient, args: argparse.Namespace) -> int:
    from zkbroker.tools.reassign_partitions import generate_broker_list, parse_topics_to_move

    brokers = generate_broker_list(args)
    topics = parse_topics_to_move(read_json_file(args.topics_to_move_json_file), args.topics_to_move_json_file)
    known = set(client.metadata([]).brokers)
    unknown = [b for b in brokers if b not in known]
    if unknown:
        raise ToolError("The following brokers are not alive: " + ",".join(map(str, unknown)))
    current = _current(client, topics)
    proposed: Moves = {}
    for topic in sorted({t for t, _ in current}):
        partitions = {p: r for (t, p), r in current.items() if t == topic}
        assignment = admin.assign_replicas_to_brokers(brokers, len(partitions), len(partitions[min(partitions)]))
        proposed.update({(topic, p): r for p, r in assignment.items()})
    print(f"Current partition replica assignment\n{reassignment_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{reassignment_json(proposed)}")
    return 0


_ACTIONS = {"generate": _generate, "execute": _execute, "verify": _verify, "list": _list, "cancel": _cancel}

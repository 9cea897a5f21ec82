"""`zkbroker topics`: Kafka 0.8.2's kafka-topics.sh (kafka.admin.TopicCommand), with its flags and its output.

Exactly one action: --create, --alter, --delete, --list or --describe. `--topic` is a regular expression
(0.8.2's Whitelist: commas mean "or", the whole name must match) except with --create. Output, as 0.8.2:

    Created topic "foo".
    Updated config for topic "foo".
    WARNING: If partitions are increased for a topic that has a key, ... / Adding partitions succeeded!
    Topic foo is marked for deletion. / Note: This will have no impact if delete.topic.enable is not set to true.
    foo - marked for deletion                      (--list)
    Topic:foo<TAB>PartitionCount:3<TAB>ReplicationFactor:2<TAB>Configs:a=b
    <TAB>Topic: foo<TAB>Partition: 0<TAB>Leader: 1<TAB>Replicas: 1,2<TAB>Isr: 1,2     (--describe)

With `--bootstrap-server` instead of `--zookeeper`, Kafka 2.x's tool through the Admin API: tools/topics_admin.py.

Where 0.8.2 printed an error on stdout and exited 0 (refused alterations, a --topic that matches nothing for
--alter, --delete or --describe), zkbroker prints one sentence on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import re
import sys

from kazoo.exceptions import NoNodeError

from zkbroker import admin
from zkbroker.config import TOPIC_CONFIGS, validate_topic_config
from zkbroker.tools.common import (
    ToolError,
    add_command_config,
    integer,
    read_partitions,
    skip_znode,
    topic_filter,
    topic_names,
    zookeeper,
)
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import LeaderIsrState, ZnodeFormatError

ACTIONS = ("create", "alter", "delete", "list", "describe")
PARTITIONS_WARNING = ("WARNING: If partitions are increased for a topic that has a key, the partition logic or "
                      "ordering of the messages will be affected")
DELETE_NOTE = "Note: This will have no impact if delete.topic.enable is not set to true."


def add_command(commands) -> None:
    p = commands.add_parser("topics", help="create, alter, delete, list or describe topics (kafka-topics.sh)",
                            description="Create, delete, describe, or change a topic.")
    p.add_argument("--zookeeper", metavar="URLS", help="the ZooKeeper connection string host:port[/chroot]")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT",
                   help="the brokers to connect to, through the Admin API (Kafka 2.x); instead of --zookeeper")
    add_command_config(p)
    p.add_argument("--exclude-internal", action="store_true",
                   help="with --bootstrap-server, leave internal topics out of --list and --describe")
    for action, text in (("create", "Create a new topic."), ("alter", "Alter the configuration for the topic."),
                         ("delete", "Delete a topic"), ("list", "List all available topics."),
                         ("describe", "List details for the given topics.")):
        p.add_argument(f"--{action}", action="store_true", help=text)
    p.add_argument("--topic", help="the topic to create, alter or describe; a regular expression except with --create")
    p.add_argument("--partitions", metavar="N", help="partitions of the topic being created or altered")
    p.add_argument("--replication-factor", metavar="N", help="replication factor of the topic being created")
    p.add_argument("--replica-assignment", metavar="B1:B2,B1:B2",
                   help="manual partition-to-broker assignment for the topic being created or altered")
    p.add_argument("--config", action="append", metavar="NAME=VALUE", help="a topic configuration override")
    p.add_argument("--delete-config", action="append", metavar="NAME", help="a topic override to remove")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="with --describe, only show under replicated partitions")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="with --describe, only show partitions whose leader is not available")
    p.add_argument("--topics-with-overrides", action="store_true",
                   help="with --describe, only show topics that have overridden configs")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    action = _check_args(args)
    if args.bootstrap_server:
        from zkbroker.tools import topics_admin

        return topics_admin.run(args, action, _configs_to_add(args), _configs_to_delete(args))
    return {"create": _create, "alter": _alter, "delete": _delete, "list": _list, "describe": _describe}[action](args)


# ---- arguments (TopicCommandOptions.checkArgs) -------------------------------------------------------------------

_OPTION_ACTIONS = {
    "config": ("create", "alter"), "delete_config": ("alter",), "partitions": ("create", "alter"),
    "replication_factor": ("create",), "replica_assignment": ("create", "alter"),
    "under_replicated_partitions": ("describe",), "unavailable_partitions": ("describe",),
    "topics_with_overrides": ("describe",),
}
_REPORTS = ("under_replicated_partitions", "unavailable_partitions", "topics_with_overrides")


def _option(name: str) -> str:
    return f"\"[{name.replace('_', '-')}]\""


def _given(args: argparse.Namespace, name: str) -> bool:
    value = getattr(args, name)
    return value not in (None, False, [])


def _check_args(args: argparse.Namespace) -> str:
    actions = [a for a in ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        raise ToolError("Command must include exactly one action: --list, --describe, --create, --alter or --delete")
    action = actions[0]
    if args.zookeeper and args.bootstrap_server:
        raise ToolError("Only one of --bootstrap-server or --zookeeper must be specified")
    if not args.zookeeper and not args.bootstrap_server:
        raise ToolError(f"Missing required argument {_option('zookeeper')}")
    if args.exclude_internal and not args.bootstrap_server:
        raise ToolError(f"Option {_option('exclude_internal')} can't be used without {_option('bootstrap_server')}")
    if action not in ("list", "describe") and not args.topic:
        raise ToolError(f"Missing required argument {_option('topic')}")
    for name, allowed in _OPTION_ACTIONS.items():
        if _given(args, name) and action not in allowed:
            raise ToolError(f"Option {_option(name)} can't be used with option {_option(action)}")
    if action == "create" and args.replica_assignment:
        for name in ("partitions", "replication_factor"):
            if _given(args, name):
                raise ToolError(f"Option {_option('replica_assignment')} can't be used with option {_option(name)}")
    reports = [r for r in _REPORTS if _given(args, r)]
    if len(reports) > 1:
        raise ToolError(f"Option {_option(reports[0])} can't be used with option {_option(reports[1])}")
    return action


def _configs_to_add(args: argparse.Namespace) -> dict[str, str]:
    """parseTopicConfigsToBeAdded: each `name=value`, validated as a topic override."""
    out = {}
    for entry in args.config or ():
        pair = re.split(r"\s*=\s*", entry)
        if len(pair) != 2:
            raise ToolError('Invalid topic config: all configs to be added must be in the format "key=val".')
        out[pair[0].strip()] = pair[1].strip()
    validate_topic_config(out)
    return out


def _configs_to_delete(args: argparse.Namespace) -> list[str]:
    names = [name.strip() for name in args.delete_config or ()]
    for name in names:
        if name not in TOPIC_CONFIGS:
            raise ToolError(f"Unknown configuration \"{name}\".")
    return names


def _matching(zk: ZkClient, pattern: str | None) -> list[str]:
    """getTopics: every topic, sorted, filtered by --topic when given."""
    topics = topic_names(zk)
    if pattern is None:
        return topics
    allowed = topic_filter(pattern)
    return [t for t in topics if allowed(t)]


# ---- the actions ------------------------------------------------------------------------------------------------

def _create(args: argparse.Namespace) -> int:
    topic = args.topic
    configs = _configs_to_add(args)
    admin.validate_topic_name(topic)
    if args.replica_assignment:
        assignment = admin.parse_replica_assignment(args.replica_assignment)
        with zookeeper(args.zookeeper) as zk:
            admin.write_topic(zk, topic, assignment, configs)
    else:
        partitions = integer(args, "partitions")
        replication_factor = integer(args, "replication_factor")
        for name, value in (("partitions", partitions), ("replication_factor", replication_factor)):
            if value is None:
                raise ToolError(f"Missing required argument {_option(name)}")
        with zookeeper(args.zookeeper) as zk:
            admin.create_topic(zk, topic, partitions, replication_factor, configs)
    print(f"Created topic \"{topic}\".")
    return 0


def _alter(args: argparse.Namespace) -> int:
    added, deleted = _configs_to_add(args), _configs_to_delete(args)
    partitions = integer(args, "partitions")
    with zookeeper(args.zookeeper) as zk:
        topics = _matching(zk, args.topic)
        if not topics:
            raise ToolError(f"Topic {args.topic} does not exist")
        for topic in topics:
            configs = admin.fetch_topic_config(zk, topic)
            if args.config or args.delete_config:
                configs.update(added)
                for name in deleted:
                    configs.pop(name, None)
                admin.change_topic_config(zk, topic, configs)
                print(f"Updated config for topic \"{topic}\".")
            if partitions is not None:
                if topic == admin.OFFSETS_TOPIC:
                    raise ToolError("The number of partitions for the offsets topic cannot be changed.")
                print(PARTITIONS_WARNING)
                sys.stdout.flush()
                admin.add_partitions(zk, topic, partitions, args.replica_assignment)
                print("Adding partitions succeeded!")
    return 0


def _list(args: argparse.Namespace) -> int:
    with zookeeper(args.zookeeper) as zk:
        topics = _matching(zk, args.topic)
        marked = set(zk.get_children(paths.DELETE_TOPICS))
    for topic in topics:
        print(f"{topic} - marked for deletion" if topic in marked else topic)
    return 0


def _delete(args: argparse.Namespace) -> int:
    with zookeeper(args.zookeeper) as zk:
        topics = _matching(zk, args.topic)
        if not topics:
            raise ToolError(f"Topic {args.topic} does not exist")
        for topic in topics:
            if admin.mark_topic_for_deletion(zk, topic):
                print(f"Topic {topic} is marked for deletion.")
                print(DELETE_NOTE)
            else:
                print(f"Topic {topic} is already marked for deletion.")
    return 0


def _describe(args: argparse.Namespace) -> int:
    under, unavailable, with_overrides = (args.under_replicated_partitions, args.unavailable_partitions,
                                          args.topics_with_overrides)
    describe_configs = not under and not unavailable
    describe_partitions = not with_overrides
    with zookeeper(args.zookeeper) as zk:
        topics = _matching(zk, args.topic)
        if args.topic is not None and not topics:
            raise ToolError(f"Topic {args.topic} doesn't exist!")
        live = set(admin.live_broker_ids(zk))
        for topic in topics:
            assignment = read_partitions(zk, topic)
            if assignment is None:
                if not admin.topic_exists(zk, topic):
                    print(f"Topic {topic} doesn't exist!")
                continue  # else unreadable: read_partitions said so
            if describe_configs:
                try:
                    configs = admin.fetch_topic_config(zk, topic)
                except admin.AdminError as e:
                    skip_znode(paths.topic_config_path(topic), str(e))
                    configs = {}
                if not with_overrides or configs:
                    replication_factor = len(assignment[min(assignment)]) if assignment else 0
                    print(f"Topic:{topic}\tPartitionCount:{len(assignment)}\tReplicationFactor:{replication_factor}"
                          f"\tConfigs:{','.join(f'{k}={v}' for k, v in configs.items())}")
            if not describe_partitions:
                continue
            states = _read_states(zk, topic, sorted(assignment))
            for partition, replicas in sorted(assignment.items()):
                leader, isr = states[partition]
                if ((not under and not unavailable)
                        or (under and len(isr) < len(replicas))
                        or (unavailable and (leader is None or leader not in live))):
                    print(f"\tTopic: {topic}\tPartition: {partition}\tLeader: {'none' if leader is None else leader}"
                          f"\tReplicas: {_ids(replicas)}\tIsr: {_ids(isr)}")
    return 0


def _read_states(zk: ZkClient, topic: str, partitions: list[int]) -> dict[int, tuple[int | None, tuple[int, ...]]]:
    """Every partition's (leader, ISR) from its `state` znode, read in one pipelined round; (None, ()) when the
    node is missing or unreadable (0.8.2's getLeaderForPartition / getInSyncReplicasForPartition)."""
    pending = {p: zk.kazoo.get_async(paths.partition_state_path(topic, p)) for p in partitions}
    out = {}
    for partition, result in pending.items():
        out[partition] = (None, ())
        try:
            data, _ = result.get()
            state = LeaderIsrState.decode(data)
            out[partition] = (state.leader, state.isr)
        except NoNodeError:
            pass
        except ZnodeFormatError as e:
            skip_znode(paths.partition_state_path(topic, partition), str(e))
    return out


def _ids(ids) -> str:
    return ",".join(map(str, ids))

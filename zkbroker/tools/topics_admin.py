"""`zkbroker topics --bootstrap-server`: Kafka 2.x's kafka-topics.sh through the Admin API (TopicCommand's
AdminClientTopicService), with its output:

    Created topic foo.                                                        (--create)
    foo                                                                       (--list: one name a line)
    Topic: foo<TAB>PartitionCount: 3<TAB>ReplicationFactor: 2<TAB>Configs: segment.bytes=1024
    <TAB>Topic: foo<TAB>Partition: 0<TAB>Leader: 1<TAB>Replicas: 1,2<TAB>Isr: 1,2      (--describe)

--alter and --delete print nothing when they succeed, as Kafka 2.x. `Configs:` lists the entries whose source is
not the default (the topic's overrides and the broker's own settings), as Kafka 2.x does; topic ids (Kafka 2.8)
are not shown, as zkbroker keeps none. A refusal ends in the broker's message on stderr and exit status 1.
"""

from __future__ import annotations

import argparse

from zkbroker import admin
from zkbroker.client.admin_client import TOPIC, AdminClient, AdminError
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.schemas import describe_configs as dc
from zkbroker.tools.common import ToolError, command_config, integer, topic_filter


def run(args: argparse.Namespace, action: str, configs: dict[str, str], deleted: list[str]) -> int:
    try:
        with AdminClient(args.bootstrap_server, client_id="zkbroker-topics", security=command_config(args)) as client:
            return _ACTIONS[action](client, args, configs, deleted)
    except AdminError as e:
        raise ToolError(str(e)) from None
    except ConnectionError as e:
        raise ToolError(f"Cannot reach the cluster at {args.bootstrap_server}: {e}") from None


def _check(results: dict, what: str) -> None:
    for name, result in results.items():
        code, message = result if isinstance(result, tuple) else (result, None)
        if code != ErrorCode.NONE:
            raise AdminError(code, message or f"{what} {name}: {ErrorCode(code).name}")


def _matching(client: AdminClient, pattern: str | None, exclude_internal: bool) -> list[str]:
    cluster = client.metadata()
    names = sorted(set(cluster.topics) | set(cluster.topic_errors))
    if exclude_internal:
        names = [n for n in names if n not in client.internal]
    if pattern is None:
        return names
    allowed = topic_filter(pattern)
    return [n for n in names if allowed(n)]


def _create(client: AdminClient, args: argparse.Namespace, configs: dict[str, str], deleted: list[str]) -> int:
    topic = {"name": args.topic, "configs": configs}
    if args.replica_assignment:
        try:
            topic["assignments"] = admin.parse_replica_assignment(args.replica_assignment)
        except admin.AdminError as e:
            raise ToolError(str(e)) from None
    else:
        topic["num_partitions"] = _or_default(integer(args, "partitions"))
        topic["replication_factor"] = _or_default(integer(args, "replication_factor"))
    _check(client.create_topics([topic]), "Topic")
    print(f"Created topic {args.topic}.")
    return 0


def _or_default(value: int | None) -> int:
    return -1 if value is None else value  # -1: the broker's num.partitions / default.replication.factor (KIP-464)


def _alter(client: AdminClient, args: argparse.Namespace, configs: dict[str, str], deleted: list[str]) -> int:
    topics = _matching(client, args.topic, False)
    if not topics:
        raise ToolError(f"Topic '{args.topic}' does not exist as expected")
    partitions = integer(args, "partitions")
    for topic in topics:
        if configs or deleted:
            ops = {**dict.fromkeys(configs, 0), **dict.fromkeys(deleted, 1)}  # SET, DELETE
            client.alter_configs(TOPIC, topic, configs, incremental_ops=ops)
        if partitions is not None:
            assignments = None
            if args.replica_assignment:
                existing = len(client.cluster.topics.get(topic, {}))
                try:
                    parsed = admin.parse_replica_assignment(args.replica_assignment)
                except admin.AdminError as e:
                    raise ToolError(str(e)) from None
                assignments = {topic: [parsed[p] for p in sorted(parsed) if p >= existing] or list(parsed.values())}
            _check(client.create_partitions({topic: partitions}, assignments), "Topic")
    return 0


def _delete(client: AdminClient, args: argparse.Namespace, configs: dict[str, str], deleted: list[str]) -> int:
    topics = _matching(client, args.topic, True)
    if not topics:
        raise ToolError(f"Topic '{args.topic}' does not exist as expected")
    _check(client.delete_topics(topics), "Topic")
    return 0


def _list(client: AdminClient, args: argparse.Namespace, configs: dict[str, str], deleted: list[str]) -> int:
    for topic in _matching(client, args.topic, args.exclude_internal):
        print(topic)
    return 0


def _describe(client: AdminClient, args: argparse.Namespace, configs: dict[str, str], deleted: list[str]) -> int:
    topics = _matching(client, args.topic, args.exclude_internal)
    if args.topic is not None and not topics:
        raise ToolError(f"Topic '{args.topic}' does not exist as expected")
    cluster = client.cluster
    live = set(cluster.brokers)
    for topic in topics:
        partitions = cluster.topics.get(topic, {})
        overrides = [f"{e.name}={e.value}" for e in client.describe_configs(TOPIC, topic, synonyms=False)
                     if e.config_source != dc.SOURCE_DEFAULT_CONFIG]
        if args.topics_with_overrides and not any(
                e.config_source == dc.SOURCE_TOPIC_CONFIG for e in client.describe_configs(TOPIC, topic, False)):
            continue
        if not args.under_replicated_partitions and not args.unavailable_partitions:
            replication = len(partitions[min(partitions)].replicas) if partitions else 0
            print(f"Topic: {topic}\tPartitionCount: {len(partitions)}\tReplicationFactor: {replication}"
                  f"\tConfigs: {','.join(overrides)}")
        if args.topics_with_overrides:
            continue
        for p, info in sorted(partitions.items()):
            leader = info.leader if info.leader in live else None
            if args.under_replicated_partitions and len(info.isr) >= len(info.replicas):
                continue
            if args.unavailable_partitions and leader is not None:
                continue
            print(f"\tTopic: {topic}\tPartition: {p}\tLeader: {'none' if leader is None else leader}"
                  f"\tReplicas: {','.join(map(str, info.replicas))}\tIsr: {','.join(map(str, info.isr))}")
    return 0


_ACTIONS = {"create": _create, "alter": _alter, "delete": _delete, "list": _list, "describe": _describe}

"""`zkbroker transactions`: Kafka 3.0's kafka-transactions.sh (KIP-664, DESIGN §18).

    zkbroker transactions --bootstrap-server B list
    zkbroker transactions --bootstrap-server B describe --transactional-id T
    zkbroker transactions --bootstrap-server B describe-producers --topic T --partition P [--broker-id ID]
    zkbroker transactions --bootstrap-server B find-hanging (--broker-id ID | --topic T [--partition P])
                          [--max-transaction-timeout MINUTES]
    zkbroker transactions --bootstrap-server B abort --topic T --partition P --start-offset O

`list` asks every broker for the transactional ids it coordinates (ListTransactions); `describe` asks the id's
coordinator (FindCoordinator key type 1, DescribeTransactions); `describe-producers` asks the partition's leader,
or the broker named, for its producer state (DescribeProducers). `find-hanging` looks, in the partitions the
broker (or topic) has, for transactions open longer than the largest transaction timeout whose coordinator no
longer counts the partition in them -- KAFKA-12671's hanging transaction, which holds the LSO and every
read_committed reader. `abort` ends such a transaction: the ABORT marker of the producer whose transaction starts
at the offset, sent to the partition's leader with WriteTxnMarkers, as Kafka's admin client's abortTransaction
does. Each table is Kafka's: its columns, each padded to its widest cell and followed by a tab.
"""

from __future__ import annotations

import argparse
import time

from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode, for_code
from zkbroker.tools.common import ToolError, add_command_config, command_config
from zkbroker.tools.consumer_groups import Cluster

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions")
PRODUCER_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                    "CurrentTransactionStartOffset")
HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)")


def add_command(commands) -> None:
    p = commands.add_parser("transactions", help="list, describe and abort transactions (kafka-transactions.sh)",
                            description="This tool is used to analyze the transactional state of producers in the "
                                        "cluster. It can be used to detect and recover from hanging transactions.")
    p.add_argument("--bootstrap-server", required=True, metavar="host:port",
                   help="hostname and port for the broker to connect to, in the form `host:port` (multiple "
                        "comma-separated entries can be given)")
    add_command_config(p)
    p.add_argument("--timeout", type=int, default=10000, metavar="MS", help="Socket timeout in ms (default 10000).")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub.add_parser("list", help="list transactions")
    describe = sub.add_parser("describe", help="describe the state of an active transactional-id")
    describe.add_argument("--transactional-id", required=True, help="transactional id")
    producers = sub.add_parser("describe-producers", help="describe the states of active producers for a topic "
                                                          "partition")
    producers.add_argument("--broker-id", type=int, help="optional broker id to describe the producer state on a "
                                                         "specific replica")
    producers.add_argument("--topic", required=True, help="topic name")
    producers.add_argument("--partition", type=int, required=True, help="partition number")
    hanging = sub.add_parser("find-hanging", help="find hanging transactions")
    hanging.add_argument("--broker-id", type=int, help="broker id to search for hanging transactions")
    hanging.add_argument("--max-transaction-timeout", type=int, default=15,
                         help="maximum transaction timeout in minutes to limit the scope of the search")
    hanging.add_argument("--topic", help="topic name to limit search to")
    hanging.add_argument("--partition", type=int, help="partition number")
    abort = sub.add_parser("abort", help="abort a hanging transaction (requires administrative privileges)")
    abort.add_argument("--topic", required=True, help="topic name")
    abort.add_argument("--partition", type=int, required=True, help="partition number")
    abort.add_argument("--start-offset", type=int, required=True, help="start offset of the transaction to abort")
    p.set_defaults(run=run)


def format_table(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """Kafka's prettyPrintTable: each cell padded to its column's widest cell (header included), then a tab."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    return ["".join(cell.ljust(width) + "\t" for cell, width in zip(row, widths, strict=True))
            for row in [headers, *rows]]


def _print_table(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    for line in format_table(headers, rows):
        print(line)


def run(args: argparse.Namespace) -> int:
    cluster = Cluster(args.bootstrap_server, args.timeout / 1000.0, client_id="transactions",
                      security=command_config(args))
    try:
        {"list": list_transactions, "describe": describe, "describe-producers": describe_producers,
         "find-hanging": find_hanging, "abort": abort}[args.command](cluster, args)
    finally:
        cluster.close()
    return 0


def _listings(cluster: Cluster, producer_ids: list[int] | None = None) -> list[tuple[int, object]]:
    found = []
    for broker_id in sorted(cluster.brokers):
        response = cluster.connection(broker_id).send(ApiKey.LIST_TRANSACTIONS, 0, {
            "state_filters": [], "producer_id_filters": producer_ids or []})
        if response.error_code != ErrorCode.NONE:
            raise ToolError(f"Failed to list transactions: {for_code(response.error_code)()}")
        found += [(broker_id, t) for t in response.transaction_states]
    return found


def list_transactions(cluster: Cluster, args: argparse.Namespace) -> None:
    _print_table(LIST_HEADERS, [(t.transactional_id, str(broker_id), str(t.producer_id), t.transaction_state)
                                for broker_id, t in _listings(cluster)])


def _describe(cluster: Cluster, transactional_id: str) -> tuple[int, object]:
    any_broker = cluster.connection(min(cluster.brokers))
    found = any_broker.send(ApiKey.FIND_COORDINATOR, 1, {"coordinator_key": transactional_id, "coordinator_type": 1})
    if found.error_code != ErrorCode.NONE or found.node_id not in cluster.brokers:
        raise ToolError(f"Failed to describe transaction state of transactional-id `{transactional_id}`: "
                        f"{for_code(found.error_code)()}")
    response = cluster.connection(found.node_id).send(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                                      {"transactional_ids": [transactional_id]})
    return found.node_id, response.transaction_states[0]


def describe(cluster: Cluster, args: argparse.Namespace) -> None:
    coordinator, state = _describe(cluster, args.transactional_id)
    if state.error_code != ErrorCode.NONE:
        raise ToolError(f"Failed to describe transaction state of transactional-id `{args.transactional_id}`: "
                        f"{for_code(state.error_code)()}")
    started = state.transaction_start_time_ms
    start, duration = ("None", "None") if started < 0 else (str(started), str(_now_ms() - started))
    partitions = ",".join(f"{t.topic}-{p}" for t in state.topics for p in t.partitions)
    _print_table(DESCRIBE_HEADERS, [(str(coordinator), args.transactional_id, str(state.producer_id),
                                     str(state.producer_epoch), state.transaction_state,
                                     str(state.transaction_timeout_ms), start, duration, partitions)])


def _producers(cluster: Cluster, topic: str, partitions: list[int], broker_id: int | None) -> dict[int, list]:
    """{partition: its active producers} from the leader of each (or from `broker_id`)."""
    by_broker: dict[int, list[int]] = {}
    for partition in partitions:
        target = broker_id if broker_id is not None else cluster.leaders.get((topic, partition), -1)
        if target not in cluster.brokers:
            raise ToolError(f"Failed to describe producers for partition {topic}-{partition} on "
                            f"{'broker ' + str(broker_id) if broker_id is not None else 'leader'}: no such broker")
        by_broker.setdefault(target, []).append(partition)
    found = {}
    for target, ids in by_broker.items():
        response = cluster.connection(target).send(ApiKey.DESCRIBE_PRODUCERS, 0, {
            "topics": [{"name": topic, "partition_indexes": ids}]})
        for p in response.topics[0].partitions:
            if p.error_code != ErrorCode.NONE:
                raise ToolError(f"Failed to describe producers for partition {topic}-{p.partition_index} on "
                                f"broker {target}: {for_code(p.error_code)()}")
            found[p.partition_index] = list(p.active_producers)
    return found


def describe_producers(cluster: Cluster, args: argparse.Namespace) -> None:
    producers = _producers(cluster, args.topic, [args.partition], args.broker_id)[args.partition]
    _print_table(PRODUCER_HEADERS, [
        (str(s.producer_id), str(s.producer_epoch), str(s.coordinator_epoch), str(s.last_sequence),
         str(s.last_timestamp), str(s.current_txn_start_offset) if s.current_txn_start_offset >= 0 else "None")
        for s in producers])


def find_hanging(cluster: Cluster, args: argparse.Namespace) -> None:
    if args.topic is None and args.broker_id is None:
        raise ToolError("The `find-hanging` command requires either --topic or --broker-id to limit the scope of "
                        "the search")
    if args.partition is not None and args.topic is None:
        raise ToolError("The --partition argument requires --topic to be provided")
    wanted = sorted(tp for tp, replicas in cluster.replicas.items()
                    if (args.topic is None or tp[0] == args.topic)
                    and (args.partition is None or tp[1] == args.partition)
                    and (args.broker_id is None or args.broker_id in replicas))
    now, max_timeout_ms = _now_ms(), args.max_transaction_timeout * 60_000
    candidates = []
    for topic in sorted({t for t, _ in wanted}):
        partitions = [p for t, p in wanted if t == topic]
        for partition, producers in sorted(_producers(cluster, topic, partitions, args.broker_id).items()):
            candidates += [(topic, partition, s) for s in producers
                           if s.current_txn_start_offset >= 0 and now - s.last_timestamp > max_timeout_ms]
    hanging = []
    if candidates:
        ids = {t.producer_id: t.transactional_id for _, t in _listings(cluster, sorted({s.producer_id for *_, s in
                                                                                          candidates}))}
        for topic, partition, s in candidates:
            transactional_id = ids.get(s.producer_id)
            if transactional_id is not None:
                _, state = _describe(cluster, transactional_id)
                if state.error_code == ErrorCode.NONE and any(
                        t.topic == topic and partition in t.partitions for t in state.topics):
                    continue  # its coordinator will still write the marker
            hanging.append((topic, partition, s))
    _print_table(HANGING_HEADERS, [
        (topic, str(partition), str(s.producer_id), str(s.producer_epoch), str(s.coordinator_epoch),
         str(s.current_txn_start_offset), str(s.last_timestamp), str((now - s.last_timestamp) // 60_000))
        for topic, partition, s in hanging])


def abort(cluster: Cluster, args: argparse.Namespace) -> None:
    tp = f"{args.topic}-{args.partition}"
    producers = _producers(cluster, args.topic, [args.partition], None)[args.partition]
    found = next((s for s in producers if s.current_txn_start_offset == args.start_offset), None)
    if found is None:
        raise ToolError(f"Could not find any open transactions starting at offset {args.start_offset} on partition "
                        f"{tp}")
    leader = cluster.leaders[(args.topic, args.partition)]
    marker = {"producer_id": found.producer_id, "producer_epoch": found.producer_epoch, "transaction_result": False,
              "coordinator_epoch": max(found.coordinator_epoch, 0),
              "topics": [{"name": args.topic, "partition_indexes": [args.partition]}]}
    response = cluster.connection(leader).send(ApiKey.WRITE_TXN_MARKERS, 0, {"markers": [marker]})
    error = response.markers[0].topics[0].partitions[0].error_code
    if error != ErrorCode.NONE:
        raise ToolError(f"Failed to abort transaction of producer {found.producer_id} on partition {tp}: "
                        f"{for_code(error)()}")


def _now_ms() -> int:
    return int(time.time() * 1000)

"""One member of a coordinator group, as its own process, with an unmodified real client:

    python -m tests.integration.group_member --client confluent-kafka|kafka-python --bootstrap B --group G
        (--topic T ... | --pattern RE) [--assignor range|roundrobin] [--session-timeout-ms N]
        [--max-poll-interval-ms N] [--stall-after N]

It subscribes, polls, and prints one JSON object a line (flushed): `{"event": "assigned", "partitions":
[[topic, p], ...]}` after each rebalance, `{"event": "record", "topic", "partition", "offset", "value"}` for each
record, and `{"event": "committed", ...}` after each synchronous commit of what it read. With --stall-after N it
stops polling after N records (but stays alive), as a consumer stuck in processing would. SIGTERM closes it
cleanly (LeaveGroup). Tests read the lines; the process never exits by itself, so tests bound it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time


def emit(**fields) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def run_confluent(args: argparse.Namespace, stop: list) -> None:
    from confluent_kafka import Consumer

    assignor = {"range": "range", "roundrobin": "roundrobin"}[args.assignor]
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": args.name,
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "partition.assignment.strategy": assignor,
        "session.timeout.ms": args.session_timeout_ms, "heartbeat.interval.ms": min(1000, args.session_timeout_ms // 3),
        "max.poll.interval.ms": args.max_poll_interval_ms, "topic.metadata.refresh.interval.ms": 1000,
        "fetch.wait.max.ms": 100, "socket.timeout.ms": 10000})

    def on_assign(c, partitions):
        emit(event="assigned", partitions=sorted([p.topic, p.partition] for p in partitions))

    def on_revoke(c, partitions):
        emit(event="revoked", partitions=sorted([p.topic, p.partition] for p in partitions))

    topics = [f"^{args.pattern}"] if args.pattern else args.topic
    consumer.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke)
    read = 0
    try:
        while not stop:
            if args.stall_after is not None and read >= args.stall_after:
                emit(event="stalled")
                while not stop:
                    time.sleep(0.1)
                break
            messages = consumer.consume(num_messages=500, timeout=0.2)
            good = [m for m in messages if m.error() is None]
            for m in messages:
                if m.error() is not None:
                    emit(event="error", error=str(m.error()))
            for m in good:
                emit(event="record", topic=m.topic(), partition=m.partition(), offset=m.offset(),
                     value=(m.value() or b"").decode())
            read += len(good)
            if good:
                try:
                    committed = consumer.commit(asynchronous=False)
                    emit(event="committed", offsets=sorted([p.topic, p.partition, p.offset] for p in committed))
                except Exception as e:  # a rebalance took the partitions away meanwhile
                    emit(event="commit_failed", error=str(e))
    finally:
        consumer.close()
        emit(event="closed")


def run_kafka_python(args: argparse.Namespace, stop: list) -> None:
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[args.assignor]
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.name, enable_auto_commit=False,
        auto_offset_reset="earliest", partition_assignment_strategy=[assignor],
        session_timeout_ms=args.session_timeout_ms, heartbeat_interval_ms=min(1000, args.session_timeout_ms // 3),
        max_poll_interval_ms=args.session_timeout_ms, metadata_max_age_ms=1000, fetch_max_wait_ms=100)

    class Listener(ConsumerRebalanceListener):
        def on_partitions_assigned(self, assigned):
            emit(event="assigned", partitions=sorted([tp.topic, tp.partition] for tp in assigned))

        def on_partitions_revoked(self, revoked):
            emit(event="revoked", partitions=sorted([tp.topic, tp.partition] for tp in revoked))

    if args.pattern:
        consumer.subscribe(pattern=f"^{args.pattern}", listener=Listener())
    else:
        consumer.subscribe(args.topic, listener=Listener())
    read = 0
    try:
        while not stop:
            if args.stall_after is not None and read >= args.stall_after:
                emit(event="stalled")
                while not stop:
                    time.sleep(0.1)
                break
            batches = consumer.poll(timeout_ms=200, max_records=500)
            count = 0
            for records in batches.values():
                for r in records:
                    emit(event="record", topic=r.topic, partition=r.partition, offset=r.offset,
                         value=(r.value or b"").decode())
                    count += 1
            read += count
            if count:
                try:
                    consumer.commit()
                    emit(event="committed")
                except Exception as e:
                    emit(event="commit_failed", error=str(e))
    finally:
        consumer.close(autocommit=False)
        emit(event="closed")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", required=True, choices=["confluent-kafka", "kafka-python"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--name", default="member")
    parser.add_argument("--topic", action="append", default=[])
    parser.add_argument("--pattern")
    parser.add_argument("--assignor", default="range", choices=["range", "roundrobin"])
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--max-poll-interval-ms", type=int, default=300000)
    parser.add_argument("--stall-after", type=int)
    args = parser.parse_args()
    if os.environ.get("GROUP_MEMBER_DEBUG"):  # the client's own logs on stderr, to see a rebalance from inside
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    stop: list = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    emit(event="started")
    (run_confluent if args.client == "confluent-kafka" else run_kafka_python)(args, stop)


if __name__ == "__main__":
    main()

"""Kafka's transactions system test (tests/kafkatest/tests/core/transactions_test.py), with confluent-kafka.

Copiers, one per input partition, each as Kafka's TransactionalMessageCopier: a process that reads its input
partition read_committed and writes each record to the same partition number of the output topic and the
input position to its group (send_offsets_to_transaction) in one transaction; at start it resumes from the
group's committed offset, and it stops when that offset reaches the end the input had at its start. A copier
hard-killed in the middle of a transaction is replaced by one with the same transactional id, whose
init_transactions fences the dead one and aborts what it left open.

`run` seeds the input, starts the copiers and a concurrent read_committed reader of the output, hard-kills and
restarts brokers one at a time, then copiers one at a time, and reads the output at the end; `verify` says what
went wrong (a record missing, copied twice, or out of input order). Used by the suite (20,000 records) and by
bench/transactions.py (100,000).

Run one copier: python -m zkbroker.lab.txn_copier --bootstrap B --group G --transactional-id T
                --input-topic in --input-partition P --output-topic out [--transaction-size N] [--pause-ms MS]
                [--librdkafka-debug CONTEXTS]
It prints one line per committed transaction ("committed <position>") and exits 0 when done. With
--librdkafka-debug (e.g. "eos") its producer logs librdkafka's debug lines of those contexts to stderr: what a copier
that dies of a fatal transaction error needs to be explained.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

TIMEOUT_S = 60


# ---- one copier (the process) ---------------------------------------------------------------------------------

def _retried(call: Callable[[], object], attempts: int = 5) -> None:
    """librdkafka's contract for send_offsets_to_transaction and commit_transaction: a retriable error means the
    same call again (the transaction may already be committing: aborting it then is refused). After `attempts`
    the error goes to the caller, which aborts the transaction and starts it over."""
    from confluent_kafka import KafkaException

    for attempt in range(1, attempts + 1):
        try:
            call()
            return
        except KafkaException as e:
            if attempt == attempts or not e.args[0].retriable():
                raise
            time.sleep(0.1 * attempt)


def copy(bootstrap: str, group: str, transactional_id: str, input_topic: str, input_partition: int,
         output_topic: str, transaction_size: int, pause_s: float, out=sys.stdout,
         librdkafka_debug: str | None = None) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "socket.timeout.ms": 15000})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 20000, "message.timeout.ms": 20000, "socket.timeout.ms": 15000,
                         **({"debug": librdkafka_debug} if librdkafka_debug else {})})
    tp = TopicPartition(input_topic, input_partition)

    def committed() -> int:
        deadline = time.monotonic() + TIMEOUT_S
        while True:  # as Kafka's consumer does, through a coordinator moving (NOT_COORDINATOR) and the like
            try:
                return max(consumer.committed([tp], timeout=TIMEOUT_S)[0].offset, 0)
            except KafkaException as e:
                if not e.args[0].retriable() and e.args[0].code() != KafkaError.NOT_COORDINATOR \
                        or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    try:
        producer.init_transactions(TIMEOUT_S)  # fences a previous copier of this id, aborting its transaction
        end = consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S)[1]
        position = committed()
        consumer.assign([TopicPartition(input_topic, input_partition, position)])
        while position < end:
            messages = []
            deadline = time.monotonic() + 2
            while len(messages) < transaction_size and position + len(messages) < end \
                    and time.monotonic() < deadline:
                batch = consumer.consume(transaction_size - len(messages), timeout=0.5)
                messages += [m for m in batch if m.error() is None]
            if not messages:
                continue
            try:
                producer.begin_transaction()
                for m in messages:
                    producer.produce(output_topic, key=m.key(), value=m.value(), partition=input_partition)
                after = messages[-1].offset() + 1
                offsets = [TopicPartition(input_topic, input_partition, after)]
                _retried(functools.partial(producer.send_offsets_to_transaction, offsets,
                                           consumer.consumer_group_metadata(), TIMEOUT_S))
                _retried(lambda: producer.commit_transaction(TIMEOUT_S))
                position = after
                print(f"committed {position}", file=out, flush=True)
            except KafkaException as e:
                error = e.args[0]
                if not error.txn_requires_abort() and not error.retriable():
                    raise
                producer.abort_transaction(TIMEOUT_S)
                position = committed()
                consumer.seek(TopicPartition(input_topic, input_partition, position))
            if pause_s:
                time.sleep(pause_s)
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Kafka's TransactionalMessageCopier, with confluent-kafka")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--input-topic", required=True)
    parser.add_argument("--input-partition", type=int, required=True)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--transaction-size", type=int, default=200)
    parser.add_argument("--pause-ms", type=int, default=0, help="a pause after each transaction (pacing)")
    parser.add_argument("--librdkafka-debug", metavar="CONTEXTS", help="librdkafka debug contexts, e.g. eos")
    args = parser.parse_args(argv)
    copy(args.bootstrap, args.group, args.transactional_id, args.input_topic, args.input_partition,
         args.output_topic, args.transaction_size, args.pause_ms / 1000, librdkafka_debug=args.librdkafka_debug)
    return 0


class CopierProcess:
    """One copier as a child process, its lines in a file; `kill` is SIGKILL, `start` a fresh process of the
    same transactional id."""

    def __init__(self, workdir: Path, bootstrap: str, group: str, partition: int, input_topic: str,
                 output_topic: str, transaction_size: int, pause_ms: int, librdkafka_debug: str | None = None):
        self.partition = partition
        self.log = workdir / f"copier-{group}-{partition}.log"
        self.args = ["--bootstrap", bootstrap, "--group", group, "--transactional-id", f"{group}-{partition}",
                     "--input-topic", input_topic, "--input-partition", str(partition),
                     "--output-topic", output_topic, "--transaction-size", str(transaction_size),
                     "--pause-ms", str(pause_ms),
                     *(("--librdkafka-debug", librdkafka_debug) if librdkafka_debug else ())]
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "zkbroker.lab.txn_copier", *self.args],
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        self.starts += 1

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)

    def commits(self) -> int:
        # its own lines only: librdkafka's debug lines (--librdkafka-debug) say "committed" too
        return sum(1 for line in self.text().splitlines() if line.startswith("committed "))

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def finished(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def own_lines(self) -> list[str]:
        """Its own lines: librdkafka's debug lines (--librdkafka-debug) start with '%'."""
        return [line for line in self.text().splitlines() if not line.startswith("%")]

    def tail(self, lines: int = 6) -> str:
        """Its last own lines: what it was doing when a wait gave up."""
        own = self.own_lines()
        state = "not started" if self.proc is None else "running" if self.proc.poll() is None else "exited"
        return f"copier {self.partition} ({state}, {self.commits()} commits, {self.log}): " + " | ".join(own[-lines:])


# ---- reading the output ---------------------------------------------------------------------------------------

def read_partitions(bootstrap: str, topic: str, partitions: int, count: int, isolation: str = "read_committed",
                    timeout_s: float = TIMEOUT_S, stop: threading.Event | None = None) -> dict[int, list[bytes]]:
    """Each partition's values in offset order: `count` of them, and any more that arrive within a second after
    (a duplicate would)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "isolation.level": isolation, "socket.timeout.ms": 15000})
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout_s
        while sum(map(len, out.values())) < count and time.monotonic() < deadline \
                and not (stop is not None and stop.is_set()):
            for m in consumer.consume(1000, timeout=0.5):
                if m.error() is None:
                    out[m.partition()].append(m.value())
        for m in consumer.consume(1000, timeout=1.0):
            if m.error() is None:
                out[m.partition()].append(m.value())
        return out
    finally:
        consumer.close()


def verify(expected: dict[int, list[bytes]], seen: dict[int, list[bytes]], who: str) -> list[str]:
    """What is wrong with `seen` against the input: records missing, copied more than once, or a partition out
    of input order. Empty when every input record is there once, each partition in input order."""
    problems = []
    want = collections.Counter(v for values in expected.values() for v in values)
    got = collections.Counter(v for values in seen.values() for v in values)
    missing = want - got
    extra = got - want
    if missing:
        problems.append(f"{who}: {sum(missing.values())} input records missing (e.g. {sorted(missing)[:3]})")
    if extra:
        problems.append(f"{who}: {sum(extra.values())} records seen more than once or never written "
                        f"(e.g. {sorted(extra)[:3]})")
    for p, values in expected.items():
        if not missing and not extra and seen.get(p, []) != values:
            problems.append(f"{who}: output partition {p} is not in input order")
    return problems


# ---- the whole test ---------------------------------------------------------------------------------------------

@dataclass
class Outcome:
    records: int
    seconds: float = 0.0
    broker_bounces: int = 0
    copier_bounces: int = 0
    commits: int = 0
    copier_starts: int = 0
    bounced_while_copying: int = 0  # bounces that began before every copier had finished
    fatal_errors: list[str] = field(default_factory=list)  # copiers that died of an error (restarted, as Kafka's
    # system test does not: each is a finding, the last line of its error)
    copier_logs: list[Path] = field(default_factory=list)  # the log of each copier that died of an error
    problems: list[str] = field(default_factory=list)


def run(workdir: Path, bootstrap: str, create_topic: Callable[[str, int], None],
        brokers: list[tuple[Callable[[], None], Callable[[], None]]], records: int, input_partitions: int = 2,
        output_partitions: int = 3, transaction_size: int = 200, pause_ms: int = 0, down_s: float = 2.0,
        up_s: float = 2.0, timeout_s: float = 300.0, topics: tuple[str, str] = ("in", "out"),
        librdkafka_debug: str | None = None) -> Outcome:
    """Kafka's transactions system test. `create_topic(name, partitions)` makes a topic of RF 3 and
    min.insync.replicas 2; `brokers` is one (kill, restart) pair per broker, restart returning once the broker
    is registered again. Brokers are bounced one at a time while the copiers run, then the copiers one at a
    time; the concurrent reader and the final read must see every input record once, in input order per
    partition (so wholly in order with one input partition). `topics` names the input and output topics;
    `librdkafka_debug` the copiers' librdkafka debug contexts (their logs, in `workdir`, then say why one died)."""
    from confluent_kafka import Producer

    outcome = Outcome(records)
    started = time.monotonic()
    source, sink = topics
    create_topic(source, input_partitions)
    create_topic(sink, output_partitions)
    writer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                       "queue.buffering.max.messages": 200_000})
    for i in range(records):
        while True:
            try:
                writer.produce(source, value=f"r{i:06d}".encode(), partition=i % input_partitions)
                break
            except BufferError:
                writer.poll(0.01)
    if writer.flush(TIMEOUT_S):
        raise RuntimeError("the seed records were not all written")
    expected = read_partitions(bootstrap, source, input_partitions, records, "read_uncommitted")
    if sum(map(len, expected.values())) != records:
        raise RuntimeError(f"read back {sum(map(len, expected.values()))} of {records} seed records")

    group = f"copier-{uuid.uuid4().hex[:6]}"
    copiers = [CopierProcess(workdir, bootstrap, group, p, source, sink, transaction_size, pause_ms, librdkafka_debug)
               for p in range(input_partitions)]
    stop = threading.Event()
    concurrent: dict[str, dict] = {}

    def read_concurrently() -> None:
        try:
            concurrent["seen"] = read_partitions(bootstrap, sink, output_partitions, records,
                                                 timeout_s=timeout_s, stop=stop)
        except BaseException as e:  # handed to the caller
            concurrent["error"] = {"error": repr(e)}

    reader = threading.Thread(target=read_concurrently, daemon=True)
    reader.start()
    deadline = started + timeout_s
    try:
        for copier in copiers:
            copier.start()
        _wait(lambda: all(c.commits() for c in copiers), deadline, "every copier's first transaction")
        for kill, restart in brokers:
            outcome.bounced_while_copying += not all(c.finished() for c in copiers)
            kill()
            time.sleep(down_s)
            restart()
            outcome.broker_bounces += 1
            time.sleep(up_s)  # the restarted broker catches up before the next is killed
        for copier in copiers:
            if copier.finished():
                continue
            outcome.bounced_while_copying += 1
            before = copier.commits()
            copier.kill()
            copier.start()
            outcome.copier_bounces += 1
            _wait(lambda c=copier, n=before: c.commits() > n or c.finished(), deadline, "the restarted copier")
        for copier in copiers:
            while True:
                _wait(copier.finished, deadline, f"copier {copier.partition} to finish")
                if copier.proc.returncode == 0:
                    break
                errors = [line for line in copier.own_lines() if "Exception" in line or "Error" in line]
                outcome.fatal_errors.append(f"copier {copier.partition}: {errors[-1] if errors else '?'}")
                if copier.log not in outcome.copier_logs:
                    outcome.copier_logs.append(copier.log)
                copier.start()  # a supervisor's restart: the new one fences the dead one's transaction
        reader.join(max(1.0, deadline - time.monotonic()))
        outcome.seconds = time.monotonic() - started
        outcome.commits = sum(c.commits() for c in copiers)
        outcome.copier_starts = sum(c.starts for c in copiers)
        if "seen" in concurrent:
            outcome.problems += verify(expected, concurrent["seen"], "the concurrent read_committed reader")
        else:
            outcome.problems.append(f"the concurrent reader did not finish: {concurrent.get('error')}")
        final = read_partitions(bootstrap, sink, output_partitions, records)
        outcome.problems += verify(expected, final, "the final read_committed read")
        return outcome
    except TimeoutError as e:  # a wait gave up: say what each copier was doing
        raise TimeoutError("; ".join([str(e), *(c.tail() for c in copiers)])) from None
    finally:
        stop.set()
        for copier in copiers:
            copier.kill()


def _wait(condition: Callable[[], object], deadline: float, what: str) -> None:
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())

"""A real Kafka producer (confluent-kafka, librdkafka) that records every attempt and every answer, as the
checker needs them (zkbroker/lab/checker.py's Attempt): when each record was sent, when it was acknowledged
and at which offset, or when and why the producer gave up on it.

Every value is unique within a run, so the checker can find a record by its bytes wherever it ended up. The
producer does not retry (`retries=0`): a retried request whose first answer was lost would store a record
twice, a duplicate the producer made rather than the cluster; the checker is after the cluster's anomalies.
A record whose partition has no leader waits in the producer until `message.timeout.ms` ends it.

With a transactional id (DESIGN §18) the values are one transaction of librdkafka's transactional producer
(idempotent, so with its own retries), committed or aborted as the step says: a value counts as acknowledged only
once its transaction committed, and the producer keeps a `Transaction` for the checker. A producer fenced by a
newer one of its id (a zombie) ends with its transaction failed; one told to "abandon" its transaction writes
its records and goes away without ending it, as a process that died would (the coordinator aborts it once
`transaction.timeout.ms` has passed). `ConsumerRead` is a `read` step: what a consumer
of one partition reads at an isolation level, through our simple consumer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from zkbroker.client.security import ClientSecurity
from zkbroker.lab.checker import Attempt, Read, Transaction
from zkbroker.topic_partition import TopicPartition

BOOTSTRAP_NODE = -1  # librdkafka's node id for an answer that came through a bootstrap connection
VIA_ATTEMPTS = 20  # new producers a `via` step makes at most until that broker answers its metadata request
_QUIET = logging.getLogger("zkbroker.lab.recorder.librdkafka")  # refused connections are expected in a lab
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def _now_ms() -> float:
    return round(time.time() * 1000, 1)


class RecordingProducer:
    """Sends `values` to one partition with the given acks, one every `interval_ms` (0: all at once), and keeps
    an Attempt per value. `run()` returns when every value is answered or `timeout_ms` after the last send
    (and a grace period for the answer), or when `cancelled` is set."""

    def __init__(self, bootstrap: str, topic: str, partition: int, values: list[bytes], acks: int | str = "all",
                 timeout_ms: int = 10000, interval_ms: int = 0, cancelled: threading.Event | None = None,
                 transactional_id: str | None = None, transaction: str | None = None, name: str = "",
                 transaction_timeout_ms: int | None = None, security: dict[str, str] | None = None,
                 via: int | None = None) -> None:
        self.name = name
        self.via = via  # the broker whose Metadata answer the producer goes by (a `via` step), or None
        self.transactional_id = transactional_id
        self.transaction = transaction  # "commit", "abort" or "abandon" with a transactional id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.outcome: str | None = None  # the transaction's: committed, aborted, or failed: ERROR
        self.topic = topic
        self.partition = partition
        self.values = values
        self.timeout_ms = timeout_ms
        self.interval_ms = interval_ms
        self.cancelled = cancelled or threading.Event()
        self.stop_sending = threading.Event()  # send no more, but wait for the answers of what was sent
        self.config = {"bootstrap.servers": bootstrap, "acks": str(acks), "message.timeout.ms": timeout_ms,
                       "linger.ms": 0, "retries": 0, "enable.idempotence": False,
                       "max.in.flight.requests.per.connection": 1, "topic.metadata.refresh.interval.ms": 1000,
                       "logger": _QUIET, **(security or {})}  # a secured lab's: LabClients.librdkafka()
        self._sent: dict[bytes, float] = {}
        self._answers: dict[bytes, Attempt] = {}
        self._answered = 0
        self._acks = 0 if str(acks) == "0" else (1 if str(acks) == "1" else -1)
        self._lock = threading.Lock()
        self.done = threading.Event()

    def _delivered(self, error, message) -> None:
        """librdkafka's delivery report: acknowledged (with its offset), or given up on with an error. With
        acks=0 nothing is acknowledged: the record was sent, and that is all the producer knows."""
        value = message.value()
        sent_at = self._sent[value]
        if error is None and self._acks == 0:
            attempt = Attempt(self.topic, self.partition, value, sent_at, acks=0)  # sent; acks=0 promises nothing
        elif error is None:
            attempt = Attempt(self.topic, self.partition, value, sent_at, acked_at=_now_ms(), offset=message.offset(),
                              acks=self._acks)
        else:
            attempt = Attempt(self.topic, self.partition, value, sent_at, failed_at=_now_ms(), error=error.name(),
                              acks=self._acks)
        with self._lock:
            self._answers[value] = attempt
            self._answered += 1

    def run(self) -> None:
        from confluent_kafka import Producer

        if self.transactional_id is not None:
            self._run_transaction()
            return
        producer = Producer(self.config) if self.via is None else self._producer_via()
        try:
            for value in self.values:
                if self.cancelled.is_set() or self.stop_sending.is_set():
                    break
                self._sent[value] = _now_ms()
                producer.produce(self.topic, value, partition=self.partition, on_delivery=self._delivered)
                producer.poll(0)
                if self.interval_ms:
                    self._poll_for(producer, self.interval_ms / 1000)
            deadline = time.monotonic() + self.timeout_ms / 1000 + 5
            while self._answered < len(self._sent) and time.monotonic() < deadline and not self.cancelled.is_set():
                producer.poll(0.05)
        finally:
            producer.purge()  # what is still queued is given up on, unanswered
            producer.poll(0)
            self.done.set()

    def _producer_via(self):
        """A producer that goes by what broker `via` says of the topic (its leader above all), stale or not: its
        bootstrap list names that broker alone, but librdkafka (2.10+) drops its bootstrap brokers once it has
        learned the cluster and may ask any broker it learned, so it asks for the topic's metadata before it
        sends and starts again until that broker was the one that answered; it never refreshes on a timer, so
        it keeps that answer unless a write fails."""
        from confluent_kafka import KafkaException, Producer

        config = {**self.config, "topic.metadata.refresh.interval.ms": -1}
        answered = []
        for _ in range(VIA_ATTEMPTS):
            producer = Producer(config)
            try:
                answer = producer.list_topics(self.topic, timeout=self.timeout_ms / 1000)
            except KafkaException as e:
                answered.append(str(e.args[0]))
                continue
            if answer.orig_broker_id in (self.via, BOOTSTRAP_NODE):  # the bootstrap list names `via` alone
                return producer
            answered.append(f"broker {answer.orig_broker_id}")
        raise RuntimeError(f"producer {self.name}: broker {self.via} did not answer its metadata request in "
                           f"{VIA_ATTEMPTS} tries (answered: {', '.join(answered)})")

    def _run_transaction(self) -> None:
        """The values as one transaction: delivered records wait for the commit to count as acknowledged."""
        from confluent_kafka import KafkaException, Producer

        config = {k: v for k, v in self.config.items()
                  if k not in ("acks", "retries", "enable.idempotence", "max.in.flight.requests.per.connection")}
        if self.transaction_timeout_ms is not None:
            config["transaction.timeout.ms"] = self.transaction_timeout_ms  # librdkafka wants no longer messages
            config["message.timeout.ms"] = min(config["message.timeout.ms"], self.transaction_timeout_ms)
        producer = Producer({**config, "transactional.id": self.transactional_id})
        delivered: dict[bytes, int] = {}
        timeout_s = self.timeout_ms / 1000

        def report(error, message) -> None:
            if error is None:
                delivered[message.value()] = message.offset()

        try:
            producer.init_transactions(timeout_s)
            producer.begin_transaction()
            for value in self.values:
                if self.cancelled.is_set():
                    break
                self._sent[value] = _now_ms()
                producer.produce(self.topic, value, partition=self.partition, on_delivery=report)
                producer.poll(0)
                if self.interval_ms:
                    self._poll_for(producer, self.interval_ms / 1000)
            producer.flush(timeout_s)
            if self.transaction == "abandon":  # no EndTxn: the producer is gone, its transaction left open
                self._end("abandoned", "ABANDONED", delivered)
            elif self.transaction == "commit" and not self.cancelled.is_set():
                producer.commit_transaction(timeout_s)
                self._end("committed", None, delivered)
            else:
                producer.abort_transaction(timeout_s)
                self._end("aborted", "ABORTED", delivered)
        except KafkaException as e:
            error = e.args[0]
            self._end(f"failed: {error.name()}", error.name(), delivered)
            if error.txn_requires_abort():
                try:
                    producer.abort_transaction(timeout_s)
                except KafkaException:
                    pass
        finally:
            producer.purge()
            producer.poll(0)
            self.done.set()

    def _end(self, outcome: str, error: str | None, delivered: dict[bytes, int]) -> None:
        now = _now_ms()
        with self._lock:
            self.outcome = outcome
            for value, sent_at in self._sent.items():
                if error is None:
                    self._answers[value] = Attempt(self.topic, self.partition, value, sent_at, acked_at=now,
                                                   offset=delivered.get(value), acks=-1)
                else:
                    self._answers[value] = Attempt(self.topic, self.partition, value, sent_at, failed_at=now,
                                                   error=error, acks=-1)
            self._answered = len(self._sent)

    def transaction_record(self) -> Transaction | None:
        """What the checker needs of a transactional step: its values and how the transaction ended."""
        if self.transactional_id is None:
            return None
        return Transaction(self.name, self.topic, self.partition, tuple(self._sent), self.outcome or "unfinished")

    def _poll_for(self, producer, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0 and not self.stop_sending.is_set():
            producer.poll(min(left, 0.05))

    def attempts(self) -> list[Attempt]:
        """Every value sent so far: answered, or (sent_at only) still unanswered."""
        with self._lock:
            answers = dict(self._answers)
        return [answers.get(value) or Attempt(self.topic, self.partition, value, sent_at, acks=self._acks)
                for value, sent_at in list(self._sent.items())]

    def acknowledged_since(self, ts_ms: float) -> bool:
        """Whether a write was acknowledged at or after `ts_ms` (epoch milliseconds)."""
        with self._lock:
            return any(a.acked_at is not None and a.acked_at >= ts_ms for a in self._answers.values())

    def acknowledged(self) -> int:
        return sum(1 for a in self.attempts() if a.acknowledged)

    def answered(self) -> bool:
        return self.done.is_set()


def background(producer: RecordingProducer, on_error: Callable[[BaseException], None]) -> threading.Thread:
    """Run the producer on a thread of its own (a scenario's `background = true` produce step)."""
    def run() -> None:
        try:
            producer.run()
        except BaseException as e:  # reported by the runner at the end of the run
            on_error(e)
            producer.done.set()
    thread = threading.Thread(target=run, name=f"produce-{producer.topic}-{producer.partition}", daemon=True)
    thread.start()
    return thread


class ConsumerRead:
    """A `read` step (DESIGN §18): what a consumer of one partition reads, from the log start to the end it sees
    (the last stable offset for read_committed, the high watermark otherwise), through the simple consumer. It
    runs within its step; `result()` is the checker's Read."""

    def __init__(self, name: str, bootstrap: str, topic: str, partition: int, isolation_level: str,
                 security: ClientSecurity | None = None) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.security = security  # a secured lab's: LabClients.security
        self.topic = topic
        self.partition = partition
        self.isolation_level = isolation_level
        self.start = self.end = 0
        self._rows: list[tuple[str, int, int, bytes | None]] = []
        self._error: str | None = None

    def run(self) -> None:
        from consumer.simple import READ_COMMITTED, READ_UNCOMMITTED, SimpleConsumer

        level = READ_COMMITTED if self.isolation_level == "read_committed" else READ_UNCOMMITTED
        try:
            with SimpleConsumer(self.bootstrap, client_id=f"lab-read-{self.name}",
                                security=self.security) as consumer:
                self.start = consumer.earliest_offset(self.topic, self.partition)
                self.end = consumer.latest_offset(self.topic, self.partition, level)
                self._rows = [(self.topic, self.partition, m.offset, m.value) for m in consumer.iter_messages(
                    self.topic, self.partition, self.start, self.end, isolation_level=level)]
        except Exception as e:  # the checker judges a failed read by nothing; the run reports why
            self._error = f"{type(e).__name__}: {e}"

    def running(self) -> bool:
        return False

    def kill(self, reason: str) -> None:
        """Nothing to stop: a read ends within its step."""

    def result(self) -> Read:
        return Read(self.name, {TopicPartition(self.topic, self.partition): (self.start, self.end)}, self._rows,
                    self._error, isolation_level=self.isolation_level)

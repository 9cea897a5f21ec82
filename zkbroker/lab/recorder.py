"""A real Kafka producer (confluent-kafka, librdkafka) that records every attempt and every answer, as the
checker needs them (zkbroker/lab/checker.py's Attempt): when each record was sent, when it was acknowledged
and at which offset, or when and why the producer gave up on it.

Every value is unique within a run, so the checker can find a record by its bytes wherever it ended up. The
producer does not retry (`retries=0`): a retried request whose first answer was lost would store a record
twice, a duplicate the producer made rather than the cluster; the checker is after the cluster's anomalies.
A record whose partition has no leader waits in the producer until `message.timeout.ms` ends it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from zkbroker.lab.checker import Attempt

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
                 timeout_ms: int = 10000, interval_ms: int = 0, cancelled: threading.Event | None = None) -> None:
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
                       "logger": _QUIET}
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

        producer = Producer(self.config)
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

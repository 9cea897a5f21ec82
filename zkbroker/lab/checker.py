"""The checker (DESIGN §10): what a run's history says about safety and availability, as pure logic.

Inputs are what the runner collects: every produce attempt with its acknowledgement (or error), each
partition's records as read from every replica's log, its high watermark and final leader, and the
timeline. Every record value is unique within a run (the producers number them), so a record is found by
its bytes wherever it ended up. The report names:

- acknowledged-but-lost records, each with the timeline event that lost it (a truncation covering its
  offset, or the election of a leader that never had it);
- duplicates (one value at several offsets of what a consumer reads);
- unacknowledged records that were stored anyway (no anomaly for acks=all; Jepsen counts them);
- replica divergence below the high watermark (two replicas holding different bytes at one offset);
- unavailability windows: gaps between acknowledgements on a partition, longer than a threshold, while
  writes to it were attempted; and partitions left with no leader or with writes never acknowledged;
- for a batch read (a Spark read of an offsets range, `Read`), judged against the final log: rows it returned
  that the log does not hold at their offset (read beyond the high watermark, or truncated after the read:
  the read diverges from the log), rows it returned twice, and acknowledged records the log holds inside
  the read's range that it did not return (lost to the reader);
- for a stream's sink (a streaming ingest into files, a `Read` with `sink` set) the same, over the offsets its
  committed batches cover: rows the sink holds that the log does not hold there, rows it holds twice (a batch
  written again after a kill), and acknowledged records of the log that the stream went past without writing.

- for transactions (DESIGN §18; Jepsen's Kafka workload terms), judged on the reads made at read_committed: an
  *aborted read* is a record of a transaction that did not commit (aborted, or failed: a fenced zombie's) among
  what such a reader returned; a *torn* transaction is a committed one the reader saw in part -- some of its
  records, not all.

The verdict is `ok` or the gravest anomaly: lost, aborted_read, torn, divergent, duplicated, stuck, unavailable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from zkbroker.lab.narration import clock
from zkbroker.topic_partition import TopicPartition


@dataclass(frozen=True)
class Attempt:
    """One record a producer tried to write: acked_at/offset set when acknowledged, failed_at/error when the
    producer gave up on it (neither: still unanswered when the run ended)."""

    topic: str
    partition: int
    value: bytes
    sent_at: float  # epoch ms
    acked_at: float | None = None
    offset: int | None = None
    failed_at: float | None = None
    error: str | None = None
    acks: int = -1  # acks=0 records are never answered, so they say nothing about availability


    @property
    def acknowledged(self) -> bool:
        return self.acked_at is not None


@dataclass(frozen=True)
class PartitionState:
    """One partition at the end of a run: each replica's log ({offset: value}), the HW and the leader
    (None when the partition has none)."""

    topic: str
    partition: int
    high_watermark: int
    leader: int | None
    replicas: Mapping[int, Mapping[int, bytes]]

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def readable(self) -> dict[int, bytes]:
        """What a consumer reads: the leader's log below the HW (nothing without a leader)."""
        log = self.replicas.get(self.leader, {}) if self.leader is not None else {}
        return {offset: value for offset, value in log.items() if offset < self.high_watermark}


@dataclass(frozen=True)
class Loss:
    topic: str
    partition: int
    offset: int
    value: bytes
    cause: str

    def as_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset, "cause": self.cause}


@dataclass(frozen=True)
class Duplicate:
    """One value at several offsets; `cause` says who stored it twice, from the produce_appended events, when
    they tell ("" when they do not)."""

    topic: str
    partition: int
    value: bytes
    offsets: tuple[int, ...]
    cause: str = ""


@dataclass(frozen=True)
class Divergence:
    topic: str
    partition: int
    offset: int
    values: Mapping[int, bytes | None]  # broker -> what its log holds at the offset


@dataclass(frozen=True)
class Window:
    """A time during which writes to a partition were attempted and none was acknowledged; `end` is None
    when the run ended before an acknowledgement came."""

    topic: str
    partition: int
    start: float
    end: float | None
    attempts: int

    def length_ms(self, run_end: float) -> float:
        return (self.end if self.end is not None else run_end) - self.start


@dataclass(frozen=True)
class Transaction:
    """A transactional produce step's records (one transaction on one partition) and how it ended: committed,
    aborted, failed: ERROR (a fenced zombie's), or unfinished."""

    name: str
    topic: str
    partition: int
    values: tuple[bytes, ...]
    outcome: str


@dataclass(frozen=True)
class TransactionAnomaly:
    """An aborted read (a reader at read_committed returned records of a transaction that did not commit) or a
    torn one (it returned a committed transaction in part)."""

    kind: str  # "aborted_read" or "torn"
    read: str
    transaction: str
    seen: int  # how many of the transaction's records the read returned
    total: int

    def describe(self) -> str:
        if self.kind == "aborted_read":
            return (f"{self.read} read {self.seen} record(s) of transaction {self.transaction}, which did not "
                    f"commit")
        return f"{self.read} read {self.seen} of the {self.total} records of committed transaction {self.transaction}"


@dataclass(frozen=True)
class Read:
    """What a batch reader returned: the offsets [start, end) it asked for, per partition, and its rows
    (topic, partition, offset, value). A read that failed returned nothing to judge (its error says why).
    With `sink`, what a stream's sink holds: the offsets its committed batches cover, and the rows they wrote."""

    name: str
    ranges: Mapping[TopicPartition, tuple[int, int]]
    rows: Sequence[tuple[str, int, int, bytes | None]]
    error: str | None = None
    sink: bool = False
    isolation_level: str = "read_uncommitted"  # a `read` step's; Spark's reads and sinks read uncommitted


@dataclass(frozen=True)
class ReadDivergence:
    """A row a read returned that the final log does not hold at its offset."""

    read: str
    topic: str
    partition: int
    offset: int
    value: bytes | None
    cause: str


@dataclass
class Report:
    acknowledged: int = 0
    losses: list[Loss] = field(default_factory=list)
    duplicates: list[Duplicate] = field(default_factory=list)
    unacknowledged_stored: list[Attempt] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    leaderless: list[TopicPartition] = field(default_factory=list)
    read_divergences: list[ReadDivergence] = field(default_factory=list)
    aborted_reads: list[TransactionAnomaly] = field(default_factory=list)
    torn: list[TransactionAnomaly] = field(default_factory=list)
    run_end: float = 0.0

    @property
    def unavailable_ms_max(self) -> float:
        return max((w.length_ms(self.run_end) for w in self.windows), default=0.0)

    def verdict(self, max_unavailable_ms: float | None = None) -> str:
        if self.losses:
            return "lost"
        if self.aborted_reads:
            return "aborted_read"
        if self.torn:
            return "torn"
        if self.divergences or self.read_divergences:
            return "divergent"
        if self.duplicates:
            return "duplicated"
        if self.leaderless or any(w.end is None for w in self.windows):
            return "stuck"
        if max_unavailable_ms is not None and self.unavailable_ms_max > max_unavailable_ms:
            return "unavailable"
        return "ok"

    def stuck_reasons(self) -> list[str]:
        """Why the checker calls a run stuck: partitions left without a leader, and writes never acknowledged
        again before the run ended."""
        return ([f"{tp.topic}-{tp.partition} has no leader at the end" for tp in self.leaderless]
                + [f"{w.topic}-{w.partition}: {w.attempts} writes from {clock(w.start)} never acknowledged"
                   for w in self.windows if w.end is None])

    def as_json(self, max_unavailable_ms: float | None = None) -> dict:
        """The per-run fields of `lab scenario run --json` that the checker decides (DESIGN §10)."""
        return {"verdict": self.verdict(max_unavailable_ms), "acknowledged": self.acknowledged,
                "lost": len(self.losses), "duplicated": len(self.duplicates),
                "divergent": len(self.divergences) + len(self.read_divergences),
                "unavailable_ms_max": round(self.unavailable_ms_max),
                "losses": [loss.as_json() for loss in self.losses]}


def check(attempts: Sequence[Attempt], partitions: Iterable[PartitionState], events: Sequence[dict] = (),
          gap_ms: float = 1000.0, reads: Sequence[Read] = (), transactions: Sequence[Transaction] = ()) -> Report:
    """Check one run. `gap_ms`: a pause between acknowledgements shorter than this is not unavailability.
    `reads`: batch reads made during the run, each judged against the final log (`check_read`), and those at
    read_committed against the run's `transactions` (`check_transactions`)."""
    states = {state.tp: state for state in partitions}
    run_end = max([a.sent_at for a in attempts] + [a.acked_at or a.failed_at or 0 for a in attempts]
                  + [e["ts"] for e in events], default=0.0)
    report = Report(acknowledged=sum(1 for a in attempts if a.acknowledged), run_end=run_end)
    by_partition: dict[TopicPartition, list[Attempt]] = {}
    for attempt in attempts:
        by_partition.setdefault(TopicPartition(attempt.topic, attempt.partition), []).append(attempt)

    for tp, state in sorted(states.items()):
        readable = state.readable()
        where: dict[bytes, list[int]] = {}
        for offset, value in sorted(readable.items()):
            where.setdefault(value, []).append(offset)
        report.duplicates += [Duplicate(tp.topic, tp.partition, value, tuple(offsets),
                                        _duplicate_cause(tp, offsets, events))
                              for value, offsets in where.items() if len(offsets) > 1]
        report.divergences += _divergences(state)
        if state.leader is None:
            report.leaderless.append(tp)
        for attempt in by_partition.get(tp, []):
            if attempt.acknowledged and attempt.value not in where and state.leader is not None:
                report.losses.append(Loss(tp.topic, tp.partition, attempt.offset if attempt.offset is not None
                                          else -1, attempt.value, _cause(attempt, state, events)))
            elif not attempt.acknowledged and attempt.value in where:
                report.unacknowledged_stored.append(attempt)
    for tp, tp_attempts in sorted(by_partition.items()):
        answered = [a for a in tp_attempts if a.acks != 0]
        if answered:
            report.windows += _windows(tp, answered, gap_ms)
    for read in reads:
        losses, duplicates, divergences = check_read(read, attempts, states.values(), events)
        report.losses += losses
        report.duplicates += duplicates
        report.read_divergences += divergences
    for anomaly in check_transactions(reads, transactions):
        (report.aborted_reads if anomaly.kind == "aborted_read" else report.torn).append(anomaly)
    return report


def check_transactions(reads: Sequence[Read], transactions: Sequence[Transaction]) -> list[TransactionAnomaly]:
    """What each read at read_committed returned of each transaction of its partitions: records of one that did
    not commit (aborted_read), or part of a committed one (torn)."""
    anomalies = []
    for read in reads:
        if read.error is not None or read.isolation_level != "read_committed":
            continue
        for txn in transactions:
            if TopicPartition(txn.topic, txn.partition) not in read.ranges or not txn.values:
                continue
            returned = {value for topic, partition, _, value in read.rows
                        if (topic, partition) == (txn.topic, txn.partition)}
            seen = sum(1 for value in txn.values if value in returned)
            if txn.outcome != "committed" and seen:
                anomalies.append(TransactionAnomaly("aborted_read", read.name, txn.name, seen, len(txn.values)))
            elif txn.outcome == "committed" and 0 < seen < len(txn.values):
                anomalies.append(TransactionAnomaly("torn", read.name, txn.name, seen, len(txn.values)))
    return anomalies


def check_read(read: Read, attempts: Sequence[Attempt], partitions: Iterable[PartitionState],
               events: Sequence[dict] = ()) -> tuple[list[Loss], list[Duplicate], list[ReadDivergence]]:
    """One batch read against the final log of the partitions it read: the acknowledged records the log holds
    inside the read's range that the read did not return, the rows it returned more than once, and the rows
    the log does not hold at their offset. A partition with no leader at the end has no log to judge by."""
    if read.error is not None:
        return [], [], []
    states = {state.tp: state for state in partitions}
    acked = {a.value: a for a in attempts if a.acknowledged}
    losses: list[Loss] = []
    duplicates: list[Duplicate] = []
    divergences: list[ReadDivergence] = []
    for tp, (start, end) in sorted(read.ranges.items()):
        rows = sorted((offset, value) for topic, partition, offset, value in read.rows
                      if (topic, partition) == (tp.topic, tp.partition))
        where: dict[bytes | None, list[int]] = {}
        for offset, value in rows:
            where.setdefault(value, []).append(offset)
        duplicates += [Duplicate(tp.topic, tp.partition, value, tuple(offsets))
                       for value, offsets in where.items() if len(offsets) > 1 and value is not None]
        state = states.get(tp)
        if state is None or state.leader is None:
            continue
        log = state.readable()
        name = f"{tp.topic}-{tp.partition} offset"
        held = f"in {read.name}'s sink as" if read.sink else f"read by {read.name} as"
        for offset, value in rows:
            if log.get(offset) == value:
                continue
            what = "acknowledged" if value in acked else "never acknowledged"
            if value in log.values():
                now = f"the log holds it at offset {min(o for o, v in log.items() if v == value)}"
            elif offset in log:
                now = f"the log now holds {_show(log[offset])} there"
            else:
                now = f"the log now ends at offset {max(log, default=-1) + 1}"
            truncated = _truncation(tp, offset, state, events)
            divergences.append(ReadDivergence(read.name, tp.topic, tp.partition, offset, value,
                                              f"{name} {offset} {held} {_show(value)} ({what}), but "
                                              f"{now}" + (f"; {truncated}" if truncated else "")))
        for offset, value in sorted(log.items()):
            if start <= offset < end and value in acked and value not in where:
                seen = next((v for o, v in rows if o == offset), None)
                if read.sink:
                    instead = f" (it holds {_show(seen)} there)" if seen is not None else ""
                    missing = f"inside the offsets {read.name}'s committed batches cover [{start}, {end}), but " \
                              f"not in its sink{instead}"
                else:
                    instead = f" (it returned {_show(seen)} there)" if seen is not None else ""
                    missing = f"inside {read.name}'s range [{start}, {end}), but not in what it read{instead}"
                losses.append(Loss(tp.topic, tp.partition, offset, value,
                                   f"{name} {offset} acknowledged and in the log, {missing}"))
    return losses, duplicates, divergences


def _show(value: bytes | None) -> str:
    return "null" if value is None else repr(value.decode("utf-8", "backslashreplace"))


def _truncation(tp: TopicPartition, offset: int, state: PartitionState, events: Sequence[dict]) -> str:
    """The last truncation of the partition that removed `offset` (the leader's first), in words, or ""."""
    truncations = [e for e in events if e.get("kind") == "truncated" and e.get("topic") == tp.topic
                   and e.get("partition") == tp.partition and e.get("to", 0) <= offset < e.get("from", offset + 1)]
    if not truncations:
        return ""
    on_leader = [e for e in truncations if e.get("source") == f"broker:{state.leader}"]
    event = (on_leader or truncations)[-1]
    broker = event["source"].partition(":")[2]
    return f"truncated on broker {broker} at {clock(event['ts'])}: {event.get('reason', 'truncation')}"


def _duplicate_cause(tp: TopicPartition, offsets: Sequence[int], events: Sequence[dict]) -> str:
    """Who stored one value at two offsets, in words: the produce request that wrote each offset last (a
    broker's produce_appended event; replication writes none, and what a truncation removed was written again
    by a later append) -- two requests mean the client sent the record again, one request that the brokers
    copied it. "" when no event covers one of the offsets."""
    appends = [e for e in events if e.get("kind") == "produce_appended" and e.get("topic") == tp.topic
               and e.get("partition") == tp.partition]
    writers = []
    for offset in offsets[:2]:
        covering = [e for e in appends if e.get("offset", 0) <= offset <= e.get("last_offset", -1)]
        if not covering:
            return ""
        writers.append(max(covering, key=lambda e: e["ts"]))

    def request(e: dict) -> tuple:
        return e.get("source"), e.get("connection"), e.get("correlation_id")

    def named(e: dict) -> str:
        broker = str(e.get("source", "")).partition(":")[2]
        return (f"request {e.get('correlation_id')} of client {e.get('client')!r} on broker {broker} at "
                f"{clock(e['ts'])}")

    first, second = writers
    if request(first) == request(second):
        return f"one produce request wrote it twice ({named(first)}): the brokers duplicated it"
    return (f"sent twice by the client: {named(first)} wrote offset {offsets[0]}, {named(second)} offset "
            f"{offsets[1]} (a producer without idempotence may send a set again when it cannot tell whether "
            f"the first attempt was written)")


def _divergences(state: PartitionState) -> list[Divergence]:
    """Offsets below the HW that every replica has written but not with the same bytes."""
    out = []
    logs = dict(state.replicas)
    below = set().union(*(set(log) for log in logs.values())) if logs else set()
    for offset in sorted(o for o in below if o < state.high_watermark):
        values = {broker: log.get(offset) for broker, log in sorted(logs.items())}
        present = {v for v in values.values() if v is not None}
        if len(present) > 1:
            out.append(Divergence(state.topic, state.partition, offset, values))
    return out


def _windows(tp: TopicPartition, attempts: list[Attempt], gap_ms: float) -> list[Window]:
    acks = sorted(a.acked_at for a in attempts if a.acked_at is not None)
    first_send = min(a.sent_at for a in attempts)
    windows = []
    # Between the first send (or an ack) and the next ack, was some write waiting longer than gap_ms?
    for start, end in zip([first_send, *acks], [*acks, None]):
        waiting = [a for a in attempts if a.sent_at >= start and (end is None or a.sent_at < end)
                   and (a.acked_at is None or end is None or a.acked_at >= end)]
        if not waiting:
            continue
        opened = min(a.sent_at for a in waiting)
        if end is None:
            if any(a.acked_at is None for a in waiting):
                windows.append(Window(tp.topic, tp.partition, opened, None, len(waiting)))
        elif end - opened > gap_ms:
            windows.append(Window(tp.topic, tp.partition, opened, end, len(waiting)))
    return windows


def _cause(attempt: Attempt, state: PartitionState, events: Sequence[dict]) -> str:
    """The timeline event that lost an acknowledged record, in words."""
    offset = attempt.offset
    name = f"{state.topic}-{state.partition} offset {offset}"
    later = [e for e in events if e["ts"] >= (attempt.acked_at or 0) and e.get("topic") == state.topic
             and e.get("partition") == state.partition]
    truncated = _truncation(state.tp, offset, state, later) if offset is not None else ""
    if truncated:
        return f"{name} {truncated}"
    elections = [e for e in later if e["kind"] == "leader_changed"
                 and attempt.value not in state.replicas.get(e.get("leader"), {}).values()]
    if elections:
        event = elections[0]
        return (f"{name} was never on broker {event['leader']}, elected leader at {clock(event['ts'])} "
                f"(leader epoch {event.get('leader_epoch')})")
    return f"{name}: no event in the timeline explains the loss"

"""Partition assignors of the 0.8.2 ZooKeeper consumer (kafka.consumer.PartitionAssignor): pure functions.

Each consumer of a group runs the assignor on its own view of the group and keeps only the part that names
its own threads; nothing coordinates the views (hence 0.8's herd and split-brain problems).

* ``range`` (the default): per topic, partitions in numeric order and the threads of every subscriber in
  *string* order -- so ``g_c-10`` sorts before ``g_c-2`` -- with ``n = P // T`` partitions each and one more
  for the first ``P % T`` threads.
* ``roundrobin`` (new in 0.8.2): every consumer must subscribe to the same topics with the same stream
  counts; all topic-partitions, sorted by the Java ``String.hashCode`` of ``"[topic,partition]"``, are dealt
  round-robin over the sorted threads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from zkbroker.topic_partition import TopicPartition  # re-exported: examples import it from here

__all__ = [
    "ASSIGNORS",
    "AssignmentContext",
    "ConsumerThreadId",
    "TopicPartition",
    "java_string_hash",
    "range_assign",
    "roundrobin_assign",
]


@dataclass(frozen=True)
class ConsumerThreadId:
    """A consumer stream, ``<consumer id>-<n>``; it is also what an owner znode holds. Ordered as strings."""

    consumer: str
    thread_id: int

    def __str__(self) -> str:
        return f"{self.consumer}-{self.thread_id}"

    def __lt__(self, other: ConsumerThreadId) -> bool:
        return str(self) < str(other)


@dataclass(frozen=True)
class AssignmentContext:
    """What one consumer reads from ZooKeeper before assigning (0.8.2's AssignmentContext).

    consumer_id: this consumer. my_topic_threads: its own threads per topic. partitions_for_topic: each of
    those topics' partition ids. consumers_for_topic: every subscriber thread per topic (its own included).
    """

    consumer_id: str
    my_topic_threads: Mapping[str, frozenset[ConsumerThreadId]]
    partitions_for_topic: Mapping[str, Sequence[int]]
    consumers_for_topic: Mapping[str, Sequence[ConsumerThreadId]]


def range_assign(ctx: AssignmentContext) -> dict[TopicPartition, ConsumerThreadId]:
    """This consumer's share under the range strategy: {partition: one of its threads}."""
    decision: dict[TopicPartition, ConsumerThreadId] = {}
    for topic, my_threads in ctx.my_topic_threads.items():
        threads = sorted(ctx.consumers_for_topic.get(topic, ()), key=str)
        partitions = sorted(ctx.partitions_for_topic.get(topic, ()))
        if not threads:
            continue
        per_thread, extra = divmod(len(partitions), len(threads))
        for thread in my_threads:
            position = threads.index(thread)
            start = per_thread * position + min(position, extra)
            count = per_thread + (1 if position < extra else 0)
            for partition in partitions[start : start + count]:
                decision[TopicPartition(topic, partition)] = thread
    return decision


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


class SubscriptionMismatch(ValueError):
    """roundrobin needs every consumer to subscribe to the same topics with the same stream counts."""


def roundrobin_assign(ctx: AssignmentContext) -> dict[TopicPartition, ConsumerThreadId]:
    """This consumer's share under the roundrobin strategy (0.8.2's RoundRobinAssignor)."""
    if not ctx.consumers_for_topic:
        return {}
    topics = list(ctx.consumers_for_topic)
    head = frozenset(ctx.consumers_for_topic[topics[0]])
    for topic in topics:
        threads = frozenset(ctx.consumers_for_topic[topic])
        if threads != head:
            raise SubscriptionMismatch(
                "Round-robin assignment is allowed only if all consumers in the group subscribe to the same "
                "topics, AND if the stream counts across topics are identical for a given consumer instance. "
                f"Topic {topic} has the following available consumer streams: {sorted(map(str, threads))}; "
                f"topic {topics[0]} has: {sorted(map(str, head))}")
    threads = sorted(head, key=str)
    all_partitions = [TopicPartition(topic, p) for topic, partitions in ctx.partitions_for_topic.items()
                      for p in partitions]
    # A stable sort by hash code, as Scala's sortWith: it spreads a topic's partitions over the threads.
    all_partitions.sort(key=lambda tp: java_string_hash(str(tp)))
    decision: dict[TopicPartition, ConsumerThreadId] = {}
    for i, tp in enumerate(all_partitions):
        thread = threads[i % len(threads)]
        if thread.consumer == ctx.consumer_id:
            decision[tp] = thread
    return decision


ASSIGNORS = {"range": range_assign, "roundrobin": roundrobin_assign}

"""The 0.8.2 assignors as pure functions: Kafka's documented examples, string order of thread ids, and that a
group's views, each keeping its own share, cover every partition exactly once."""

from __future__ import annotations

import random

import pytest

from consumer.assignors import (
    AssignmentContext,
    ConsumerThreadId,
    SubscriptionMismatch,
    TopicPartition,
    java_string_hash,
    range_assign,
    roundrobin_assign,
)


def group_assignment(assign, members: dict[str, dict[str, int]], partitions: dict[str, int]):
    """Run the assignor in every member's view (as each consumer does) and merge the shares."""
    threads = {c: {t: frozenset(ConsumerThreadId(c, i) for i in range(n)) for t, n in topics.items()}
               for c, topics in members.items()}
    consumers_for_topic: dict[str, list[ConsumerThreadId]] = {}
    for mine in threads.values():
        for topic, ids in mine.items():
            consumers_for_topic.setdefault(topic, []).extend(ids)
    merged: dict[TopicPartition, ConsumerThreadId] = {}
    for consumer, mine in threads.items():
        ctx = AssignmentContext(consumer, mine, {t: list(range(partitions[t])) for t in mine},
                                {t: sorted(ids, key=str) for t, ids in consumers_for_topic.items()})
        share = assign(ctx)
        assert not set(share) & set(merged), "two consumers claimed the same partition"
        assert all(thread.consumer == consumer for thread in share.values())
        merged.update(share)
    return merged


def by_thread(assignment) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for tp, thread in sorted(assignment.items()):
        out.setdefault(str(thread), []).append(f"p{tp.partition}")
    return out


def test_range_kafkas_documented_example():
    # RangeAssignor's scaladoc (0.8.2.2): C1 and C2 with two streams each, five partitions.
    assignment = group_assignment(range_assign, {"C1": {"t": 2}, "C2": {"t": 2}}, {"t": 5})
    assert by_thread(assignment) == {"C1-0": ["p0", "p1"], "C1-1": ["p2"], "C2-0": ["p3"], "C2-1": ["p4"]}


def test_range_gives_floor_and_the_remainder_to_the_first_threads():
    # Kafka's code, not the ceiling some descriptions give (seed 000 §6.5 would make it 3, 3, 3, 1).
    assignment = group_assignment(range_assign, {"c": {"t": 4}}, {"t": 10})
    assert [len(v) for v in by_thread(assignment).values()] == [3, 3, 2, 2]


def test_range_sorts_thread_ids_as_strings_so_10_comes_before_2():
    assignment = group_assignment(range_assign, {"g_c": {"t": 11}}, {"t": 11})
    order = [str(assignment[TopicPartition("t", p)]) for p in range(11)]
    assert order == ["g_c-0", "g_c-1", "g_c-10", "g_c-2", "g_c-3", "g_c-4", "g_c-5", "g_c-6", "g_c-7", "g_c-8",
                     "g_c-9"]


def test_range_more_threads_than_partitions_leaves_the_last_threads_idle():
    assignment = group_assignment(range_assign, {"a": {"t": 2}, "b": {"t": 2}}, {"t": 3})
    assert by_thread(assignment) == {"a-0": ["p0"], "a-1": ["p1"], "b-0": ["p2"]}


def test_range_is_per_topic():
    assignment = group_assignment(range_assign, {"a": {"x": 1, "y": 1}, "b": {"x": 1}}, {"x": 4, "y": 2})
    assert by_thread(assignment) == {"a-0": ["p0", "p1", "p0", "p1"], "b-0": ["p2", "p3"]}
    assert {tp for tp, t in assignment.items() if t.consumer == "a" and tp.topic == "y"} == {
        TopicPartition("y", 0), TopicPartition("y", 1)}


def test_java_string_hash_matches_java():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # the well-known MIN_VALUE hash
    assert java_string_hash("[t,0]") == ((((ord("[") * 31 + ord("t")) * 31 + ord(",")) * 31 + ord("0")) * 31
                                         + ord("]"))


def test_roundrobin_deals_partitions_in_hash_order_over_sorted_threads():
    assignment = group_assignment(roundrobin_assign, {"g_a": {"t": 1}, "g_b": {"t": 1}}, {"t": 4})
    ordered = sorted((TopicPartition("t", p) for p in range(4)), key=lambda tp: java_string_hash(str(tp)))
    expected = {tp: ConsumerThreadId("g_a" if i % 2 == 0 else "g_b", 0) for i, tp in enumerate(ordered)}
    assert assignment == expected


def test_roundrobin_is_uniform_within_one_across_topics():
    members = {f"c{i}": {"x": 2, "y": 2, "z": 2} for i in range(3)}
    assignment = group_assignment(roundrobin_assign, members, {"x": 7, "y": 5, "z": 11})
    counts = {}
    for thread in assignment.values():
        counts[str(thread)] = counts.get(str(thread), 0) + 1
    assert len(assignment) == 23 and max(counts.values()) - min(counts.values()) <= 1


def test_roundrobin_refuses_different_subscriptions():
    with pytest.raises(SubscriptionMismatch, match="Round-robin assignment is allowed only if"):
        group_assignment(roundrobin_assign, {"a": {"x": 1, "y": 1}, "b": {"x": 1}}, {"x": 2, "y": 2})


@pytest.mark.parametrize("assign", [range_assign, roundrobin_assign])
def test_every_partition_is_owned_exactly_once(assign):
    rng = random.Random(7)
    for _ in range(200):
        topics = {f"t{i}": rng.randint(1, 30) for i in range(rng.randint(1, 3))}
        streams = rng.randint(1, 4)
        members = {f"g_host-{rng.randint(0, 10**6)}-{i}": dict.fromkeys(topics, streams)
                   for i in range(rng.randint(1, 12))}
        assignment = group_assignment(assign, members, topics)
        expected = {TopicPartition(t, p) for t, n in topics.items() for p in range(n)}
        assert set(assignment) == expected

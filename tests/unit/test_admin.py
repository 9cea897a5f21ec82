"""Replica assignment as Kafka 0.8.2's AdminUtils.assignReplicasToBrokers (reference §5)."""

from __future__ import annotations

import random

import pytest

from zkbroker.admin import AdminError, assign_replicas_to_brokers, parse_replica_assignment, validate_topic_name


def test_fixed_start_reproduces_the_source_comment_table():
    # 5 brokers, start index 0, shift 0: the table in AdminUtils' comment.
    assignment = assign_replicas_to_brokers([0, 1, 2, 3, 4], 10, 3, fixed_start_index=0)
    assert assignment[0] == (0, 1, 2)
    assert assignment[4] == (4, 0, 1)
    assert assignment[5] == (0, 2, 3)
    assert assignment[9] == (4, 1, 2)


def test_seed_rule_partition_i_on_broker_i_mod_n_replica_j_on_i_plus_j_mod_n():
    brokers = [0, 1, 2]
    assignment = assign_replicas_to_brokers(brokers, 3, 2, fixed_start_index=0)
    for i in range(3):
        assert assignment[i] == tuple(brokers[(i + j) % 3] for j in range(2))


def test_random_assignment_spreads_leaders_and_never_repeats_a_broker():
    assignment = assign_replicas_to_brokers([1, 2, 3], 6, 3, rng=random.Random(7))
    assert sorted(a[0] for a in assignment.values()) == [1, 1, 2, 2, 3, 3]
    assert all(len(set(a)) == 3 for a in assignment.values())


def test_replication_factor_larger_than_brokers_is_refused():
    with pytest.raises(AdminError, match="replication factor: 4 larger than available brokers: 3"):
        assign_replicas_to_brokers([1, 2, 3], 1, 4)


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 256, "bad/name", "spaces no"])
def test_illegal_topic_names(name):
    with pytest.raises(AdminError):
        validate_topic_name(name)


def test_brokers_are_used_in_the_order_given():
    # The reassignment tool passes the user's --broker-list as is; creation passes the sorted registered brokers.
    assert assign_replicas_to_brokers([5, 3], 2, 1, fixed_start_index=0) == {0: (5,), 1: (3,)}


def test_added_partitions_continue_from_the_existing_count_with_a_broker_id_as_start_index():
    # addPartitions: fixed start = head of partition 0's replicas (broker 2 here), start partition = 3.
    assert assign_replicas_to_brokers([1, 2, 3], 2, 2, fixed_start_index=2, start_partition_id=3) == {
        3: (3, 2), 4: (1, 3)}


def test_manual_replica_assignment_is_parsed_preferred_replica_first():
    assert parse_replica_assignment("1:2, 2:3 ,3:1") == {0: (1, 2), 1: (2, 3), 2: (3, 1)}
    assert parse_replica_assignment("4", first_partition=2) == {2: (4,)}


@pytest.mark.parametrize("text, message", [
    ("1:2,2", "Partition 1 has different replication factor: 2"),
    ("1:1", "Partition replica lists may not contain duplicate entries: 1"),
    ("1:a", '"a" is not a broker id'),
    ("1:-2", '"-2" is not a broker id'),
    ("1:2,,2:1", "partition 1 has no replicas"),
])
def test_bad_manual_replica_assignment_is_refused_with_a_reason(text, message):
    with pytest.raises(AdminError, match=message):
        parse_replica_assignment(text)

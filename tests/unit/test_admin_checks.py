"""The Admin API's checks (zkbroker/admin_checks.py), as Kafka 2.x makes them: each bad request gets Kafka's error
code and a message that names the problem, with no ZooKeeper and no broker."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from zkbroker import admin_checks as checks
from zkbroker.admin_checks import ApiError, TopicToCreate
from zkbroker.protocol.errors import ErrorCode
from zkbroker.zk.znodes import TopicAssignment

LIVE = [1, 2, 3]


def create(name="t", partitions=-1, replication=-1, assignments=None, configs=None):
    topic = TopicToCreate(name, partitions, replication, assignments or {}, configs or {})
    return checks.creation_assignment(topic, LIVE, default_partitions=2, default_replication_factor=1,
                                      rng=random.Random(3))


def refused(code, fn, *args, **kwargs) -> str:
    with pytest.raises(ApiError) as info:
        fn(*args, **kwargs)
    assert info.value.code == code, info.value
    return info.value.message or ""


def test_counts_or_the_brokers_defaults_spread_over_the_live_brokers():
    assignment = create(partitions=6, replication=3)
    assert sorted(assignment) == list(range(6)) and all(sorted(r) == LIVE for r in assignment.values())
    assert sorted(a[0] for a in assignment.values()) == [1, 1, 2, 2, 3, 3]  # leaders spread
    defaults = create()  # -1 and -1 (CreateTopics v4+): num.partitions and default.replication.factor
    assert len(defaults) == 2 and all(len(r) == 1 for r in defaults.values())


def test_an_explicit_assignment_is_taken_as_given():
    assert create(assignments={0: [3, 1], 1: [1, 2]}) == {0: (3, 1), 1: (1, 2)}


@pytest.mark.parametrize(("kwargs", "code", "words"), [
    (dict(partitions=0, replication=1), ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0"),
    (dict(partitions=-5, replication=1), ErrorCode.INVALID_PARTITIONS, "larger than 0"),
    (dict(partitions=1, replication=0), ErrorCode.INVALID_REPLICATION_FACTOR, "must be larger than 0"),
    (dict(partitions=1, replication=4), ErrorCode.INVALID_REPLICATION_FACTOR,
     "Replication factor: 4 larger than available brokers: 3"),
    (dict(partitions=1, replication=1, assignments={0: [1]}), ErrorCode.INVALID_REQUEST, "Both numPartitions"),
    (dict(assignments={0: [1, 1]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Duplicate replica assignment"),
    (dict(assignments={0: [1, 2], 1: [3]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "same number of replicas"),
    (dict(assignments={0: []}), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "has no replicas"),
    (dict(assignments={0: [1], 2: [2]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "consecutive 0-based"),
    (dict(partitions=1, replication=1, configs={"retention.ms": None}), ErrorCode.INVALID_REQUEST,
     "Null value not supported for topic configs : retention.ms"),
    (dict(partitions=1, replication=1, configs={"retention.ms": "soon"}), ErrorCode.INVALID_CONFIG, "retention.ms"),
    (dict(partitions=1, replication=1, configs={"retention.mss": "1"}), ErrorCode.INVALID_CONFIG,
     "Unknown topic config name: retention.mss"),
])
def test_a_bad_create_gets_kafkas_code_and_a_message_naming_the_problem(kwargs, code, words):
    assert words in refused(code, create, **kwargs)


def test_an_assignment_too_large_for_a_znode_is_refused_before_it_is_built():
    # two billion partitions: refused from the count alone, without building anything
    message = refused(ErrorCode.INVALID_REQUEST, create, partitions=2**31 - 1, replication=1)
    assert "jute.maxbuffer" in message and str(checks.ZNODE_MAX_BYTES) in message
    # 100,000 partitions of 3: built, measured, refused with the size it would take
    message = refused(ErrorCode.INVALID_REQUEST, create, partitions=100_000, replication=3)
    assert "would take" in message and "/brokers/topics/t" in message
    # the largest that fits is accepted: the bound is the znode, not a guess
    fits = create(partitions=20_000, replication=3)
    assert len(TopicAssignment(fits).encode()) < checks.ZNODE_MAX_BYTES


def test_an_explicit_assignment_too_large_for_a_znode_is_refused():
    message = refused(ErrorCode.INVALID_REQUEST, create, assignments={p: [1, 2, 3] for p in range(100_000)})
    assert "jute.maxbuffer" in message


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "bad/name", "spaces no", "ünïcode"])
def test_illegal_topic_names_are_invalid_topic(name):
    refused(ErrorCode.INVALID_TOPIC, checks.check_topic_name, name)


def test_a_topic_name_of_249_characters_is_legal():
    checks.check_topic_name("x" * 249)


def test_existing_marked_and_colliding_topics():
    assert "already exists" in refused(ErrorCode.TOPIC_ALREADY_EXISTS, checks.check_not_existing, "t", True, False, [])
    assert "marked for deletion" in refused(ErrorCode.TOPIC_ALREADY_EXISTS, checks.check_not_existing, "t", False,
                                            True, [])
    assert "collides with existing topics: a_b" in refused(ErrorCode.INVALID_TOPIC, checks.check_not_existing,
                                                            "a.b", False, False, ["a_b", "c"])
    checks.check_not_existing("a.b", False, False, ["a.c"])


def test_a_partition_listed_twice_in_a_request_is_invalid_request():
    entry = SimpleNamespace(name="t", num_partitions=-1, replication_factor=-1, configs=[], assignments=[
        SimpleNamespace(partition_index=0, broker_ids=[1]), SimpleNamespace(partition_index=0, broker_ids=[2])])
    assert "assigned twice" in refused(ErrorCode.INVALID_REQUEST, checks.topic_to_create, entry)


# ---- CreatePartitions ---------------------------------------------------------------------------------------

EXISTING = {0: (2, 3), 1: (3, 1)}


def grow(count, given=None):
    return checks.new_partitions_assignment("t", EXISTING, count, given, LIVE, LIVE, rng=random.Random(1))


def test_new_partitions_start_at_the_broker_of_partition_0s_preferred_replica():
    added = grow(4)
    assert sorted(added) == [2, 3] and all(len(r) == 2 and len(set(r)) == 2 for r in added.values())
    # Kafka 2.x: start index = the first broker whose id is at least partition 0's head (2, index 1); partition p's
    # leader is then broker[(p + start) % n], so the round-robin carries on where partition 0's would
    assert (added[2][0], added[3][0]) == (1, 2)
    assert grow(4, [[1, 2], [2, 3]]) == {2: (1, 2), 3: (2, 3)}


@pytest.mark.parametrize(("count", "given", "code", "words"), [
    (1, None, ErrorCode.INVALID_PARTITIONS, "Topic currently has 2 partitions, which is higher than the requested 1"),
    (2, None, ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partitions"),
    (3, [[1, 9]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s) in replica assignment: 9"),
    (4, [[1, 2]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "by 2 but 1 assignments provided"),
    (3, [[1, 1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Duplicate brokers not allowed"),
    (3, [[]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "replication factor of 0"),
    (3, [[1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Inconsistent replication factor"),
    (2**31 - 1, None, ErrorCode.INVALID_REQUEST, "jute.maxbuffer"),
])
def test_bad_new_partitions(count, given, code, words):
    assert words in refused(code, grow, count, given)


# ---- configs ------------------------------------------------------------------------------------------------

def test_broker_config_resources_name_this_broker_or_the_cluster_default():
    assert checks.broker_resource_id("", 1) is None
    assert checks.broker_resource_id("1", 1) == 1
    assert "expected 1 or empty string, but received 2" in refused(ErrorCode.INVALID_REQUEST,
                                                                   checks.broker_resource_id, "2", 1)
    assert "must be an integer" in refused(ErrorCode.INVALID_REQUEST, checks.broker_resource_id, "one", 1)


def op(name, operation, value=None):
    return SimpleNamespace(name=name, config_operation=operation, value=value)


def test_incremental_operations_on_the_present_config():
    from zkbroker.config import SERVER_CONFIGS, TOPIC_CONFIGS

    current = {"retention.ms": "1000", "segment.bytes": "2048"}
    assert checks.apply_incremental(current, [op("retention.ms", 1), op("cleanup.policy", 0, "compact")],
                                    TOPIC_CONFIGS) == {"segment.bytes": "2048", "cleanup.policy": "compact"}
    # APPEND and SUBTRACT are for list configs only (log.dirs is one; no topic config is)
    assert "append is not allowed" in refused(ErrorCode.INVALID_REQUEST, checks.apply_incremental, current,
                                              [op("retention.ms", 2, "5")], TOPIC_CONFIGS)
    assert checks.apply_incremental({"log.dirs": "/a,/b"}, [op("log.dirs", 3, "/a")], SERVER_CONFIGS) == {
        "log.dirs": "/b"}
    assert checks.apply_incremental({}, [op("log.dirs", 2, "/c")], SERVER_CONFIGS)["log.dirs"].endswith("/c")
    assert "Unknown config name: nope" in refused(ErrorCode.INVALID_CONFIG, checks.apply_incremental, {},
                                                  [op("nope", 2, "x")], TOPIC_CONFIGS)
    assert "duplicate config keys : a" in refused(ErrorCode.INVALID_REQUEST, checks.apply_incremental, {},
                                                  [op("a", 0, "1"), op("a", 1)], TOPIC_CONFIGS)
    assert "Null value not supported for : SET:a" in refused(ErrorCode.INVALID_REQUEST, checks.apply_incremental,
                                                             {}, [op("a", 0)], TOPIC_CONFIGS)
    assert "Unknown config operation 9" in refused(ErrorCode.INVALID_REQUEST, checks.apply_incremental, {},
                                                   [op("a", 9, "1")], TOPIC_CONFIGS)


def test_a_topic_configs_bad_value_code_depends_on_the_api_as_in_kafka():
    refused(ErrorCode.INVALID_CONFIG, checks.check_topic_configs, {"retention.ms": "x"}, ErrorCode.INVALID_CONFIG)
    refused(ErrorCode.INVALID_REQUEST, checks.check_topic_configs, {"retention.ms": "x"}, ErrorCode.INVALID_REQUEST)
    refused(ErrorCode.INVALID_CONFIG, checks.check_topic_configs, {"x": "1"}, ErrorCode.INVALID_REQUEST)


def test_values_are_written_as_kafkas_convert_to_string():
    from zkbroker.config import ConfigType

    assert checks.format_value(True, ConfigType.BOOLEAN) == "true"
    assert checks.format_value(("a", "b"), ConfigType.LIST) == "a,b"
    assert checks.format_value(0.5, ConfigType.DOUBLE) == "0.5"
    assert checks.format_value(1.7976931348623157e308, ConfigType.DOUBLE) == "1.7976931348623157E308"
    assert checks.format_value({"h": 3}, ConfigType.MAP) == "h:3"
    assert checks.format_value(None, ConfigType.INT) is None

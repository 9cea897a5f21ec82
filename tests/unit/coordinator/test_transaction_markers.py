"""Marker delivery's pure part: one WriteTxnMarkers request per partition leader, leaderless partitions held
back, and Kafka's meaning of each partition's answer (written, retried, fenced, or a bug)."""

from __future__ import annotations

from zkbroker.coordinator.transaction.markers import MarkerOutcome, outcome_of, outcomes, plan
from zkbroker.protocol.api import REQUEST_SCHEMAS, ApiKey
from zkbroker.protocol.errors import ErrorCode as E
from zkbroker.topic_partition import TopicPartition as TP

LEADERS = {TP("out", 0): 1, TP("out", 1): 2, TP("out", 2): 1, TP("__consumer_offsets", 17): 2, TP("gone", 0): None}


def test_one_request_per_leader_and_leaderless_partitions_wait():
    p = plan(4000, 3, True, 7, LEADERS, LEADERS.get)
    assert p.leaderless == {TP("gone", 0)}
    assert p.requests[1] == {"markers": [{"producer_id": 4000, "producer_epoch": 3, "transaction_result": True,
                                          "coordinator_epoch": 7,
                                          "topics": [{"name": "out", "partition_indexes": [0, 2]}]}]}
    assert [t["name"] for t in p.requests[2]["markers"][0]["topics"]] == ["__consumer_offsets", "out"]
    for body in p.requests.values():  # what the broker will send: WriteTxnMarkers v0 and v1 encode it
        for version in (0, 1):
            assert REQUEST_SCHEMAS[(ApiKey.WRITE_TXN_MARKERS, version)].encode(body)


def test_what_each_answer_means():
    assert outcome_of(E.NONE) == MarkerOutcome.WRITTEN
    assert outcome_of(E.UNSUPPORTED_FOR_MESSAGE_FORMAT) == MarkerOutcome.WRITTEN  # no transactional data there
    for code in (E.NOT_LEADER_FOR_PARTITION, E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS,
                 E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT, E.KAFKA_STORAGE):
        assert outcome_of(code) == MarkerOutcome.RETRY
    assert outcome_of(E.INVALID_PRODUCER_EPOCH) == outcome_of(E.TRANSACTION_COORDINATOR_FENCED) == MarkerOutcome.FENCED
    assert outcome_of(E.CORRUPT_MESSAGE) == outcome_of(E.MESSAGE_TOO_LARGE) == MarkerOutcome.FATAL
    response = {"markers": [{"producer_id": 4000, "topics": [{"name": "out", "partitions": [
        {"partition_index": 0, "error_code": E.NONE},
        {"partition_index": 2, "error_code": E.NOT_LEADER_FOR_PARTITION}]}]}]}
    assert outcomes(response) == {TP("out", 0): MarkerOutcome.WRITTEN, TP("out", 2): MarkerOutcome.RETRY}

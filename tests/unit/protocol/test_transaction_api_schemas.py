"""The transactional APIs' schemas (InitProducerId 0-4, AddPartitionsToTxn 0-3, AddOffsetsToTxn 0-3, EndTxn 0-3,
WriteTxnMarkers 0-1, TxnOffsetCommit 0-3, FindCoordinator 0-3), held byte for byte to kafka-python 3.0.12's
classes, which it generates from Kafka's message JSON: the same values encode to the same bytes, requests and
responses, flexible versions included."""

from __future__ import annotations

import pytest
from kafka.protocol.admin import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

from zkbroker.protocol.api import REQUEST_SCHEMAS, RESPONSE_SCHEMAS, ApiKey

APT = AddPartitionsToTxnRequest
APR = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
WM = WriteTxnMarkersRequest.WritableTxnMarker
WR = WriteTxnMarkersResponse.WritableTxnMarkerResult
TOC = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
TOR = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic


def init_producer_id(v):
    ours = {"transactional_id": "tx", "transaction_timeout_ms": 60000, "producer_id": 4000, "producer_epoch": 3}
    theirs = dict(ours) if v >= 3 else {k: ours[k] for k in ("transactional_id", "transaction_timeout_ms")}
    response = {"throttle_time_ms": 0, "error_code": 90, "producer_id": 4000, "producer_epoch": 4}
    return InitProducerIdRequest[v](**theirs), ours, InitProducerIdResponse[v](**response), response


def add_partitions(v):
    topics = [("out", [0, 2]), ("__consumer_offsets", [17])]
    request = APT[v](v3_and_below_transactional_id="tx", v3_and_below_producer_id=4000,
                     v3_and_below_producer_epoch=3,
                     v3_and_below_topics=[APT.AddPartitionsToTxnTopic(name=n, partitions=p) for n, p in topics])
    ours = {"transactional_id": "tx", "producer_id": 4000, "producer_epoch": 3,
            "topics": [{"name": n, "partitions": p} for n, p in topics]}
    response = AddPartitionsToTxnResponse[v](throttle_time_ms=0, results_by_topic_v3_and_below=[APR(
        name="out", results_by_partition=[APR.AddPartitionsToTxnPartitionResult(partition_index=2,
                                                                                partition_error_code=51)])])
    return request, ours, response, {"throttle_time_ms": 0, "results": [
        {"name": "out", "partitions": [{"partition_index": 2, "error_code": 51}]}]}


def add_offsets(v):
    ours = {"transactional_id": "tx", "producer_id": 4000, "producer_epoch": 3, "group_id": "copiers"}
    response = {"throttle_time_ms": 0, "error_code": 0}
    return AddOffsetsToTxnRequest[v](**ours), ours, AddOffsetsToTxnResponse[v](**response), response


def end_txn(v):
    ours = {"transactional_id": "tx", "producer_id": 4000, "producer_epoch": 3, "committed": True}
    response = {"throttle_time_ms": 0, "error_code": 48}
    return EndTxnRequest[v](**ours), ours, EndTxnResponse[v](**response), response


def write_txn_markers(v):
    request = WriteTxnMarkersRequest[v](markers=[WM(
        producer_id=4000, producer_epoch=3, transaction_result=False, coordinator_epoch=7,
        topics=[WM.WritableTxnMarkerTopic(name="out", partition_indexes=[0, 1])])])
    ours = {"markers": [{"producer_id": 4000, "producer_epoch": 3, "transaction_result": False,
                         "topics": [{"name": "out", "partition_indexes": [0, 1]}], "coordinator_epoch": 7}]}
    response = WriteTxnMarkersResponse[v](markers=[WR(producer_id=4000, topics=[WR.WritableTxnMarkerTopicResult(
        name="out", partitions=[WR.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(
            partition_index=1, error_code=52)])])])
    return request, ours, response, {"markers": [{"producer_id": 4000, "topics": [
        {"name": "out", "partitions": [{"partition_index": 1, "error_code": 52}]}]}]}


def txn_offset_commit(v):
    partition = {"partition_index": 0, "committed_offset": 1234, "committed_leader_epoch": 5,
                 "committed_metadata": None}
    extra = {"generation_id": 9, "member_id": "m-1", "group_instance_id": None} if v >= 3 else {}
    their_partition = dict(partition) if v >= 2 else {k: partition[k] for k in partition
                                                      if k != "committed_leader_epoch"}
    request = TxnOffsetCommitRequest[v](transactional_id="tx", group_id="copiers", producer_id=4000,
                                        producer_epoch=3, **extra, topics=[TOC(name="in", partitions=[
                                            TOC.TxnOffsetCommitRequestPartition(**their_partition)])])
    ours = {"transactional_id": "tx", "group_id": "copiers", "producer_id": 4000, "producer_epoch": 3, **extra,
            "topics": [{"name": "in", "partitions": [partition]}]}
    response = TxnOffsetCommitResponse[v](throttle_time_ms=0, topics=[TOR(name="in", partitions=[
        TOR.TxnOffsetCommitResponsePartition(partition_index=0, error_code=0)])])
    return request, ours, response, {"throttle_time_ms": 0, "topics": [
        {"name": "in", "partitions": [{"partition_index": 0, "error_code": 0}]}]}


def find_coordinator(v):
    if v == 0:
        request, ours = FindCoordinatorRequest[0](key="g"), {"group_id": "g"}
        head = {"error_code": 0}
    else:
        request = FindCoordinatorRequest[v](key="tx", key_type=1)
        ours = {"coordinator_key": "tx", "coordinator_type": 1}
        head = {"throttle_time_ms": 0, "error_code": 0, "error_message": None}
    response = {**head, "node_id": 2, "host": "127.0.0.1", "port": 9093}
    return request, ours, FindCoordinatorResponse[v](**response), response


def offset_fetch(v):
    """OffsetFetch v6 (flexible) and v7 (require_stable, KIP-447), which read_committed consumers send."""
    ours = {"group_id": "copiers", "topics": [{"topic": "in", "partitions": [0, 1]}]}
    theirs = {"group_id": "copiers", "topics": [OffsetFetchRequest.OffsetFetchRequestTopic(
        name="in", partition_indexes=[0, 1])]}
    if v >= 7:
        ours["require_stable"] = theirs["require_stable"] = True
    partitions = [{"partition": 0, "offset": 40, "committed_leader_epoch": 2, "metadata": "", "error_code": 0},
                  {"partition": 1, "offset": -1, "committed_leader_epoch": -1, "metadata": "", "error_code": 88}]
    RT = OffsetFetchResponse.OffsetFetchResponseTopic
    response = OffsetFetchResponse[v](throttle_time_ms=0, error_code=0, topics=[RT(name="in", partitions=[
        RT.OffsetFetchResponsePartition(partition_index=p["partition"], committed_offset=p["offset"],
                                        committed_leader_epoch=p["committed_leader_epoch"], metadata=p["metadata"],
                                        error_code=p["error_code"]) for p in partitions])])
    return (OffsetFetchRequest[v](**theirs), ours, response,
            {"throttle_time_ms": 0, "topics": [{"topic": "in", "partitions": partitions}], "error_code": 0})


def describe_producers(v):
    request = DescribeProducersRequest[v](topics=[DescribeProducersRequest.TopicRequest(name="out",
                                                                                        partition_indexes=[0, 2])])
    producer = {"producer_id": 4000, "producer_epoch": 3, "last_sequence": 17, "last_timestamp": 1_700_000_000_000,
                "coordinator_epoch": 1, "current_txn_start_offset": 40}
    partition = {"partition_index": 0, "error_code": 0, "error_message": None, "active_producers": [producer]}
    T = DescribeProducersResponse.TopicResponse
    response = DescribeProducersResponse[v](throttle_time_ms=0, topics=[T(name="out", partitions=[
        T.PartitionResponse(partition_index=0, error_code=0, error_message=None,
                            active_producers=[T.PartitionResponse.ProducerState(**producer)])])])
    return (request, {"topics": [{"name": "out", "partition_indexes": [0, 2]}]}, response,
            {"throttle_time_ms": 0, "topics": [{"name": "out", "partitions": [partition]}]})


def describe_transactions(v):
    state = {"error_code": 0, "transactional_id": "tx", "transaction_state": "Ongoing",
             "transaction_timeout_ms": 60000, "transaction_start_time_ms": 1_700_000_000_000, "producer_id": 4000,
             "producer_epoch": 3}
    S = DescribeTransactionsResponse.TransactionState
    response = DescribeTransactionsResponse[v](throttle_time_ms=0, transaction_states=[
        S(**state, topics=[S.TopicData(topic="out", partitions=[0, 1])])])
    return (DescribeTransactionsRequest[v](transactional_ids=["tx", "ty"]), {"transactional_ids": ["tx", "ty"]},
            response, {"throttle_time_ms": 0, "transaction_states": [
                {**state, "topics": [{"topic": "out", "partitions": [0, 1]}]}]})


def list_transactions(v):
    ours = {"state_filters": ["Ongoing"], "producer_id_filters": [4000]}
    states = [{"transactional_id": "tx", "producer_id": 4000, "transaction_state": "Ongoing"}]
    response = {"throttle_time_ms": 0, "error_code": 0, "unknown_state_filters": ["Bogus"]}
    return (ListTransactionsRequest[v](**ours), ours, ListTransactionsResponse[v](
        **response, transaction_states=[ListTransactionsResponse.TransactionState(**s) for s in states]),
        {**response, "transaction_states": states})


CASES = [(ApiKey.INIT_PRODUCER_ID, v, init_producer_id) for v in range(5)]
CASES += [(ApiKey.DESCRIBE_PRODUCERS, 0, describe_producers), (ApiKey.DESCRIBE_TRANSACTIONS, 0, describe_transactions),
          (ApiKey.LIST_TRANSACTIONS, 0, list_transactions)]
CASES += [(ApiKey.OFFSET_FETCH, v, offset_fetch) for v in (6, 7)]
CASES += [(ApiKey.ADD_PARTITIONS_TO_TXN, v, add_partitions) for v in range(4)]
CASES += [(ApiKey.ADD_OFFSETS_TO_TXN, v, add_offsets) for v in range(4)]
CASES += [(ApiKey.END_TXN, v, end_txn) for v in range(4)]
CASES += [(ApiKey.WRITE_TXN_MARKERS, v, write_txn_markers) for v in range(2)]
CASES += [(ApiKey.TXN_OFFSET_COMMIT, v, txn_offset_commit) for v in range(4)]
CASES += [(ApiKey.FIND_COORDINATOR, v, find_coordinator) for v in range(4)]


@pytest.mark.parametrize(("api_key", "version", "case"), CASES,
                         ids=[f"{k.name}-v{v}" for k, v, _ in CASES])
def test_our_schemas_encode_what_kafka_python_encodes(api_key, version, case):
    their_request, our_request, their_response, our_response = case(version)
    request_bytes = bytes(their_request.encode())
    assert REQUEST_SCHEMAS[(api_key, version)].encode(our_request) == request_bytes
    decoded, end = REQUEST_SCHEMAS[(api_key, version)].decode(request_bytes, 0)
    assert end == len(request_bytes)
    assert RESPONSE_SCHEMAS[(api_key, version)].encode(our_response) == bytes(their_response.encode())

"""Every schema round-trips, and matches kafka-python's encoders where kafka-python has the version.

Golden values are positional, so the same tuple feeds both encoders: equal bytes mean equal
field order and types. The controller APIs (which kafka-python lacks) are checked against bytes
written out by hand from Kafka's message JSON.
"""

import struct

import pytest
from kafka.protocol.old import (
    admin,
    commit,
    fetch,
    find_coordinator,
    group,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
    sasl_authenticate,
    sasl_handshake,
)
from kafka.protocol.old import offset_for_leader_epoch as leader_epoch

from zkbroker.protocol.api import (
    REQUEST_SCHEMAS,
    RESPONSE_SCHEMAS,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from zkbroker.protocol.errors import LocalProtocolError
from zkbroker.protocol.headers import RequestHeader, parse_request_header

MSGS = b"\x00" * 12 + b"fake message set"

# (api_key, version, kind, kafka-python class or None, positional value)
CASES = [
    (0, 0, "request", produce.ProduceRequest_v0, (1, 1500, [("t", [(0, MSGS), (1, b"")])])),
    (0, 1, "request", produce.ProduceRequest_v1, (-1, 30000, [("t", [(0, MSGS)])])),
    (0, 2, "request", produce.ProduceRequest_v2, (0, 0, [("t", [(0, MSGS)]), ("u", [])])),
    (0, 0, "response", produce.ProduceResponse_v0, ([("t", [(0, 0, 41), (1, 6, -1)])],)),
    (0, 1, "response", produce.ProduceResponse_v1, ([("t", [(0, 0, 41)])], 0)),
    (0, 2, "response", produce.ProduceResponse_v2, ([("t", [(0, 0, 41, -1)])], 7)),
    (1, 0, "request", fetch.FetchRequest_v0, (-1, 500, 1, [("t", [(0, 10, 1048576)])])),
    (1, 1, "request", fetch.FetchRequest_v1, (2, 500, 1, [("t", [(0, 10, 1048576)])])),
    (1, 2, "request", fetch.FetchRequest_v2, (-1, 100, 0, [])),
    (1, 3, "request", fetch.FetchRequest_v3, (-1, 500, 1, 52428800, [("t", [(0, 0, 1024)])])),
    (1, 0, "response", fetch.FetchResponse_v0, ([("t", [(0, 0, 99, MSGS), (1, 1, -1, b"")])],)),
    (1, 1, "response", fetch.FetchResponse_v1, (0, [("t", [(0, 0, 99, MSGS)])])),
    (1, 2, "response", fetch.FetchResponse_v2, (5, [("t", [(0, 0, 99, MSGS)])])),
    (1, 3, "response", fetch.FetchResponse_v3, (0, [("t", [(0, 6, -1, b"")])])),
    (2, 0, "request", list_offsets.ListOffsetsRequest_v0, (-1, [("t", [(0, -1, 1), (1, -2, 1)])])),
    (2, 1, "request", list_offsets.ListOffsetsRequest_v1, (-1, [("t", [(0, -2)])])),
    (2, 0, "response", list_offsets.ListOffsetsResponse_v0, ([("t", [(0, 0, [42]), (1, 3, [])])],)),
    (2, 1, "response", list_offsets.ListOffsetsResponse_v1, ([("t", [(0, 0, -1, 42)])],)),
    (8, 0, "request", commit.OffsetCommitRequest_v0, ("g", [("t", [(0, 5, ""), (1, 6, None)])])),
    (8, 1, "request", commit.OffsetCommitRequest_v1, ("g", -1, "", [("t", [(0, 5, -1, "m")])])),
    (8, 2, "request", commit.OffsetCommitRequest_v2, ("g", -1, "", -1, [("t", [(0, 5, "")])])),
    (8, 0, "response", commit.OffsetCommitResponse_v0, ([("t", [(0, 0), (1, 3)])],)),
    (8, 1, "response", commit.OffsetCommitResponse_v1, ([("t", [(0, 0)])],)),
    (8, 2, "response", commit.OffsetCommitResponse_v2, ([("t", [(0, 16)])],)),
    (9, 0, "request", commit.OffsetFetchRequest_v0, ("g", [("t", [0, 1, 2])])),
    (9, 1, "request", commit.OffsetFetchRequest_v1, ("g", [("t", [0])])),
    (9, 0, "response", commit.OffsetFetchResponse_v0, ([("t", [(0, 5, "", 0), (1, -1, None, 3)])],)),
    (9, 1, "response", commit.OffsetFetchResponse_v1, ([("t", [(0, -1, "", 0)])],)),
    (10, 0, "request", find_coordinator.FindCoordinatorRequest_v0, ("my-group",)),
    (10, 0, "response", find_coordinator.FindCoordinatorResponse_v0, (0, 2, "127.0.0.1", 9093)),
    (11, 0, "request", group.JoinGroupRequest_v0, ("g", 10000, "", "consumer", [("range", b"m1"), ("rr", b"")])),
    (11, 1, "request", group.JoinGroupRequest_v1, ("g", 10000, 300000, "m-1", "consumer", [("range", b"m")])),
    (11, 0, "response", group.JoinGroupResponse_v0, (0, 3, "range", "m-1", "m-1", [("m-1", b"a"), ("m-2", b"")])),
    (11, 1, "response", group.JoinGroupResponse_v1, (25, -1, "", "", "m-2", [])),
    (12, 0, "request", group.HeartbeatRequest_v0, ("g", 3, "m-1")),
    (12, 0, "response", group.HeartbeatResponse_v0, (27,)),
    (13, 0, "request", group.LeaveGroupRequest_v0, ("g", "m-1")),
    (13, 0, "response", group.LeaveGroupResponse_v0, (0,)),
    (14, 0, "request", group.SyncGroupRequest_v0, ("g", 3, "m-1", [("m-1", b"x"), ("m-2", b"")])),
    (14, 0, "response", group.SyncGroupResponse_v0, (0, b"assignment")),
    (15, 0, "request", admin.DescribeGroupsRequest_v0, (["g", "h"],)),
    (
        15, 0, "response", admin.DescribeGroupsResponse_v0,
        ([(0, "g", "Stable", "consumer", "range", [("m-1", "c", "/127.0.0.1", b"md", b"as")])],),
    ),
    (16, 0, "request", admin.ListGroupsRequest_v0, ()),
    (16, 0, "response", admin.ListGroupsResponse_v0, (0, [("g", "consumer"), ("h", "")])),
    (
        23, 0, "request", leader_epoch.OffsetForLeaderEpochRequest_v0,
        ([("t", [(0, 3), (1, 0)])],),
    ),
    (
        23, 0, "response", leader_epoch.OffsetForLeaderEpochResponse_v0,
        ([("t", [(0, 0, 120), (6, 1, -1)])],),
    ),
    (4, 0, "request", None, (1, 3, [("t", 0, 3, 1, 7, [1, 2], 12, [1, 2, 3])], [(1, "h", 9092)])),
    (4, 0, "response", None, (0, [("t", 0, 0), ("t", 1, 11)])),
    (5, 0, "request", None, (1, 3, True, [("t", 0), ("u", 2)])),
    (5, 0, "response", None, (0, [("t", 0, 0)])),
    (6, 0, "request", None, (1, 3, [("t", 0, 3, 1, 7, [1], 12, [1, 2])], [(1, "h", 9092)])),
    (6, 0, "response", None, (0,)),
    (7, 0, "request", None, (2,)),
    (7, 1, "request", None, (2,)),
    (7, 0, "response", None, (0, [("t", 0), ("t", 1)])),
    (7, 1, "response", None, (0, [])),
]

# Kafka 0.11-2.1's versions (record batches, KIP-320, zstd), against kafka-python's encoders.
_BATCH_RECORDS = b"\x00" * 12 + b"record batch"
CASES += [(0, v, "request", getattr(produce, f"ProduceRequest_v{v}"), (None if v % 2 else "tx", -1, 30000,
                                                                        [("t", [(0, _BATCH_RECORDS)])]))
          for v in range(3, 8)]
CASES += [(0, v, "response", getattr(produce, f"ProduceResponse_v{v}"),
           ([("t", [(0, 0, 41, -1) + ((0,) if v >= 5 else ())])], 0)) for v in range(3, 8)]
for _v in range(4, 12):
    _partition = (0,) + ((5,) if _v >= 9 else ()) + (10,) + ((-1,) if _v >= 5 else ()) + (1048576,)
    _request = (-1, 500, 1, 52428800, 1) + ((0, -1) if _v >= 7 else ()) + ([("t", [_partition])],)
    _request += ([("u", [1, 2])],) if _v >= 7 else ()
    _request += ("rack-a",) if _v >= 11 else ()  # v11: rack_id (KIP-392)
    CASES.append((1, _v, "request", getattr(fetch, f"FetchRequest_v{_v}"), _request))
    _answer = (0, 0, 99, 99) + ((0,) if _v >= 5 else ()) + ([(7, 3)] if _v % 2 else None,)
    _answer += ((-1,) if _v >= 11 else ()) + (_BATCH_RECORDS,)  # v11: preferred_read_replica
    CASES.append((1, _v, "response", getattr(fetch, f"FetchResponse_v{_v}"),
                  (0,) + ((0, 0) if _v >= 7 else ()) + ([("t", [_answer])],)))
for _v in range(2, 5):
    _partition = (0,) + ((5,) if _v >= 4 else ()) + (1500000000000,)
    CASES.append((2, _v, "request", getattr(list_offsets, f"ListOffsetsRequest_v{_v}"),
                  (-1, 1, [("t", [_partition])])))
    CASES.append((2, _v, "response", getattr(list_offsets, f"ListOffsetsResponse_v{_v}"),
                  (0, [("t", [(0, 0, 1500000000001, 42) + ((5,) if _v >= 4 else ())])])))
for _v in range(2, 8):
    CASES.append((3, _v, "request", getattr(metadata, f"MetadataRequest_v{_v}"),
                  (["t"],) + ((False,) if _v >= 4 else ())))
    _partition = (0, 0, 1) + ((4,) if _v >= 7 else ()) + ([1, 2], [1]) + (([2],) if _v >= 5 else ())
    _body = ([(1, "h", 9092, None)], "cluster", 1, [(0, "t", False, [_partition])])
    CASES.append((3, _v, "response", getattr(metadata, f"MetadataResponse_v{_v}"),
                  ((0,) if _v >= 3 else ()) + _body))
for _v in (1, 2):
    CASES.append((23, _v, "request", getattr(leader_epoch, f"OffsetForLeaderEpochRequest_v{_v}"),
                  ([("t", [(0,) + ((4,) if _v >= 2 else ()) + (3,)])],)))
    CASES.append((23, _v, "response", getattr(leader_epoch, f"OffsetForLeaderEpochResponse_v{_v}"),
                  ((0,) if _v >= 2 else ()) + ([("t", [(0, 0, 3, 120)])],)))
for _v in (0, 1):
    CASES.append((22, _v, "request", getattr(init_producer_id, f"InitProducerIdRequest_v{_v}"), (None, 60000)))
    CASES.append((22, _v, "response", getattr(init_producer_id, f"InitProducerIdResponse_v{_v}"), (0, 0, 4000, 0)))

# The group APIs at Kafka 2.1's maxima: throttle_time_ms first in the responses from v1 (JoinGroup v2, OffsetCommit
# and OffsetFetch v3); FindCoordinator v1 asks by key and type and answers an error message; OffsetCommit v2-v4 carry
# retention_time, v5 drops it, v6 adds committed_leader_epoch; OffsetFetch v2 adds the top-level error code (last),
# v5 the committed leader epoch.
for _v in (1, 2):
    CASES.append((10, _v, "request", getattr(find_coordinator, f"FindCoordinatorRequest_v{_v}"), ("my-txn", 1)))
    CASES.append((10, _v, "response", getattr(find_coordinator, f"FindCoordinatorResponse_v{_v}"),
                  (0, 0, None, 2, "127.0.0.1", 9093)))
    CASES.append((12, _v, "request", getattr(group, f"HeartbeatRequest_v{_v}"), ("g", 3, "m-1")))
    CASES.append((12, _v, "response", getattr(group, f"HeartbeatResponse_v{_v}"), (0, 27)))
    CASES.append((13, _v, "request", getattr(group, f"LeaveGroupRequest_v{_v}"), ("g", "m-1")))
    CASES.append((13, _v, "response", getattr(group, f"LeaveGroupResponse_v{_v}"), (5, 25)))
    CASES.append((14, _v, "request", getattr(group, f"SyncGroupRequest_v{_v}"), ("g", 3, "m-1", [("m-1", b"x")])))
    CASES.append((14, _v, "response", getattr(group, f"SyncGroupResponse_v{_v}"), (0, 0, b"assignment")))
    CASES.append((15, _v, "request", getattr(admin, f"DescribeGroupsRequest_v{_v}"), (["g"],)))
    CASES.append((15, _v, "response", getattr(admin, f"DescribeGroupsResponse_v{_v}"),
                  (0, [(0, "g", "Stable", "consumer", "range", [("m-1", "c", "/127.0.0.1", b"md", b"as")])])))
    CASES.append((16, _v, "request", getattr(admin, f"ListGroupsRequest_v{_v}"), ()))
    CASES.append((16, _v, "response", getattr(admin, f"ListGroupsResponse_v{_v}"), (0, 14, [("g", "consumer")])))
for _v in (2, 3):
    CASES.append((11, _v, "request", getattr(group, f"JoinGroupRequest_v{_v}"),
                  ("g", 45000, 300000, "", "consumer", [("range", b"m"), ("roundrobin", b"m")])))
    CASES.append((11, _v, "response", getattr(group, f"JoinGroupResponse_v{_v}"),
                  (0, 0, 3, "range", "m-1", "m-1", [("m-1", b"a")])))
for _v in range(3, 7):
    _partition = (0, 5) + ((7,) if _v >= 6 else ()) + ("meta",)
    CASES.append((8, _v, "request", getattr(commit, f"OffsetCommitRequest_v{_v}"),
                  ("g", 3, "m-1") + ((-1,) if _v <= 4 else ()) + ([("t", [_partition])],)))
    CASES.append((8, _v, "response", getattr(commit, f"OffsetCommitResponse_v{_v}"), (0, [("t", [(0, 22)])])))
for _v in range(2, 6):
    CASES.append((9, _v, "request", getattr(commit, f"OffsetFetchRequest_v{_v}"), ("g", [("t", [0, 1])])))
    _partition = (0, 5) + ((7,) if _v >= 5 else ()) + ("", 0)
    CASES.append((9, _v, "response", getattr(commit, f"OffsetFetchResponse_v{_v}"),
                  ((0,) if _v >= 3 else ()) + ([("t", [_partition])], 0)))
    # null topics: every offset the group has; a group-level error at the top with no partitions
    CASES.append((9, _v, "request", getattr(commit, f"OffsetFetchRequest_v{_v}"), ("g", None)))
    CASES.append((9, _v, "response", getattr(commit, f"OffsetFetchResponse_v{_v}"),
                  ((0,) if _v >= 3 else ()) + ([], 14)))

# The Admin API (DESIGN §16): kafka-python has CreateTopics 0-3, DeleteTopics 0-3, DescribeConfigs 0-2,
# AlterConfigs 0-1 and CreatePartitions 0-1; CreateTopics v4 is v3, DescribeConfigs v3 adds two fields to v2.
_creatable = ("t", -1, -1, [(0, [1, 2]), (1, [2, 3])], [("retention.ms", "1000"), ("cleanup.policy", None)])
for _v in range(5):
    CASES.append((19, _v, "request", getattr(admin, f"CreateTopicsRequest_v{_v}", None),
                  ([_creatable, ("u", 3, 2, [], [])], 30000) + ((True,) if _v >= 1 else ())))
    CASES.append((19, _v, "response", getattr(admin, f"CreateTopicsResponse_v{_v}", None),
                  ((5,) if _v >= 2 else ()) + ([("t", 36) + (("Topic 't' already exists.",) if _v >= 1 else ())],)))
for _v in range(4):
    CASES.append((20, _v, "request", getattr(admin, f"DeleteTopicsRequest_v{_v}"), (["t", "u"], 30000)))
    CASES.append((20, _v, "response", getattr(admin, f"DeleteTopicsResponse_v{_v}"),
                  ((0,) if _v >= 1 else ()) + ([("t", 0), ("u", 3)],)))
for _v in range(4):
    CASES.append((32, _v, "request", getattr(admin, f"DescribeConfigsRequest_v{_v}", None),
                  ([(2, "t", None), (4, "1", ["log.retention.ms"])],) + ((True,) if _v >= 1 else ())
                  + ((False,) if _v >= 3 else ())))
    _synonyms = ([("log.retention.hours", "1", 4), ("log.retention.hours", "168", 5)],) if _v >= 1 else ()
    _entry = ("retention.ms", "3600000", False) + ((5,) if _v >= 1 else (True,)) + (False,) + _synonyms
    _entry += (5, None) if _v >= 3 else ()
    CASES.append((32, _v, "response", getattr(admin, f"DescribeConfigsResponse_v{_v}", None),
                  (0, [(0, None, 2, "t", [_entry]), (3, "Topic u does not exist.", 2, "u", [])])))
for _v in range(2):
    CASES.append((33, _v, "request", getattr(admin, f"AlterConfigsRequest_v{_v}"),
                  ([(2, "t", [("retention.ms", "1000")]), (4, "", [])], False)))
    CASES.append((33, _v, "response", getattr(admin, f"AlterConfigsResponse_v{_v}"),
                  (0, [(0, None, 2, "t"), (42, "Invalid config value", 4, "")])))
    CASES.append((37, _v, "request", None,  # kafka-python nests count and assignment in a struct: same bytes
                  ([("t", 4, [([1, 2],)]), ("u", 2, None)], 30000, True)))
    CASES.append((37, _v, "response", getattr(admin, f"CreatePartitionsResponse_v{_v}"),
                  (0, [("t", 0, None), ("u", 37, "Topic already has 2 partitions.")])))
CASES.append((44, 0, "request", None, ([(2, "t", [("retention.ms", 0, "1000"), ("segment.ms", 1, None)])], True)))
CASES.append((44, 0, "response", None, (0, [(0, None, 2, "t")])))
# Flexible versions (KIP-482): same values, compact encodings and empty tag buffers; a FlexibleSchema struct ends
# with its known tagged fields and then the unknown ones.
_NO_TAGS: list = []
_creatable_flexible = ("t", -1, -1, [(0, [1, 2], _NO_TAGS), (1, [2, 3], _NO_TAGS)],
                       [("retention.ms", "1000", _NO_TAGS), ("cleanup.policy", None, _NO_TAGS)], _NO_TAGS)
for _v in (5, 6):
    CASES.append((19, _v, "request", None, ([_creatable_flexible, ("u", 3, 2, [], [], _NO_TAGS)], 30000, False,
                                            _NO_TAGS)))
    _configs = [("retention.ms", "1000", False, 1, False, _NO_TAGS)]
    CASES.append((19, _v, "response", None, (0, [("t", 0, None, 2, 3, _configs, 0, _NO_TAGS),
                                                 ("u", 36, "Topic 'u' already exists.", -1, -1, None, 0, _NO_TAGS)],
                                             _NO_TAGS)))
for _v in (4, 5):
    CASES.append((20, _v, "request", None, (["t", "u"], 30000, _NO_TAGS)))
    CASES.append((20, _v, "response", None, (0, [("t", 0) + ((None,) if _v >= 5 else ()) + (_NO_TAGS,)], _NO_TAGS)))
for _v in (2, 3):
    CASES.append((37, _v, "request", None, ([("t", 4, [([1, 2], _NO_TAGS)], _NO_TAGS), ("u", 2, None, _NO_TAGS)],
                                            30000, False, _NO_TAGS)))
    CASES.append((37, _v, "response", None, (0, [("t", 0, None, _NO_TAGS)], _NO_TAGS)))
CASES.append((32, 4, "request", None, ([(2, "t", None, _NO_TAGS), (4, "1", ["a"], _NO_TAGS)], True, True, _NO_TAGS)))
CASES.append((32, 4, "response", None, (0, [(0, None, 2, "t", [("retention.ms", "1", False, 1, False,
                                                                   [("retention.ms", "1", 1, _NO_TAGS)], 5, "doc",
                                                                   _NO_TAGS)], _NO_TAGS)], _NO_TAGS)))
CASES.append((33, 2, "request", None, ([(2, "t", [("retention.ms", None, _NO_TAGS)], _NO_TAGS)], True, _NO_TAGS)))
CASES.append((33, 2, "response", None, (0, [(42, "bad", 2, "t", _NO_TAGS)], _NO_TAGS)))
CASES.append((44, 1, "request", None, ([(4, "", [("message.max.bytes", 0, "4000", _NO_TAGS)], _NO_TAGS)], False,
                                       _NO_TAGS)))
CASES.append((44, 1, "response", None, (0, [(0, None, 4, "", _NO_TAGS)], _NO_TAGS)))
for _v in range(2):
    CASES.append((42, _v, "request", None, (["g", "h"],)))
    CASES.append((42, _v, "response", None, (0, [("g", 0), ("h", 68)])))
CASES.append((42, 2, "request", None, (["g"], _NO_TAGS)))
CASES.append((42, 2, "response", None, (0, [("g", 69, _NO_TAGS)], _NO_TAGS)))
for _v in range(2):
    CASES.append((35, _v, "request", None, (None,)))
    CASES.append((35, _v, "response", None, (0, [(0, "/d", [("t", [(0, 4096, 0, False)])])])))
CASES.append((35, 2, "request", None, ([("t", [0], _NO_TAGS)], _NO_TAGS)))
CASES.append((35, 2, "response", None, (0, [(0, "/d", [("t", [(0, 1, 0, False, _NO_TAGS)], _NO_TAGS)], _NO_TAGS)],
                                        _NO_TAGS)))
CASES.append((47, 0, "request", None, ("g", [("t", [(0,), (1,)])])))
CASES.append((47, 0, "response", None, (0, 0, [("t", [(0, 0), (1, 86)])])))
for _v in range(2):
    CASES.append((21, _v, "request", None, ([("t", [(0, 10), (1, -1)])], 30000)))
    CASES.append((21, _v, "response", None, (0, [("t", [(0, 10, 0), (1, -1, 6)])])))
CASES.append((21, 2, "request", None, ([("t", [(0, 10, _NO_TAGS)], _NO_TAGS)], 30000, _NO_TAGS)))
CASES.append((21, 2, "response", None, (0, [("t", [(0, 7, 7, _NO_TAGS)], _NO_TAGS)], _NO_TAGS)))
CASES.append((45, 0, "request", None, (30000, [("t", [(0, [2, 3], _NO_TAGS), (1, None, _NO_TAGS)], _NO_TAGS)],
                                       _NO_TAGS)))
CASES.append((45, 0, "response", None, (0, 0, None, [("t", [(0, 0, None, _NO_TAGS), (1, 85, "none", _NO_TAGS)],
                                                        _NO_TAGS)], _NO_TAGS)))
CASES.append((46, 0, "request", None, (30000, None, _NO_TAGS)))
CASES.append((46, 0, "response", None, (0, 0, None, [("t", [(0, [1, 2, 3], [3], [1], _NO_TAGS)], _NO_TAGS)],
                                        _NO_TAGS)))
CASES.append((43, 0, "request", None, ([("t", [0, 1])], 30000)))
CASES.append((43, 0, "response", None, (0, [("t", [(0, 0, None), (1, 84, "Leader is already preferred.")])])))
CASES.append((43, 1, "request", None, (0, None, 30000)))
CASES.append((43, 1, "response", None, (0, 0, [("t", [(0, 80, "no")])])))
CASES.append((43, 2, "request", None, (1, [("t", [0], _NO_TAGS)], 30000, _NO_TAGS)))
CASES.append((43, 2, "response", None, (0, 41, [("t", [(0, 41, None, _NO_TAGS)], _NO_TAGS)], _NO_TAGS)))
CASES.append((60, 0, "request", None, (True, _NO_TAGS)))
CASES.append((60, 0, "response", None, (0, 0, None, "id", 2, [(1, "h", 9092, None, _NO_TAGS)], -(2**31), _NO_TAGS)))
CASES.append((60, 1, "request", None, (False, 1, _NO_TAGS)))
CASES.append((60, 1, "response", None, (0, 114, "wrong", 1, "id", -1, [], -(2**31), _NO_TAGS)))

# DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v0 and v1 (v1 adds the pattern type)
for _v in (0, 1):
    _pt = (3,) if _v else ()
    CASES.append((29, _v, "request", getattr(admin, f"DescribeAclsRequest_v{_v}"), (2, "t", *_pt, "User:a", "*", 3, 3)))
    CASES.append((29, _v, "response", getattr(admin, f"DescribeAclsResponse_v{_v}"),
                  (0, 0, None, [(2, "t", *_pt, [("User:a", "*", 3, 3)])])))
    CASES.append((30, _v, "request", getattr(admin, f"CreateAclsRequest_v{_v}"),
                  ([(2, "t", *_pt, "User:a", "*", 4, 3)],)))
    CASES.append((30, _v, "response", getattr(admin, f"CreateAclsResponse_v{_v}"), (0, [(0, None), (42, "bad")])))
    CASES.append((31, _v, "request", getattr(admin, f"DeleteAclsRequest_v{_v}"),
                  ([(1, None, *_pt, None, None, 1, 1)],)))
    CASES.append((31, _v, "response", getattr(admin, f"DeleteAclsResponse_v{_v}"),
                  (0, [(0, None, [(0, None, 2, "t", *_pt, "User:a", "*", 3, 3)])])))
# DescribeClientQuotas (48) v0, against kafka-python; AlterClientQuotas (49) v0 round-trips (kafka-python lacks it)
CASES.append((48, 0, "request", admin.DescribeClientQuotasRequest_v0, ([("user", 0, "alice"), ("client-id", 1, None)],
                                                                        True)))
CASES.append((48, 0, "response", admin.DescribeClientQuotasResponse_v0,
              (0, 0, None, [([("user", "alice")], [("producer_byte_rate", 1048576.0)])])))
CASES.append((49, 0, "request", None, ([([("user", None)], [("consumer_byte_rate", 2.5e6, False)])], False)))
CASES.append((49, 0, "response", None, (0, [(42, "bad key", [("client-id", "app")])])))
# Describe/AlterUserScramCredentials (50, 51) v0, flexible (each struct ends with its unknown tagged fields, []):
# round trips (kafka-python lacks them)
CASES.append((50, 0, "request", None, ([("alice", [])], [])))
CASES.append((50, 0, "response", None, (0, 0, None, [("alice", 0, None, [(1, 4096, []), (2, 8192, [])], [])], [])))
CASES.append((51, 0, "request", None, ([("bob", 2, [])], [("alice", 1, 4096, b"salt" * 8, b"x" * 32, [])], [])))
CASES.append((51, 0, "response", None, (0, [("alice", 0, None, []), ("bob", 91, "no such credential", [])], [])))
# SaslHandshake (17) and SaslAuthenticate (36), v0 and v1
for _v in (0, 1):
    CASES.append((17, _v, "request", getattr(sasl_handshake, f"SaslHandshakeRequest_v{_v}"), ("SCRAM-SHA-256",)))
    CASES.append((17, _v, "response", getattr(sasl_handshake, f"SaslHandshakeResponse_v{_v}"),
                  (33, ["PLAIN", "SCRAM-SHA-512"])))
    CASES.append((36, _v, "request", getattr(sasl_authenticate, f"SaslAuthenticateRequest_v{_v}"),
                  (b"n,,n=alice,r=abc",)))
    CASES.append((36, _v, "response", getattr(sasl_authenticate, f"SaslAuthenticateResponse_v{_v}"),
                  (58, "Authentication failed", b"", *((0,) if _v else ()))))

def value_of(api_key, version, kind):
    return next(c[4] for c in CASES if c[:3] == (api_key, version, kind))


def plain(value):
    if isinstance(value, tuple):
        return tuple(plain(item) for item in value)
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, (memoryview, bytearray)):
        return bytes(value)
    return value


def case_id(case):
    return f"{case[0]}v{case[1]}-{case[2]}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_round_trip_and_golden(case):
    api_key, version, kind, golden_class, value = case
    schema = (REQUEST_SCHEMAS if kind == "request" else RESPONSE_SCHEMAS)[(api_key, version)]
    encoded = schema.encode(value)
    if golden_class is not None:
        assert encoded == golden_class(*value).encode()
    decoded, offset = schema.decode(memoryview(encoded), 0)
    assert offset == len(encoded)
    assert plain(decoded) == plain(value)
    assert schema.encode(decoded) == encoded


_ADMIN_APIS = {19: "CreateTopics", 20: "DeleteTopics", 21: "DeleteRecords", 32: "DescribeConfigs", 33: "AlterConfigs",
               35: "DescribeLogDirs",
               37: "CreatePartitions", 42: "DeleteGroups", 43: "ElectLeaders", 44: "IncrementalAlterConfigs",
               45: "AlterPartitionReassignments", 46: "ListPartitionReassignments", 47: "OffsetDelete",
               60: "DescribeCluster"}


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in _ADMIN_APIS and c[3] is None], ids=case_id)
def test_admin_schemas_kafka_python_has_no_class_for_read_back_byte_for_byte(case):
    """Where kafka-python's hand-written classes lack a version, its classes generated from Kafka's message JSON
    (kafka.protocol.admin) decode our bytes and encode them back unchanged."""
    from kafka.protocol import admin as generated
    from kafka.protocol.consumer import group as generated_groups

    api_key, version, kind, _, value = case
    encoded = (REQUEST_SCHEMAS if kind == "request" else RESPONSE_SCHEMAS)[(api_key, version)].encode(value)
    name = _ADMIN_APIS[api_key] + kind.title()
    cls = getattr(generated, name, None) or getattr(generated_groups, name)
    assert cls.min_version <= version <= cls.max_version
    decoded = cls.decode(encoded, version=version)
    rebuilt = cls(**{name: getattr(decoded, name) for name in cls.fields})  # a decoded top level cannot encode
    assert bytes(rebuilt.encode(version=version)) == encoded


def test_every_registered_schema_has_a_case():
    covered = {(c[0], c[1], c[2]) for c in CASES} | {(3, 0, "request"), (3, 1, "request")}
    covered |= {(3, 0, "response"), (3, 1, "response")}
    covered |= {(18, v, k) for v in (0, 1, 2) for k in ("request", "response")}
    covered |= {(18, 3, "request"), (18, 3, "response")}  # test_api_versions_v3.py, with clients' recorded bytes
    # test_transaction_api_schemas.py, byte for byte against kafka-python's classes
    transactional = [(22, v) for v in (2, 3, 4)] + [(10, 3)] + [(24, v) for v in range(4)]
    transactional += [(25, v) for v in range(4)] + [(26, v) for v in range(4)] + [(27, 0), (27, 1)]
    transactional += [(28, v) for v in range(4)] + [(9, 6), (9, 7), (61, 0), (65, 0), (66, 0)]
    covered |= {(k, v, kind) for k, v in transactional for kind in ("request", "response")}
    # The metadata quorum's (Fetch 12-16, Vote, BeginQuorumEpoch, EndQuorumEpoch, DescribeQuorum, FetchSnapshot):
    # tests/unit/raft/test_wire.py, round trips and bytes written out by hand from Kafka 3.7's message JSON.
    covered |= {(1, v, k) for v in range(12, 17) for k in ("request", "response")}
    covered |= {(key, 0, k) for key in (52, 53, 54, 55, 59) for k in ("request", "response")}
    covered |= {(55, 1, "request"), (55, 1, "response")}
    # ... and the later fixes' versions (Fetch 17, Vote 1-2, BeginQuorumEpoch 1), from Kafka 3.8's and 4.0's JSON
    covered |= {(key, v, k) for key, v in ((1, 17), (52, 1), (52, 2), (53, 1)) for k in ("request", "response")}
    # The quorum controller's (AlterPartition 0-3, BrokerRegistration, BrokerHeartbeat, UnregisterBroker,
    # AllocateProducerIds): tests/unit/protocol/test_quorum_controller_schemas.py.
    covered |= {(56, v, k) for v in range(4) for k in ("request", "response")}
    covered |= {(key, 0, k) for key in (62, 63, 64, 67) for k in ("request", "response")}
    registered = {(k, v, "request") for k, v in REQUEST_SCHEMAS}
    registered |= {(k, v, "response") for k, v in RESPONSE_SCHEMAS}
    assert registered == covered


def test_leader_and_isr_v0_bytes():
    value = value_of(4, 0, "request")
    expected = (
        struct.pack(">ii", 1, 3)
        + struct.pack(">i", 1)
        + struct.pack(">h", 1) + b"t"
        + struct.pack(">iiii", 0, 3, 1, 7)
        + struct.pack(">iii", 2, 1, 2)
        + struct.pack(">i", 12)
        + struct.pack(">iiii", 3, 1, 2, 3)
        + struct.pack(">i", 1) + struct.pack(">ih", 1, 1) + b"h" + struct.pack(">i", 9092)
    )
    assert REQUEST_SCHEMAS[(4, 0)].encode(value) == expected


def test_update_metadata_and_stop_replica_v0_bytes():
    value = value_of(6, 0, "request")
    expected = (
        struct.pack(">iii", 1, 3, 1)
        + struct.pack(">h", 1) + b"t"
        + struct.pack(">iiiiiiii", 0, 3, 1, 7, 1, 1, 12, 2) + struct.pack(">ii", 1, 2)
        + struct.pack(">iih", 1, 1, 1) + b"h" + struct.pack(">i", 9092)
    )
    assert REQUEST_SCHEMAS[(6, 0)].encode(value) == expected
    expected = (
        struct.pack(">iibi", 1, 3, 1, 2)
        + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
        + struct.pack(">h", 1) + b"u" + struct.pack(">i", 2)
    )
    assert REQUEST_SCHEMAS[(5, 0)].encode(value_of(5, 0, "request")) == expected


def test_controlled_shutdown_v0_full_frame_has_no_client_id():
    raw = encode_request(7, 0, 5, "broker-2", {"broker_id": 2})
    assert raw == struct.pack(">ihhii", 12, 7, 0, 5, 2)
    frame = bytearray(raw[4:])
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(7, 0, 5, None)
    assert decode_request(header, frame, offset).broker_id == 2
    out = encode_response(header, {"error_code": 0, "partitions_remaining": [("t", 1)]})
    correlation_id, body = decode_response(7, 0, out[4:])
    assert correlation_id == 5 and body.partitions_remaining[0].partition == 1


def test_produce_records_are_writable_views_of_the_frame():
    raw = encode_request(0, 2, 1, "c", {"acks": 1, "timeout_ms": 100, "topics": [("t", [(0, MSGS)])]})
    frame = bytearray(raw[4:])
    header, offset = parse_request_header(frame)
    request = decode_request(header, frame, offset)
    records = request.topics[0].partitions[0].records
    assert isinstance(records, memoryview) and records == MSGS
    struct.pack_into(">q", records, 0, 77)  # assign the offset in place
    assert frame.find(struct.pack(">q", 77)) > 0


def _names(schema, *path):
    """Field names of a schema, or of the struct inside its (nested) arrays named by ``path``."""
    for name in path:
        schema = dict(schema.fields)[name].element
    return [name for name, _ in schema.fields]


def test_group_api_fields_appear_and_disappear_by_version():
    assert [_names(REQUEST_SCHEMAS[(10, v)]) for v in range(3)] == [
        ["group_id"], ["coordinator_key", "coordinator_type"], ["coordinator_key", "coordinator_type"]]
    assert [_names(RESPONSE_SCHEMAS[(10, v)])[:3] for v in range(3)] == [
        ["error_code", "node_id", "host"], *[["throttle_time_ms", "error_code", "error_message"]] * 2]
    assert ["rebalance_timeout" in _names(REQUEST_SCHEMAS[(11, v)]) for v in range(4)] == [False, True, True, True]
    assert ["throttle_time_ms" in _names(RESPONSE_SCHEMAS[(11, v)]) for v in range(4)] == [False, False, True, True]
    for key in (12, 13, 14, 15, 16):
        assert [_names(RESPONSE_SCHEMAS[(key, v)])[0] == "throttle_time_ms" for v in range(3)] == [False, True, True]
    assert ["retention_time_ms" in _names(REQUEST_SCHEMAS[(8, v)]) for v in range(7)] == [
        False, False, True, True, True, False, False]
    assert [_names(REQUEST_SCHEMAS[(8, v)], "topics", "partitions") for v in (0, 1, 5, 6)] == [
        ["partition", "offset", "metadata"], ["partition", "offset", "timestamp", "metadata"],
        ["partition", "offset", "metadata"], ["partition", "offset", "committed_leader_epoch", "metadata"]]
    assert ["throttle_time_ms" in _names(RESPONSE_SCHEMAS[(8, v)]) for v in range(7)] == [False] * 3 + [True] * 4
    assert [_names(RESPONSE_SCHEMAS[(9, v)]) for v in (1, 2, 3)] == [
        ["topics"], ["topics", "error_code"], ["throttle_time_ms", "topics", "error_code"]]
    assert ["committed_leader_epoch" in _names(RESPONSE_SCHEMAS[(9, v)], "topics", "partitions")
            for v in range(6)] == [False] * 5 + [True]


def test_offset_fetch_null_topics_only_from_v2():
    assert decode_request(RequestHeader(9, 2, 1, "c"), REQUEST_SCHEMAS[(9, 2)].encode(("g", None)), 0).topics is None
    # v0 and v1 cannot say "every offset": a -1 count reads as no topics, as 0.8.2's readers did
    null_topics = struct.pack(">h", 1) + b"g" + struct.pack(">i", -1)
    assert decode_request(RequestHeader(9, 1, 1, "c"), null_topics, 0).topics == []
    with pytest.raises(LocalProtocolError, match="topics"):
        REQUEST_SCHEMAS[(9, 1)].encode(("g", None))

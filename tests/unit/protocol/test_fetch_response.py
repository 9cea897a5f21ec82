"""Fetch responses as header pieces plus sendfile slots equal the generic encoder's bytes."""

import pytest

from zkbroker.protocol.api import decode_response, encode_response
from zkbroker.protocol.errors import LocalProtocolError
from zkbroker.protocol.fetch_response import FileRange, encode_fetch_response, join_pieces
from zkbroker.protocol.headers import RequestHeader

SEGMENT = bytes(range(256)) * 8


def read_range(slot):
    return SEGMENT[slot.position : slot.position + slot.size]


TOPICS = [
    ("t", [(0, 0, 500, FileRange("seg0", 10, 300)), (1, 1, -1, None), (2, 0, 7, b"inline")]),
    {"topic": "u", "partitions": [{"partition": 3, "error_code": 0, "high_watermark": 9,
                                   "records": FileRange("seg1", 0, 0)}]},
    ("empty", []),
]


def generic_topics():
    out = []
    for entry in TOPICS:
        topic, partitions = (entry["topic"], entry["partitions"]) if isinstance(entry, dict) else entry
        rows = []
        for p in partitions:
            if isinstance(p, dict):
                p = (p["partition"], p["error_code"], p["high_watermark"], p["records"])
            records = p[3]
            if isinstance(records, FileRange):
                records = read_range(records)
            rows.append((p[0], p[1], p[2], records if records is not None else b""))
        out.append((topic, rows))
    return out


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_pieces_equal_the_generic_encoding(version):
    pieces = encode_fetch_response(31, version, TOPICS, throttle_time_ms=4)
    slots = [p for p in pieces if not isinstance(p, bytes)]
    assert [s.file for s in slots] == ["seg0", "seg1"]  # slots are passed through, not read
    body = {"topics": generic_topics()}
    if version:
        body = {"throttle_time_ms": 4, **body}
    expected = encode_response(RequestHeader(1, version, 31, "c"), body)
    assert join_pieces(pieces, read_range) == expected
    correlation_id, decoded = decode_response(1, version, expected[4:])
    assert correlation_id == 31
    assert bytes(decoded.topics[0].partitions[0].records) == read_range(TOPICS[0][1][0][3])


def test_empty_response():
    pieces = encode_fetch_response(1, 0, [])
    assert pieces == [b"\x00\x00\x00\x08\x00\x00\x00\x01\x00\x00\x00\x00"]


def test_invalid_input_is_a_local_error():
    with pytest.raises(LocalProtocolError):
        encode_fetch_response(1, 11, [])
    with pytest.raises(LocalProtocolError):
        encode_fetch_response(1, 0, [("t", [(0, 0, "x", b"")])])
    with pytest.raises(LocalProtocolError):
        encode_fetch_response(1, 0, [("t", [(0, 0)])])


@pytest.mark.parametrize("version", range(4, 11))
@pytest.mark.parametrize("isolation_level", [0, 1])
def test_v4_and_later_pieces_equal_the_generic_encoding(version, isolation_level):
    topics = [("t", [(0, 0, 500, FileRange("seg0", 10, 300), 480, 3), (1, 1, -1, None)])]
    pieces = encode_fetch_response(31, version, topics, throttle_time_ms=4, isolation_level=isolation_level)
    aborted = [] if isolation_level else None
    rows = [(0, 0, 500, 480) + ((3,) if version >= 5 else ()) + (aborted, read_range(topics[0][1][0][3])),
            (1, 1, -1, -1) + ((-1,) if version >= 5 else ()) + (aborted, b"")]
    body = {"throttle_time_ms": 4, "topics": [("t", rows)]}
    if version >= 7:
        body = {"throttle_time_ms": 4, "error_code": 0, "session_id": 0, "topics": [("t", rows)]}
    expected = encode_response(RequestHeader(1, version, 31, "c"), body)
    assert join_pieces(pieces, read_range) == expected


def test_versions_past_10_are_refused():
    with pytest.raises(LocalProtocolError):
        encode_fetch_response(1, 11, [])


@pytest.mark.parametrize("version", [4, 5, 10])
def test_a_partitions_aborted_transactions_equal_the_generic_encoding(version):
    txns = [(7, 100), (9, 140)]
    topics = [("t", [(0, 0, 500, FileRange("seg0", 10, 300), 480, 3, txns), (1, 0, 9, None, 9, 0, None)])]
    pieces = encode_fetch_response(31, version, topics, isolation_level=1)
    rows = [(0, 0, 500, 480) + ((3,) if version >= 5 else ()) + (txns, read_range(topics[0][1][0][3])),
            (1, 0, 9, 9) + ((0,) if version >= 5 else ()) + ([], b"")]
    body = {"throttle_time_ms": 0, "topics": [("t", rows)]}
    if version >= 7:
        body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "topics": [("t", rows)]}
    assert join_pieces(pieces, read_range) == encode_response(RequestHeader(1, version, 31, "c"), body)

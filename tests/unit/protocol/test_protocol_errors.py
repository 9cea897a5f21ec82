import pytest

from zkbroker.protocol import errors
from zkbroker.protocol.errors import (
    BrokerResponseError,
    ErrorCode,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    for_code,
)


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("NONE", 0),
        ("UNKNOWN", -1),
        ("OFFSET_OUT_OF_RANGE", 1),
        ("CORRUPT_MESSAGE", 2),
        ("UNKNOWN_TOPIC_OR_PARTITION", 3),
        ("INVALID_FETCH_SIZE", 4),
        ("LEADER_NOT_AVAILABLE", 5),
        ("NOT_LEADER_FOR_PARTITION", 6),
        ("REQUEST_TIMED_OUT", 7),
        ("BROKER_NOT_AVAILABLE", 8),
        ("REPLICA_NOT_AVAILABLE", 9),
        ("MESSAGE_TOO_LARGE", 10),
        ("STALE_CONTROLLER_EPOCH", 11),
        ("OFFSET_METADATA_TOO_LARGE", 12),
        ("NETWORK_EXCEPTION", 13),
        ("GROUP_LOAD_IN_PROGRESS", 14),
        ("GROUP_COORDINATOR_NOT_AVAILABLE", 15),
        ("NOT_COORDINATOR", 16),
        ("INVALID_TOPIC", 17),
        ("RECORD_LIST_TOO_LARGE", 18),
        ("NOT_ENOUGH_REPLICAS", 19),
        ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", 20),
        ("UNSUPPORTED_VERSION", 35),
    ],
)
def test_kafka_numbers(name, code):
    assert ErrorCode[name] == code
    assert for_code(code).errno == code
    assert for_code(code).name == name


def test_flags_match_the_clients():
    # kafka-python errors.py: 3, 5, 6, 9 invalidate metadata; 7, 14, 15, 16, 19, 20 retriable.
    for code in (3, 5, 6, 9):
        assert for_code(code).invalid_metadata and for_code(code).retriable
    for code in (7, 14, 15, 16, 19, 20):
        assert for_code(code).retriable and not for_code(code).invalid_metadata
    for code in (1, 10, 35):
        assert not for_code(code).retriable


def test_one_class_per_code_and_unknown_codes():
    assert for_code(12345) is errors.UnknownError
    assert issubclass(errors.NotLeaderForPartitionError, BrokerResponseError)
    classes = [for_code(int(code)) for code in ErrorCode]
    assert len(set(classes)) == len(classes)
    assert str(errors.NotLeaderForPartitionError("t-0")) == "[Error 6] NOT_LEADER_FOR_PARTITION: t-0"


def test_protocol_error_split():
    assert issubclass(RemoteProtocolError, ProtocolError)
    assert issubclass(LocalProtocolError, ProtocolError)
    assert not issubclass(RemoteProtocolError, LocalProtocolError)
    assert RemoteProtocolError("x").error_code == ErrorCode.CORRUPT_MESSAGE
    assert RemoteProtocolError("x", error_code=35).error_code == 35

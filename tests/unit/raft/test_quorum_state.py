"""The quorum-state file, byte for byte as Kafka 3.7's FileQuorumStateStore writes it."""

from __future__ import annotations

import pytest

from zkbroker.raft import quorum_state
from zkbroker.raft.quorum_state import ElectionState, QuorumStateError

VOTERS = frozenset({3001, 3002, 3003})


def test_a_voted_state_is_written_as_kafka_writes_it():
    text = quorum_state.encode(ElectionState(5, voted_id=3002, voters=VOTERS))
    assert text == ('{"clusterId":"","leaderId":-1,"leaderEpoch":5,"votedId":3002,"appliedOffset":0,'
                    '"currentVoters":[{"voterId":3001},{"voterId":3002},{"voterId":3003}],"data_version":0}')


def test_a_leader_state_is_written_as_kafka_writes_it():
    text = quorum_state.encode(ElectionState(2, leader_id=3001, voters=VOTERS))
    assert text.startswith('{"clusterId":"","leaderId":3001,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,')


@pytest.mark.parametrize("state", [
    ElectionState(0, voters=VOTERS),
    ElectionState(7, voted_id=3003, voters=VOTERS),
    ElectionState(8, leader_id=3001, voters=VOTERS),
])
def test_encode_and_decode_round_trip(state):
    assert quorum_state.decode(quorum_state.encode(state)) == state


def test_the_file_is_replaced_durably_and_read_back(tmp_path):
    assert quorum_state.read_file(tmp_path) is None
    quorum_state.write_file(tmp_path, ElectionState(1, voted_id=3001, voters=VOTERS))
    quorum_state.write_file(tmp_path, ElectionState(2, leader_id=3002, voters=VOTERS))
    assert quorum_state.read_file(tmp_path) == ElectionState(2, leader_id=3002, voters=VOTERS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quorum-state"]
    assert not (tmp_path / "quorum-state").read_text().endswith("\n")


def test_a_file_kafka_wrote_is_read():
    text = ('{"clusterId":"","leaderId":3002,"leaderEpoch":9,"votedId":-1,"appliedOffset":0,'
            '"currentVoters":[{"voterId":3001},{"voterId":3002}],"data_version":0}')
    assert quorum_state.decode(text) == ElectionState(9, leader_id=3002, voters=frozenset({3001, 3002}))


@pytest.mark.parametrize("text, why", [
    ("", "not one line of JSON"),
    ("{not json", "not one line of JSON"),
    ('{"leaderId":1,"leaderEpoch":1,"votedId":-1}', "no data_version 0"),
    ('{"leaderId":1,"leaderEpoch":1,"votedId":-1,"data_version":1}', "no data_version 0"),
    ('{"leaderId":1,"votedId":-1,"data_version":0}', "missing or malformed"),
])
def test_a_malformed_file_is_refused_saying_why(text, why):
    with pytest.raises(QuorumStateError, match=why):
        quorum_state.decode(text)

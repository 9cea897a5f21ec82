"""The election rules of KIP-595, one per test: who gets a vote, when a candidate stands and backs off, what
the winner writes first, what is persisted before a vote leaves, and how a node resumes after a restart."""

from __future__ import annotations

import random

import pytest

from tests.unit.raft.helpers import VOTERS, log_of, make_node, persisted, pump, sends, stand
from zkbroker.raft import messages as m
from zkbroker.raft.config import QuorumConfig
from zkbroker.raft.effects import PersistQuorumState, Send, Timer
from zkbroker.raft.log import InMemoryLog
from zkbroker.raft.node import NotLeaderError, RaftNode
from zkbroker.raft.quorum_state import ElectionState
from zkbroker.raft.states import Candidate, Follower, Leader, Resigned, Unattached, Voted


def vote(epoch: int, candidate: int, last_epoch: int, last_offset: int) -> m.VoteRequest:
    return m.VoteRequest("", epoch, candidate, last_epoch, last_offset)


def answer(node: RaftNode, request: m.VoteRequest, now: int = 10) -> tuple[m.VoteResponse, list]:
    effects = node.handle(now, request.candidate_id, 99, request)
    (response,) = sends(effects, m.VoteResponse)
    return response.message, effects


@pytest.mark.parametrize("last_epoch, last_offset", [(2, 3), (2, 9), (3, 1)])
def test_a_vote_goes_to_a_candidate_whose_log_is_at_least_as_up_to_date(last_epoch, last_offset):
    node = make_node(log=log_of(1, 2, 2))  # last epoch 2, end offset 3
    response, _ = answer(node, vote(5, 2, last_epoch, last_offset))
    assert response.vote_granted and response.leader_epoch == 5
    assert isinstance(node.state, Voted) and node.state.voted_id == 2


@pytest.mark.parametrize("last_epoch, last_offset", [(2, 2), (1, 9), (0, 0)])
def test_no_vote_for_a_candidate_whose_log_is_behind_but_its_epoch_is_adopted(last_epoch, last_offset):
    node = make_node(log=log_of(1, 2, 2))
    response, effects = answer(node, vote(5, 2, last_epoch, last_offset))
    assert not response.vote_granted
    assert isinstance(node.state, Unattached) and node.epoch == 5
    assert persisted(effects) == [ElectionState(5, voters=VOTERS)]


def test_no_vote_for_a_candidate_of_an_older_epoch():
    node = make_node(stored=ElectionState(4, voters=VOTERS))
    response, _ = answer(node, vote(3, 2, 9, 9))
    assert (response.error_code, response.vote_granted, response.leader_epoch) == (m.FENCED_LEADER_EPOCH, False, 4)


def test_one_vote_per_epoch_and_the_same_answer_to_the_same_candidate():
    node = make_node()
    assert answer(node, vote(1, 2, 0, 0))[0].vote_granted
    assert not answer(node, vote(1, 3, 0, 0))[0].vote_granted
    response, effects = answer(node, vote(1, 2, 0, 0))
    assert response.vote_granted and persisted(effects) == []


def test_the_vote_is_persisted_before_the_answer_leaves():
    node = make_node()
    _, effects = answer(node, vote(1, 2, 0, 0))
    kinds = [type(e) for e in effects]
    assert kinds.index(PersistQuorumState) < kinds.index(Send)
    # As Kafka: the new epoch is written, then the vote in it, and only then does the answer leave.
    assert persisted(effects) == [ElectionState(1, voters=VOTERS), ElectionState(1, voted_id=2, voters=VOTERS)]


def test_the_election_timeout_is_randomized_between_one_and_two_timeouts():
    deadlines = {make_node(seed=seed, now=100).state.election_deadline for seed in range(200)}
    assert min(deadlines) >= 1100 and max(deadlines) < 2100 and len(deadlines) > 50


def test_a_candidate_persists_its_own_vote_and_asks_every_other_voter():
    node = make_node(log=log_of(1, 1))  # starts in epoch 1, the log's
    effects = stand(node)
    assert isinstance(node.state, Candidate) and node.epoch == 2
    assert persisted(effects) == [ElectionState(2, voted_id=1, voters=VOTERS)]
    requests = sends(effects, m.VoteRequest)
    assert sorted(s.destination for s in requests) == [2, 3]
    assert requests[0].message == vote(2, 1, 1, 2)


def test_the_winner_persists_its_leadership_then_writes_leader_change_first_in_its_epoch():
    node = make_node(log=log_of(1, 1))
    requests = sends(stand(node), m.VoteRequest)
    effects = node.handle(5, 2, requests[0].correlation_id, m.VoteResponse(m.NONE, -1, 2, True))
    assert isinstance(node.state, Leader) and node.state.epoch_start_offset == 2
    assert persisted(effects) == [ElectionState(2, leader_id=1, voters=VOTERS)]
    entry = node.log.read(2, 1000)[0]
    assert entry.epoch == 2 and entry.record == m.LeaderChangeMessage(1, (1, 2, 3), (1, 2))
    kinds = [type(e).__name__ for e in effects]
    assert kinds.index("PersistQuorumState") < kinds.index("FlushLog") < kinds.index("Send")
    begins = sends(effects, m.BeginQuorumEpochRequest)
    assert sorted(s.destination for s in begins) == [2, 3] and begins[0].message.leader_epoch == 2


def test_a_lone_voter_elects_itself_and_commits_at_once():
    node = make_node(voters=frozenset({1}))
    stand(node)
    assert isinstance(node.state, Leader) and node.high_watermark == 1
    node.append(1_000_000, [b"a"])
    assert isinstance(node.state, Leader) and node.high_watermark == 2  # no check-quorum with one voter


def test_a_candidate_rejected_by_a_majority_backs_off_before_standing_again():
    waited = set()
    for seed in range(12):
        node = make_node(voters=frozenset({1, 2, 3, 4, 5}), seed=seed)
        requests = {s.destination: s.correlation_id for s in sends(stand(node), m.VoteRequest)}
        now = node.state.election_deadline - 10
        for voter in (2, 3):
            node.handle(now, voter, requests[voter], m.VoteResponse(m.NONE, -1, 1, False))
        assert node.state.backoff_until is None  # two of five is not a majority yet
        node.handle(now, 4, requests[4], m.VoteResponse(m.NONE, -1, 1, False))
        if node.epoch == 1:  # the first retry waits 0 or 100 ms
            assert node.state.backoff_until == now + 100
            node.poll(now + 99)
            assert node.epoch == 1
            node.poll(now + 100)
        waited.add(node.epoch == 2 and node.state.retries == 2 and isinstance(node.state, Candidate))
    assert waited == {True}


def test_the_backoff_grows_with_the_retries_up_to_its_maximum():
    node = make_node(election_backoff_max_ms=1000)
    backoffs = [node._election_backoff(retries) for retries in (1, 2, 3, 8) for _ in range(300)]
    assert max(backoffs[:300]) == 100 and max(backoffs[300:600]) == 300 and max(backoffs[600:900]) == 700
    assert max(backoffs[900:]) == 1000 and all(b % 100 == 0 or b == 1000 for b in backoffs)


def test_a_candidate_whose_election_times_out_stands_again_in_the_next_epoch_after_backing_off():
    backoffs = set()
    for seed in range(12):
        node = make_node(seed=seed)
        stand(node)
        deadline = node.state.election_deadline
        effects = node.poll(deadline)
        if node.epoch == 1:
            backoffs.add(node.state.backoff_until - deadline)
            effects = node.poll(node.state.backoff_until)
        else:
            backoffs.add(0)
        assert node.epoch == 2 and len(sends(effects, m.VoteRequest)) == 2
    assert backoffs == {0, 100}


def test_a_response_naming_the_epochs_leader_makes_a_candidate_follow():
    node = make_node()
    requests = sends(stand(node), m.VoteRequest)
    node.handle(30, 2, requests[0].correlation_id, m.VoteResponse(m.NONE, 3, 1, False))
    assert isinstance(node.state, Follower) and (node.epoch, node.leader_id) == (1, 3)


def test_begin_quorum_epoch_makes_a_voter_follow_the_new_leader():
    node = make_node(node_id=2)
    answer(node, vote(1, 1, 0, 0))
    effects = node.handle(40, 1, 7, m.BeginQuorumEpochRequest("", 1, 1))
    assert isinstance(node.state, Follower) and node.leader_id == 1
    assert persisted(effects) == [ElectionState(1, leader_id=1, voters=VOTERS)]
    assert sends(effects, m.FetchRequest)[0].destination == 1


def test_a_late_response_to_an_abandoned_request_is_ignored():
    node = make_node()
    requests = sends(stand(node), m.VoteRequest)
    node.handle(30, 2, requests[0].correlation_id + 100, m.VoteResponse(m.NONE, -1, 1, True))
    assert isinstance(node.state, Candidate) and node.state.granted == {1}


def test_observers_never_vote_and_never_stand():
    node = make_node(node_id=101)
    response, _ = answer(node, vote(1, 2, 5, 5))
    assert not response.vote_granted
    effects = node.poll(1_000_000)
    assert isinstance(node.state, Unattached) and node.state.election_deadline is None
    assert sends(effects, m.VoteRequest) == [] and len(sends(effects, m.FetchRequest)) == 1


def test_append_on_a_node_that_does_not_lead_names_the_leader():
    node = make_node(stored=ElectionState(3, leader_id=2, voters=VOTERS))
    with pytest.raises(NotLeaderError) as info:
        node.append(0, [b"x"])
    assert (info.value.leader_id, info.value.epoch) == (2, 3)


@pytest.mark.parametrize("stored, state, epoch", [
    (None, Unattached, 0),
    (ElectionState(4, voters=VOTERS), Unattached, 4),
    (ElectionState(4, voted_id=2, voters=VOTERS), Voted, 4),
    (ElectionState(4, voted_id=1, voters=VOTERS), Candidate, 4),
    (ElectionState(4, leader_id=3, voters=VOTERS), Follower, 4),
    (ElectionState(4, leader_id=1, voters=VOTERS), Resigned, 4),  # a leader never resumes after a restart
])
def test_a_restarted_node_resumes_from_its_quorum_state(stored, state, epoch):
    node = make_node(stored=stored)
    assert isinstance(node.state, state) and node.epoch == epoch
    assert node.election_state().voted_id == (stored.voted_id if stored else None)


def test_a_log_ahead_of_the_quorum_state_sets_the_epoch_at_startup():
    node = RaftNode(QuorumConfig(node_id=1, voters=VOTERS), log_of(1, 6), ElectionState(4, voted_id=2, voters=VOTERS),
                    random.Random(1), 0)
    assert isinstance(node.state, Unattached) and node.epoch == 6
    assert persisted(node.poll(0)) == [ElectionState(6, voters=VOTERS)]


def test_a_higher_epoch_keeps_an_unattached_voters_election_timer():
    node = make_node()
    deadline = node.state.election_deadline
    answer(node, vote(3, 2, 0, 0))  # granted: a vote restarts the timer
    answer(node, vote(4, 3, -1, 0), now=20)  # refused (log behind): the timer runs on
    assert isinstance(node.state, Unattached) and node.epoch == 4
    assert node.state.election_deadline != deadline


def test_graceful_resignation_names_successors_by_their_end_offsets_and_the_first_stands_at_once():
    nodes = {n: make_node(node_id=n, seed=n) for n in VOTERS}
    leader = nodes[1]
    reachable = {1: leader, 3: nodes[3]}  # node 2 hears nothing, so it never fetches
    pump(reachable, 1, stand(leader), now=0)
    assert isinstance(leader.state, Leader)
    pump(reachable, 1, leader.append(10, [b"x"]), now=10)
    assert leader.state.end_offset(3) == 2 and leader.state.end_offset(2) == -1
    effects = leader.resign(20)
    assert isinstance(leader.state, Resigned)
    ends = sends(effects, m.EndQuorumEpochRequest)
    assert sorted(s.destination for s in ends) == [2, 3]
    assert ends[0].message.preferred_successors == (3, 2)
    nodes[3].handle(25, 1, 50, ends[0].message)
    assert isinstance(nodes[3].state, Candidate) and nodes[3].epoch == 2
    nodes[2].handle(25, 1, 51, ends[0].message)  # second in line: waits one backoff unit before standing
    assert isinstance(nodes[2].state, Follower) and nodes[2].state.fetch_deadline == 125


def test_effects_end_with_the_next_timer():
    node = make_node()
    effects = node.poll(0)
    assert effects == [Timer(node.state.election_deadline)]


def test_config_defaults_are_kafkas():
    config = QuorumConfig(node_id=1, voters=VOTERS)
    assert (config.election_timeout_ms, config.election_backoff_max_ms, config.fetch_timeout_ms) == (1000, 1000, 2000)
    assert config.check_quorum_timeout_ms == 3000 and config.majority == 2
    with pytest.raises(ValueError, match="controller.quorum.voters"):
        QuorumConfig(node_id=1, voters=frozenset())


def test_randomness_comes_only_from_the_callers_source():
    a = RaftNode(QuorumConfig(node_id=1, voters=VOTERS), InMemoryLog(), None, random.Random(3), 0)
    b = RaftNode(QuorumConfig(node_id=1, voters=VOTERS), InMemoryLog(), None, random.Random(3), 0)
    assert a.state.election_deadline == b.state.election_deadline


# --- Pre-Vote (KIP-996, the `kraft-fixed` switch) -------------------------------------------------------------


def pre_vote(epoch: int, candidate: int, last_epoch: int, last_offset: int) -> m.VoteRequest:
    return m.VoteRequest("", epoch, candidate, last_epoch, last_offset, pre_vote=True)


def test_a_pre_vote_is_granted_without_moving_the_voters_epoch_or_its_vote():
    node = make_node(log=log_of(1, 1), stored=ElectionState(1, voters=VOTERS))
    response, effects = answer(node, pre_vote(2, 2, 1, 2))
    assert response.vote_granted and response.leader_epoch == 1
    assert isinstance(node.state, Unattached) and node.epoch == 1 and persisted(effects) == []
    assert answer(node, vote(2, 3, 1, 2))[0].vote_granted  # its real vote is still free


def test_no_pre_vote_while_the_voter_hears_from_its_leader_nor_from_the_leader_itself():
    follower = make_node(stored=ElectionState(3, leader_id=3, voters=VOTERS))
    assert isinstance(follower.state, Follower)
    assert not answer(follower, pre_vote(4, 2, 0, 0), now=10)[0].vote_granted
    # Once its fetches have timed out it would vote (and the node stands itself, or already has).
    late = follower.state.fetch_deadline + 1
    assert answer(follower, pre_vote(4, 2, 0, 0), now=late)[0].vote_granted


def test_no_pre_vote_for_a_log_behind_the_voters():
    node = make_node(log=log_of(1, 2, 2))
    assert not answer(node, pre_vote(5, 2, 2, 2))[0].vote_granted


def test_with_pre_vote_a_timed_out_voter_asks_first_in_its_own_epoch_and_stands_only_with_a_majority():
    nodes = {n: make_node(n, stored=ElectionState(1, voters=VOTERS), pre_vote=True, seed=n) for n in VOTERS}
    first = min(nodes, key=lambda n: nodes[n].state.election_deadline)
    node = nodes[first]
    effects = stand(node)
    assert node.state.name == "prospective" and node.epoch == 1 and persisted(effects) == []
    asks = sends(effects, m.VoteRequest)
    assert asks and all(s.message.pre_vote and s.message.candidate_epoch == 2 for s in asks)
    pump(nodes, first, effects, now=node.state.election_deadline - 1)
    assert isinstance(node.state, Leader) and node.epoch == 2


def test_with_directory_ids_votes_name_the_voter_asked_and_one_formatted_again_grants_none():
    directories = {v: f"{v:022d}" for v in VOTERS}
    nodes = {n: make_node(n, stored=ElectionState(1, voters=VOTERS), seed=n, voter_directories=directories,
                          directory_id=directories[n]) for n in VOTERS}
    first = min(nodes, key=lambda n: nodes[n].state.election_deadline)
    asks = sends(stand(nodes[first]), m.VoteRequest)
    assert {(s.message.voter_id, s.message.voter_directory_id, s.message.candidate_directory_id) for s in asks} == {
        (s.destination, directories[s.destination], directories[first]) for s in asks}
    ask = asks[0]
    wiped = make_node(ask.destination, stored=ElectionState(1, voters=VOTERS), voter_directories=directories,
                      directory_id="x" * 22)  # its disk lost and formatted again: a new directory id
    assert not answer(wiped, ask.message)[0].vote_granted
    assert answer(nodes[ask.destination], ask.message)[0].vote_granted

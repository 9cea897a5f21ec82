"""The replication rules of KIP-595, one per test: Fetch with DivergingEpoch truncation, the high watermark
from a majority of voters and only past the leader's own epoch start, the fetch purgatory, check-quorum,
and observers that fetch but never count."""

from __future__ import annotations

from tests.unit.raft.helpers import VOTERS, log_of, make_node, pump, sends, stand
from zkbroker.raft import messages as m
from zkbroker.raft.effects import FlushLog, Send
from zkbroker.raft.node import RaftNode
from zkbroker.raft.quorum_state import ElectionState
from zkbroker.raft.states import Candidate, Follower, Leader, ReplicaState, Resigned, Voted


def elect(node: RaftNode, now: int = 0) -> None:
    """Makes `node` the leader of the next epoch with node 2's vote."""
    requests = sends(stand(node), m.VoteRequest)
    node.handle(now, 2, requests[0].correlation_id, m.VoteResponse(m.NONE, -1, node.epoch, True))
    assert isinstance(node.state, Leader)


def fetch(node: RaftNode, replica: int, offset: int, last_epoch: int, now: int = 100, max_wait_ms: int = 0,
          correlation_id: int = 1) -> list[Send]:
    request = m.FetchRequest("", replica, max_wait_ms, node.epoch, offset, last_epoch, 0, 1 << 20)
    return sends(node.handle(now, replica, correlation_id, request), m.FetchResponse)


def epochs(node: RaftNode) -> list[int]:
    return [e.epoch for e in node.log.read(0, 1 << 30)]


def test_the_leader_answers_a_fetch_past_the_divergence_with_the_epoch_end_offset():
    leader = make_node(log=log_of(1, 1, 1), stored=ElectionState(2, voters=VOTERS))
    elect(leader)  # epoch 3; LeaderChange at offset 3
    (response,) = fetch(leader, 2, offset=5, last_epoch=2)  # the follower has epoch 2 entries the leader lacks
    assert response.message.diverging_epoch == m.EpochEndOffset(1, 3)
    assert response.message.records == ()
    (response,) = fetch(leader, 2, offset=4, last_epoch=1)  # epoch 1 ends at 3 here: 4 is past it
    assert response.message.diverging_epoch == m.EpochEndOffset(1, 3)


def test_a_follower_truncates_to_the_diverging_epoch_then_fetches_the_leaders_log():
    leader = make_node(node_id=1, log=log_of(1, 1, 1), stored=ElectionState(2, voters=VOTERS))
    follower = make_node(node_id=2, log=log_of(1, 1, 2, 2, 2), stored=ElectionState(2, voters=VOTERS))
    elect(leader)
    truncations = []
    original = follower.log.truncate_to
    follower.log.truncate_to = lambda offset: (truncations.append(offset), original(offset))
    nodes = {1: leader, 2: follower}
    pump(nodes, 1, [Send(2, 1, m.BeginQuorumEpochRequest("", 1, leader.epoch))], now=10)
    assert truncations == [2]  # min(the follower's end of epoch 1 (2), the leader's (3))
    assert epochs(follower) == epochs(leader) == [1, 1, 1, 3]
    assert follower.log.read(0, 1 << 30) == leader.log.read(0, 1 << 30)
    assert leader.high_watermark == 4 and follower.high_watermark is None
    pump(nodes, 1, leader.poll(510), now=510)  # the parked fetch's max wait ends: it carries the high watermark
    assert follower.high_watermark == 4


def test_a_fetch_from_an_empty_log_is_valid_from_offset_zero():
    leader = make_node(log=log_of(1, 1), stored=ElectionState(1, voters=VOTERS))
    elect(leader)
    (response,) = fetch(leader, 3, offset=0, last_epoch=0)
    assert response.message.diverging_epoch is None and len(response.message.records) == 3


def test_the_high_watermark_waits_for_an_entry_of_the_leaders_own_epoch():
    leader = make_node(log=log_of(1, 1, 1), stored=ElectionState(1, voters=VOTERS))
    elect(leader)  # epoch 2 starts at offset 3
    fetch(leader, 2, offset=3, last_epoch=1)  # a majority holds offsets 0-2, all from epoch 1
    assert leader.high_watermark is None
    fetch(leader, 2, offset=4, last_epoch=2)  # and now the LeaderChange of epoch 2 as well
    assert leader.high_watermark == 4


def test_the_high_watermark_is_what_a_majority_of_voters_holds():
    leader = make_node(voters=frozenset({1, 2, 3, 4, 5}))
    stand(leader)
    for voter in (2, 3):
        leader.handle(0, voter, leader._inflight[voter][0], m.VoteResponse(m.NONE, -1, 1, True))
    leader.append(10, [b"a", b"b", b"c"])  # offsets 1-3 after the LeaderChange at 0
    fetch(leader, 2, offset=4, last_epoch=1)
    assert leader.high_watermark is None  # leader and node 2: two of five
    fetch(leader, 3, offset=2, last_epoch=1)
    assert leader.high_watermark == 2  # three of five hold offsets 0-1
    fetch(leader, 4, offset=3, last_epoch=1)
    assert leader.high_watermark == 3


def test_a_followers_high_watermark_never_passes_its_own_log_end():
    follower = make_node(node_id=2, stored=ElectionState(1, leader_id=1, voters=VOTERS), polled=False)
    (request,) = sends(follower.poll(0), m.FetchRequest)
    records = (m.LogEntry(0, 1, m.LeaderChangeMessage(1, (1, 2, 3), (1, 2))), m.LogEntry(1, 1, b"a"))
    response = m.FetchResponse(m.NONE, 5, 0, m.LeaderIdAndEpoch(1, 1), records=records)
    effects = follower.handle(10, 1, request.correlation_id, response)
    assert follower.log.end_offset == 2 and follower.high_watermark == 2
    kinds = [type(e) for e in effects]
    assert kinds.index(FlushLog) < kinds.index(Send)  # what the next Fetch acknowledges is on disk first


def test_a_fetch_with_nothing_new_is_parked_until_the_leader_appends():
    leader = make_node()
    elect(leader)
    fetch(leader, 2, offset=1, last_epoch=1)  # commits the LeaderChange
    assert fetch(leader, 2, offset=1, last_epoch=1, max_wait_ms=500, correlation_id=8) == []
    assert 2 in leader.state.parked
    answers = sends(leader.append(150, [b"x"]), m.FetchResponse)
    assert [(s.destination, s.correlation_id) for s in answers] == [(2, 8)]
    assert [e.record for e in answers[0].message.records] == [b"x"]


def test_a_parked_fetch_is_answered_empty_when_its_max_wait_ends():
    leader = make_node()
    elect(leader)
    fetch(leader, 2, offset=1, last_epoch=1, max_wait_ms=500, correlation_id=8)
    assert sends(leader.poll(599), m.FetchResponse) == []
    (answer,) = sends(leader.poll(600), m.FetchResponse)
    assert answer.correlation_id == 8 and answer.message.records == ()


def test_a_fetch_in_an_older_epoch_is_fenced_and_told_the_leader():
    leader = make_node(stored=ElectionState(4, voters=VOTERS))
    elect(leader)
    request = m.FetchRequest("", 2, 0, 3, 0, 0, 0, 1 << 20)
    (response,) = sends(leader.handle(10, 2, 1, request), m.FetchResponse)
    assert response.message.error_code == m.FENCED_LEADER_EPOCH
    assert response.message.current_leader == m.LeaderIdAndEpoch(1, 5)


def test_a_follower_told_of_a_newer_leader_follows_it():
    follower = make_node(node_id=2, stored=ElectionState(1, leader_id=1, voters=VOTERS), polled=False)
    (request,) = sends(follower.poll(0), m.FetchRequest)
    response = m.FetchResponse(m.FENCED_LEADER_EPOCH, -1, 0, m.LeaderIdAndEpoch(3, 2))
    follower.handle(5, 1, request.correlation_id, response)
    assert isinstance(follower.state, Follower) and (follower.epoch, follower.leader_id) == (2, 3)


def test_a_follower_that_hears_nothing_for_the_fetch_timeout_stands():
    follower = make_node(node_id=2, stored=ElectionState(1, leader_id=1, voters=VOTERS))
    follower.poll(1999)
    assert isinstance(follower.state, Follower)
    follower.poll(2000)
    assert isinstance(follower.state, Candidate) and follower.epoch == 2


def test_check_quorum_a_leader_no_majority_fetches_from_resigns_and_ends_its_epoch():
    leader = make_node()
    elect(leader)
    leader.poll(2999)
    assert isinstance(leader.state, Leader)
    effects = leader.poll(3000)  # 1.5 x controller.quorum.fetch.timeout.ms
    assert isinstance(leader.state, Resigned) and leader.epoch == 1
    assert sorted(s.destination for s in sends(effects, m.EndQuorumEpochRequest)) == [2, 3]


def test_check_quorum_one_fetching_voter_of_three_keeps_the_leader():
    leader = make_node()
    elect(leader)
    for now in range(1000, 20_000, 2000):
        fetch(leader, 2, offset=1, last_epoch=1, now=now, correlation_id=now)
        leader.poll(now + 1)
        assert isinstance(leader.state, Leader)


def test_observers_fetch_but_count_neither_for_the_high_watermark_nor_for_check_quorum():
    leader = make_node()
    elect(leader)
    for now in range(500, 3000, 500):
        fetch(leader, 101, offset=1, last_epoch=1, now=now, correlation_id=now)
        fetch(leader, 102, offset=1, last_epoch=1, now=now, correlation_id=now)
    assert leader.high_watermark is None
    assert {n: r.end_offset for n, r in leader.state.replicas.items()} == {101: 1, 102: 1}
    leader.poll(3000)
    assert isinstance(leader.state, Resigned)


def test_an_observer_finds_the_leader_through_any_voter_and_follows_it():
    nodes = {n: make_node(node_id=n, seed=n) for n in (1, 2, 3)}
    pump(nodes, 1, stand(nodes[1]), now=0)
    assert isinstance(nodes[1].state, Leader)
    nodes[101] = make_node(node_id=101, polled=False)
    (first,) = sends(nodes[101].poll(1), m.FetchRequest)
    pump(nodes, 101, [first], now=1)
    pump(nodes, 101, nodes[101].poll(2), now=2)
    assert isinstance(nodes[101].state, Follower) and nodes[101].leader_id == 1
    assert nodes[101].log.read(0, 1 << 20) == nodes[1].log.read(0, 1 << 20)
    assert nodes[101].high_watermark == nodes[1].high_watermark == 1
    assert 101 not in nodes[1].state.acknowledged


def test_the_leader_tracks_when_each_replica_last_fetched_and_was_caught_up():
    leader = make_node()
    elect(leader)  # log end 1
    fetch(leader, 2, offset=1, last_epoch=1, now=100)
    assert leader.state.replicas[2] == ReplicaState(1, 100, 100, 1)
    leader.append(150, [b"a", b"b"])  # log end 3
    fetch(leader, 2, offset=2, last_epoch=1, now=200, correlation_id=2)  # behind, but past the end at its last fetch
    assert leader.state.replicas[2] == ReplicaState(2, 200, 100, 3)
    leader.append(250, [b"c"])  # log end 4
    fetch(leader, 2, offset=3, last_epoch=1, now=300, correlation_id=3)  # caught up as of its fetch at 200
    assert leader.state.replicas[2].last_caught_up_ms == 200
    fetch(leader, 2, offset=4, last_epoch=1, now=400, correlation_id=4)
    assert leader.state.replicas[2].last_caught_up_ms == 400


def test_a_leader_that_learns_of_a_higher_epoch_steps_down_and_answers_its_parked_fetches():
    leader = make_node()
    elect(leader)
    fetch(leader, 2, offset=1, last_epoch=1, max_wait_ms=500, correlation_id=8)
    effects = leader.handle(50, 3, 9, m.VoteRequest("", 4, 3, 1, 1))
    assert isinstance(leader.state, Voted) and leader.epoch == 4
    (parked,) = [s for s in sends(effects, m.FetchResponse)]
    assert (parked.destination, parked.correlation_id) == (2, 8)
    assert parked.message.error_code == m.NOT_LEADER_OR_FOLLOWER
    assert parked.message.current_leader == m.LeaderIdAndEpoch(-1, 4)


def test_describe_quorum_is_the_leaders_view_of_every_replica_and_refused_elsewhere():
    leader = make_node(log=log_of(1, 1), stored=ElectionState(1, voters=VOTERS))
    elect(leader, now=0)  # epoch 2; LeaderChange at offset 2
    fetch(leader, 2, offset=3, last_epoch=2, now=100)
    fetch(leader, 7, offset=1, last_epoch=1, now=150)  # an observer
    described = leader.describe_quorum(now=200)
    assert (described.error_code, described.leader_id, described.leader_epoch, described.high_watermark) == (
        m.NONE, 1, 2, 3)
    assert described.current_voters == (m.ReplicaState(1, 3, 200, 200), m.ReplicaState(2, 3, 100, 100),
                                        m.ReplicaState(3, -1, -1, -1))
    assert described.observers == (m.ReplicaState(7, 1, 150, -1),)
    follower = make_node(node_id=2, stored=ElectionState(2, leader_id=1, voters=VOTERS))
    assert follower.describe_quorum(now=0).error_code == m.NOT_LEADER_OR_FOLLOWER


class _SnapshottedLog(type(log_of())):
    """The in-memory log with its first entries taken into a snapshot (a metadata log after deleting segments)."""

    def __init__(self, start: int, *epochs: int) -> None:
        super().__init__([m.LogEntry(i, e, b"x") for i, e in enumerate(epochs)])
        self._start = start

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def latest_snapshot(self) -> m.SnapshotId:
        return m.SnapshotId(self._start, 1)


def test_a_replica_fetching_below_the_log_start_is_told_the_latest_snapshot():
    leader = make_node(log=_SnapshottedLog(3, 1, 1, 1, 1, 1), stored=ElectionState(1, voters=VOTERS))
    elect(leader)
    (response,) = fetch(leader, 2, offset=1, last_epoch=1)
    assert response.message.snapshot_id == m.SnapshotId(3, 1) and response.message.records == ()
    (response,) = fetch(leader, 2, offset=4, last_epoch=1, correlation_id=2)
    assert response.message.snapshot_id is None

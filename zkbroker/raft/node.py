"""A KIP-595 Raft node (the role of Kafka's KafkaRaftClient and QuorumState), sans-I/O.

The driver owns the clock, the sockets, the disk and the randomness source; the node owns the decisions.
Inputs: `poll(now)` when a timer is due, `handle(now, source, correlation_id, message)` for every request or
response that arrives, `append(now, records)` on the leader, `resign(now)` for a graceful shutdown. Each
returns the effects to perform in order (effects.py): quorum-state writes and log flushes that must be
durable before what follows them, messages to send, and the next timer. The log is read and written
through the RaftLog interface (log.py).

The transitions (a higher epoch seen in any message always moves the node to it first):

    Unattached/Voted --election timeout--> Candidate --majority granted--> Leader
    Candidate --election timeout or majority rejected--> backoff --> Candidate (next epoch)
    (with Pre-Vote, KIP-996: every "--> Candidate" above and below goes through Prospective, which stays in its
    epoch and stands only once a majority says it would vote for it: --majority would--> Candidate)
    any --BeginQuorumEpoch, or a response naming the epoch's leader--> Follower
    Follower --fetch timeout--> Candidate (an observer: Unattached, then asks any voter who leads)
    Leader --check-quorum expired or resign()--> Resigned --election timeout--> Candidate
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable

from zkbroker.raft import messages as m
from zkbroker.raft.config import QuorumConfig
from zkbroker.raft.effects import Effect, FlushLog, PersistQuorumState, Send, Timer
from zkbroker.raft.log import RaftLog
from zkbroker.raft.quorum_state import ElectionState
from zkbroker.raft.states import (
    Candidate,
    EpochState,
    Follower,
    Leader,
    ParkedFetch,
    Prospective,
    ReplicaState,
    Resigned,
    Unattached,
    Voted,
)

logger = logging.getLogger(__name__)

# Kafka's RETRY_BACKOFF_BASE_MS: the unit of the election backoffs.
ELECTION_BACKOFF_BASE_MS = 100
FOREVER = 2**62


class NotLeaderError(Exception):
    """append() on a node that is not the leader; `leader_id` and `epoch` say whom to ask instead."""

    def __init__(self, leader_id: int | None, epoch: int) -> None:
        super().__init__(f"not the leader of epoch {epoch} (leader: {leader_id})")
        self.leader_id, self.epoch = leader_id, epoch


class RaftStateError(RuntimeError):
    """A message contradicts what this node knows in a way Raft rules out (two leaders in one epoch, a
    truncation below the high watermark): a bug somewhere in the quorum, never a network fault."""


class RaftNode:
    def __init__(self, config: QuorumConfig, log: RaftLog, stored: ElectionState | None, rng: random.Random,
                 now: int) -> None:
        """`stored` is the quorum-state read at startup (None on a fresh node). Call poll(now) next."""
        self.config = config
        self.node_id = config.node_id
        self.log = log
        self._rng = rng
        self._effects: list[Effect] = []
        self._next_correlation_id = 0
        self._inflight: dict[int, tuple[int, int]] = {}  # destination -> (correlation id, expires at)
        self._ready_at: dict[int, int] = {}  # destination -> no request before (retry backoff after an error)
        self.high_watermark: int | None = None  # not persisted: learnt again from the leader after a restart
        self.state: EpochState = self._initial_state(stored, now)

    # --- what the driver and the lab read -------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int | None:
        if isinstance(self.state, (Leader, Resigned)):
            return self.node_id
        if isinstance(self.state, (Follower, Prospective)):
            return self.state.leader_id
        return None

    @property
    def voted_id(self) -> int | None:
        if isinstance(self.state, (Voted, Prospective)):
            return self.state.voted_id
        if isinstance(self.state, Candidate):
            return self.node_id
        return None

    def election_state(self) -> ElectionState:
        """What quorum-state holds for the current state (a Resigned node still names itself leader)."""
        voted = None if self.leader_id is not None else self.voted_id
        return ElectionState(self.epoch, self.leader_id, voted, self.config.voters)

    def describe_quorum(self, now: int) -> m.DescribeQuorumResponse:
        """DescribeQuorum as the leader answers it (the leader's own state is "now"); any other node answers
        NOT_LEADER_OR_FOLLOWER, as Kafka's does."""
        state = self.state
        if not isinstance(state, Leader):
            return m.DescribeQuorumResponse(m.NOT_LEADER_OR_FOLLOWER, self._leader_or_none(), self.epoch, -1, (), ())

        def replica(node: int) -> m.ReplicaState:
            if node == self.node_id:
                return m.ReplicaState(node, self.log.end_offset, now, now)
            known = state.replicas.get(node)
            if known is None:
                return m.ReplicaState(node, -1, -1, -1)
            return m.ReplicaState(node, known.end_offset, known.last_fetch_ms, known.last_caught_up_ms)

        voters = tuple(replica(v) for v in sorted(self.config.voters))
        observers = tuple(replica(o) for o in sorted(set(state.replicas) - self.config.voters))
        hw = -1 if self.high_watermark is None else self.high_watermark
        return m.DescribeQuorumResponse(m.NONE, self.node_id, self.epoch, hw, voters, observers)

    # --- inputs ---------------------------------------------------------------------------------------------

    def poll(self, now: int) -> list[Effect]:
        self._poll(now)
        return self._finish(now)

    def handle(self, now: int, source: int, correlation_id: int, message: m.Message) -> list[Effect]:
        """A request gets its response among the effects; a response is taken only if it answers the request in
        flight to `source` (one at a time per destination, as Kafka's RequestManager). FetchSnapshot is the
        driver's: the node only names the latest snapshot to a replica whose fetch offset is below the log start."""
        request_handler = self._request_handlers.get(type(message))
        response_handler = self._response_handlers.get(type(message))
        if request_handler is not None:
            request_handler(self, now, source, correlation_id, message)
        elif response_handler is not None:
            expected = self._inflight.get(source)
            if expected is None or expected[0] != correlation_id:
                return self._finish(now)  # a response to a request this node no longer waits for
            del self._inflight[source]
            response_handler(self, now, source, message)
        self._poll(now)
        return self._finish(now)

    def append(self, now: int, records: Iterable[bytes]) -> list[Effect]:
        """Leader only: the records take offsets from the log end offset on, in this epoch."""
        state = self.state
        if not isinstance(state, Leader):
            raise NotLeaderError(self.leader_id, self.epoch)
        start = self.log.end_offset
        entries = [m.LogEntry(start + i, state.epoch, record) for i, record in enumerate(records)]
        if entries:
            self.log.append(entries)
            self._effects.append(FlushLog(self.log.end_offset))
            self._maybe_advance_high_watermark(now, state)
            self._complete_parked(now, state)
        self._poll(now)
        return self._finish(now)

    def resign(self, now: int) -> list[Effect]:
        """Graceful shutdown of a leader: EndQuorumEpoch names the best placed voters as successors."""
        if isinstance(self.state, Leader):
            self._to_resigned(now, self.state)
        self._poll(now)
        return self._finish(now)

    # --- startup --------------------------------------------------------------------------------------------

    def _initial_state(self, stored: ElectionState | None, now: int) -> EpochState:
        stored = stored or ElectionState(0, voters=self.config.voters)
        log_epoch = self.log.last_fetched_epoch
        if log_epoch > stored.epoch:
            # The log holds a later epoch than quorum-state: start there, knowing no leader.
            state: EpochState = Unattached(log_epoch, self._election_deadline(now))
            self._effects.append(PersistQuorumState(ElectionState(log_epoch, voters=self.config.voters)))
        elif stored.leader_id == self.node_id:
            # A leader never resumes leadership after a restart: it resigns and lets the voters elect again.
            others = self.config.voters - {self.node_id}
            state = Resigned(stored.epoch, self._election_deadline(now), tuple(sorted(others)), set(others))
        elif stored.voted_id == self.node_id and self.config.is_voter:
            state = Candidate(stored.epoch, 1, self._election_deadline(now), granted={self.node_id})
        elif stored.voted_id is not None and self.config.is_voter:
            state = Voted(stored.epoch, stored.voted_id, self._election_deadline(now))
        elif stored.leader_id is not None:
            state = Follower(stored.epoch, stored.leader_id, now + self.config.fetch_timeout_ms)
        else:
            state = Unattached(stored.epoch, self._election_deadline(now))
        logger.info("[RaftNode %d] Starting as %s in epoch %d", self.node_id, state.name, state.epoch)
        return state

    # --- timers and the requests each state keeps sending ----------------------------------------------------

    def _poll(self, now: int) -> None:
        """Acts on due timers and sends what the state keeps sending; again after each transition, so that a
        new state's first requests leave in the same step."""
        while True:
            state = self.state
            self._poll_state(now, state)
            if self.state is state:
                return

    def _poll_state(self, now: int, state: EpochState) -> None:
        if isinstance(state, (Unattached, Voted)):
            if state.election_deadline is not None and now >= state.election_deadline:
                self._start_election(now)
            elif not self.config.is_voter:
                self._fetch_from_any_voter(now)
        elif isinstance(state, (Candidate, Prospective)):
            pre_vote = isinstance(state, Prospective)
            if len(state.granted) >= self.config.majority:  # a lone voter restarted as candidate, or a won pre-vote
                if pre_vote:
                    self._to_candidate(now)
                else:
                    self._to_leader(now, state)
            elif state.backoff_until is not None:
                if now >= state.backoff_until:
                    self._start_election(now)
            elif now >= state.election_deadline:
                state.backoff_until = now + self._election_backoff(state.retries)
                if now >= state.backoff_until:
                    self._start_election(now)
            else:
                self._ask_for_votes(now, state, pre_vote)
        elif isinstance(state, Follower):
            if now >= state.fetch_deadline:
                if self.config.is_voter:
                    self._start_election(now)
                else:
                    self._to_unattached(now, state.epoch)
                    self._fetch_from_any_voter(now)
            elif self._can_send(state.leader_id, now):
                self._send_request(now, state.leader_id, self._fetch_request())
        elif isinstance(state, Leader):
            if now >= state.check_quorum_deadline:
                logger.info("[RaftNode %d] No majority fetched within %d ms in epoch %d; resigning",
                            self.node_id, self.config.check_quorum_timeout_ms, state.epoch)
                self._to_resigned(now, state)
                return
            for replica, parked in list(state.parked.items()):
                if now >= parked.deadline:
                    self._answer_parked(now, state, replica)
            for voter in sorted(self.config.voters - state.acknowledged - {self.node_id}):
                if self._can_send(voter, now):
                    self._send_request(now, voter, m.BeginQuorumEpochRequest(
                        self.config.cluster_id, self.node_id, state.epoch, *self._voter_key(voter)))
        elif isinstance(state, Resigned):
            if now >= state.election_deadline:
                self._to_candidate(now)
            else:
                for voter in sorted(state.unacknowledged):
                    if self._can_send(voter, now):
                        self._send_request(now, voter, m.EndQuorumEpochRequest(
                            self.config.cluster_id, self.node_id, state.epoch, state.preferred_successors))

    def _ask_for_votes(self, now: int, state: Candidate | Prospective, pre_vote: bool) -> None:
        # A pre-vote asks about the epoch the node would stand in; a vote is cast in the candidate's own.
        epoch = state.epoch + 1 if pre_vote else state.epoch
        for voter in sorted(self.config.voters - state.granted - state.rejected):
            if self._can_send(voter, now):
                directories = self.config.voter_directories is not None
                self._send_request(now, voter, m.VoteRequest(
                    self.config.cluster_id, epoch, self.node_id, self.log.last_fetched_epoch, self.log.end_offset,
                    pre_vote, self.config.directory_id if directories else None, *self._voter_key(voter)))

    def _voter_key(self, voter: int) -> tuple[int, str | None]:
        """The voter a request is for, by id and directory id (KIP-853), sent with directory ids only."""
        if self.config.voter_directories is None:
            return -1, None
        return voter, self.config.voter_directories.get(voter)

    def _next_deadline(self) -> int:
        state = self.state
        deadlines = [expires for _, expires in self._inflight.values()]
        deadlines += [ready for ready in self._ready_at.values()]
        if isinstance(state, (Unattached, Voted)):
            if state.election_deadline is not None:
                deadlines.append(state.election_deadline)
        elif isinstance(state, (Candidate, Prospective)):
            deadlines.append(state.backoff_until if state.backoff_until is not None else state.election_deadline)
        elif isinstance(state, Follower):
            deadlines.append(state.fetch_deadline)
        elif isinstance(state, Leader):
            deadlines.append(state.check_quorum_deadline)
            deadlines += [parked.deadline for parked in state.parked.values()]
        elif isinstance(state, Resigned):
            deadlines.append(state.election_deadline)
        return min(deadlines, default=FOREVER)

    def _finish(self, now: int) -> list[Effect]:
        # A request unanswered past its timeout is abandoned: its late response is ignored.
        for dest in [dest for dest, (_, expires) in self._inflight.items() if expires <= now]:
            del self._inflight[dest]
        for dest in [dest for dest, ready in self._ready_at.items() if ready <= now]:
            del self._ready_at[dest]
        self._effects.append(Timer(max(now, self._next_deadline())))
        effects, self._effects = self._effects, []
        return effects

    # --- transitions ----------------------------------------------------------------------------------------

    def _transition(self, now: int, new: EpochState, persist: bool = True) -> None:
        old = self.state
        if isinstance(old, Leader):
            # A leader's parked fetches learn where leadership went.
            self.state = new
            for replica in list(old.parked):
                self._answer_parked(now, old, replica)
        self.state = new
        self._inflight.clear()
        self._ready_at.clear()
        if persist:
            self._effects.append(PersistQuorumState(self.election_state()))
        logger.info("[RaftNode %d] %s in epoch %d -> %s in epoch %d (leader %s)", self.node_id, old.name,
                    old.epoch, new.name, new.epoch, self.leader_id)

    def _to_unattached(self, now: int, epoch: int) -> None:
        state = self.state
        if isinstance(state, (Unattached, Voted, Prospective, Candidate)) and self.config.is_voter:
            # A node that knew no leader keeps its election timer: candidates with stale logs, rejected and
            # standing again in higher epochs, must not keep the up-to-date voters from ever standing.
            deadline = state.election_deadline
        else:
            deadline = self._election_deadline(now)
        self._transition(now, Unattached(epoch, deadline))

    def _to_voted(self, now: int, epoch: int, candidate: int) -> None:
        self._transition(now, Voted(epoch, candidate, self._election_deadline(now)))

    def _to_follower(self, now: int, epoch: int, leader: int) -> None:
        if leader == self.node_id:
            raise RaftStateError(f"node {self.node_id} told it leads epoch {epoch}, which it never won")
        self._transition(now, Follower(epoch, leader, now + self.config.fetch_timeout_ms))

    def _start_election(self, now: int) -> None:
        if self.config.pre_vote:
            self._to_prospective(now)
        else:
            self._to_candidate(now)

    def _to_prospective(self, now: int) -> None:
        old = self.state
        retries = old.retries + 1 if isinstance(old, (Candidate, Prospective)) else 1
        voted = self.voted_id if not isinstance(old, Candidate) else self.node_id
        state = Prospective(old.epoch, self.leader_id, voted, retries, self._election_deadline(now),
                            granted={self.node_id})
        # Not persisted: nothing a voter must remember changes before it stands.
        self._transition(now, state, persist=False)
        if len(state.granted) >= self.config.majority:
            self._to_candidate(now)

    def _to_candidate(self, now: int) -> None:
        old = self.state
        retries = old.retries + 1 if isinstance(old, (Candidate, Prospective)) else 1
        state = Candidate(old.epoch + 1, retries, self._election_deadline(now), granted={self.node_id})
        self._transition(now, state)
        if len(state.granted) >= self.config.majority:
            self._to_leader(now, state)

    def _to_leader(self, now: int, candidate: Candidate) -> None:
        # A lone voter is its own majority: no check-quorum.
        check_quorum = now + self.config.check_quorum_timeout_ms if len(self.config.voters) > 1 else FOREVER
        state = Leader(candidate.epoch, self.log.end_offset, check_quorum)
        self._transition(now, state)
        # As Kafka's LeaderState: unknown until this epoch commits, since a follower may know a higher one.
        self.high_watermark = None
        # The epoch's first record says who leads it: until it is committed, nothing of this epoch is.
        self.log.append([m.LogEntry(state.epoch_start_offset, state.epoch, m.LeaderChangeMessage(
            self.node_id, tuple(sorted(self.config.voters)), tuple(sorted(candidate.granted))))])
        self._effects.append(FlushLog(self.log.end_offset))
        self._maybe_advance_high_watermark(now, state)

    def _to_resigned(self, now: int, leader: Leader) -> None:
        others = self.config.voters - {self.node_id}
        successors = tuple(sorted(others, key=lambda v: (-leader.end_offset(v), v)))
        # Not persisted: quorum-state still names this node leader of the epoch, which is what it was.
        self._transition(now, Resigned(leader.epoch, self._election_deadline(now), successors, set(others)),
                         persist=False)

    def _maybe_transition(self, now: int, leader: int | None, epoch: int) -> None:
        """A message names `epoch` and maybe its leader: move there if it is news (Kafka's maybeTransition)."""
        if epoch == self.epoch and leader is not None and self.leader_id not in (None, leader):
            raise RaftStateError(f"epoch {epoch} has leader {self.leader_id} here and {leader} elsewhere")
        if epoch > self.epoch:
            if leader is None:
                self._to_unattached(now, epoch)
            else:
                self._to_follower(now, epoch, leader)
        elif epoch == self.epoch and leader is not None and (self.leader_id is None
                                                             or isinstance(self.state, Prospective)):
            self._to_follower(now, epoch, leader)  # a prospective follows its epoch's leader again

    def _maybe_handle_common_response(self, now: int, error: int, leader_id: int, epoch: int) -> bool:
        """True when a response needs nothing more: it is stale, or it moved this node to a new epoch or
        leader, or it is an error the retry (after the backoff) deals with."""
        if epoch < self.epoch:
            return True
        leader = None if leader_id < 0 else leader_id
        if epoch > self.epoch or (leader is not None and (self.leader_id is None
                                                           or isinstance(self.state, Prospective))):
            self._maybe_transition(now, leader, epoch)
            return True
        return error != m.NONE

    # --- Vote -----------------------------------------------------------------------------------------------

    def _on_vote_request(self, now: int, source: int, correlation_id: int, request: m.VoteRequest) -> None:
        error = self._validate_voter_request(request.candidate_id, request.candidate_epoch)
        granted = False
        if request.pre_vote:
            # Answered from where this node stands, which the question does not move (no epoch, no vote).
            granted = error == m.NONE and self._can_grant_pre_vote(now, request)
        elif error == m.NONE:
            if request.candidate_epoch > self.epoch:
                self._to_unattached(now, request.candidate_epoch)
            granted = self._can_grant_vote(request)
            if granted and isinstance(self.state, Unattached):
                self._to_voted(now, request.candidate_epoch, request.candidate_id)  # persisted before the answer
        self._respond(source, correlation_id, m.VoteResponse(error, self._leader_or_none(), self.epoch, granted))

    def _addressed_to_another(self, request: m.VoteRequest) -> bool:
        """KIP-853: a vote request for this id but another log dir is for the voter this node was before it lost
        its disk; Kafka refuses it (INVALID_VOTER_KEY), and this node grants nothing."""
        return (request.voter_directory_id is not None and self.config.directory_id is not None
                and request.voter_directory_id != self.config.directory_id)

    def _can_grant_vote(self, request: m.VoteRequest) -> bool:
        state = self.state
        if not self.config.is_voter or self._addressed_to_another(request):
            return False
        if isinstance(state, (Voted, Prospective)):
            return state.voted_id == request.candidate_id
        if isinstance(state, Unattached):
            # The candidate's log must be at least as up to date as ours: later last epoch, or same and longer.
            return ((request.last_offset_epoch, request.last_offset)
                    >= (self.log.last_fetched_epoch, self.log.end_offset))
        return False

    def _can_grant_pre_vote(self, now: int, request: m.VoteRequest) -> bool:
        """Would this voter vote for the prospective in its next epoch? Not while it hears from a leader (that
        is the point: a voter cut off alone gets no majority), nor if it already voted for another in that
        epoch; and only for a log at least as up to date as its own."""
        state = self.state
        if not self.config.is_voter or isinstance(state, Leader) or self._addressed_to_another(request):
            return False
        if isinstance(state, Follower) and now < state.fetch_deadline:
            return False
        if request.candidate_epoch == self.epoch and self.voted_id not in (None, request.candidate_id):
            return False
        return ((request.last_offset_epoch, request.last_offset)
                >= (self.log.last_fetched_epoch, self.log.end_offset))

    def _on_vote_response(self, now: int, source: int, response: m.VoteResponse) -> None:
        state = self.state
        if isinstance(state, Prospective) and response.leader_epoch < state.epoch:
            # A voter behind this node's epoch answered the pre-vote without moving to it: its answer counts.
            if response.error_code == m.NONE:
                self._count_pre_vote(now, state, source, response.vote_granted)
            return
        if self._maybe_handle_common_response(now, response.error_code, response.leader_id, response.leader_epoch):
            return
        state = self.state
        if isinstance(state, Prospective):
            self._count_pre_vote(now, state, source, response.vote_granted)
            return
        if not isinstance(state, Candidate) or source not in self.config.voters:
            return
        if response.vote_granted:
            state.granted.add(source)
            if len(state.granted) >= self.config.majority:
                self._to_leader(now, state)
        else:
            state.rejected.add(source)
            if len(state.rejected) >= self.config.majority and state.backoff_until is None:
                state.backoff_until = now + self._election_backoff(state.retries)

    def _count_pre_vote(self, now: int, state: Prospective, source: int, granted: bool) -> None:
        if source not in self.config.voters:
            return
        if granted:
            state.granted.add(source)
            if len(state.granted) >= self.config.majority:
                self._to_candidate(now)
        else:
            state.rejected.add(source)
            if len(state.rejected) >= self.config.majority and state.backoff_until is None:
                state.backoff_until = now + self._election_backoff(state.retries)

    # --- BeginQuorumEpoch and EndQuorumEpoch ---------------------------------------------------------------

    def _on_begin_quorum_epoch_request(self, now: int, source: int, correlation_id: int,
                                       request: m.BeginQuorumEpochRequest) -> None:
        error = self._validate_voter_request(request.leader_id, request.leader_epoch)
        if error == m.NONE:
            self._maybe_transition(now, request.leader_id, request.leader_epoch)
        self._respond(source, correlation_id, m.BeginQuorumEpochResponse(error, self._leader_or_none(), self.epoch))

    def _on_begin_quorum_epoch_response(self, now: int, source: int, response: m.BeginQuorumEpochResponse) -> None:
        if self._maybe_handle_common_response(now, response.error_code, response.leader_id, response.leader_epoch):
            return
        if isinstance(self.state, Leader) and response.leader_epoch == self.epoch:
            self.state.acknowledged.add(source)

    def _on_end_quorum_epoch_request(self, now: int, source: int, correlation_id: int,
                                     request: m.EndQuorumEpochRequest) -> None:
        error = self._validate_voter_request(request.leader_id, request.leader_epoch)
        if error == m.NONE:
            self._maybe_transition(now, request.leader_id, request.leader_epoch)
            state = self.state
            if isinstance(state, Follower) and state.leader_id == request.leader_id:
                # The leader's first choice stands at once; the others wait longer the lower they are ranked.
                state.fetch_deadline = min(state.fetch_deadline,
                                           now + self._end_epoch_backoff(request.preferred_successors))
        self._respond(source, correlation_id, m.EndQuorumEpochResponse(error, self._leader_or_none(), self.epoch))

    def _on_end_quorum_epoch_response(self, now: int, source: int, response: m.EndQuorumEpochResponse) -> None:
        if self._maybe_handle_common_response(now, response.error_code, response.leader_id, response.leader_epoch):
            return
        if isinstance(self.state, Resigned):
            self.state.unacknowledged.discard(source)

    def _validate_voter_request(self, remote_id: int, remote_epoch: int) -> int:
        if remote_epoch < self.epoch:
            return m.FENCED_LEADER_EPOCH
        if remote_id not in self.config.voters:
            return m.INCONSISTENT_VOTER_SET
        return m.NONE

    # --- Fetch ----------------------------------------------------------------------------------------------

    def _on_fetch_request(self, now: int, source: int, correlation_id: int, request: m.FetchRequest) -> None:
        state = self.state
        if request.current_leader_epoch < self.epoch:
            error = m.FENCED_LEADER_EPOCH
        elif request.current_leader_epoch > self.epoch:
            error = m.UNKNOWN_LEADER_EPOCH
        elif not isinstance(state, Leader):
            error = m.NOT_LEADER_OR_FOLLOWER
        else:
            error = m.NONE
        if not isinstance(state, Leader) or error != m.NONE:
            self._respond(source, correlation_id, self._fetch_response(error))
            return
        replica = request.replica_id
        voter = self.config.is_voter_replica(replica, request.replica_directory_id)
        if voter:
            state.acknowledged.add(replica)
            state.fetched_voters.add(replica)
            if len(state.fetched_voters) + 1 >= self.config.majority:
                state.fetched_voters.clear()
                if len(self.config.voters) > 1:
                    state.check_quorum_deadline = now + self.config.check_quorum_timeout_ms
        snapshot = self.log.latest_snapshot
        if snapshot is not None and request.fetch_offset < self.log.start_offset:
            # What the replica needs next is gone from the log: it loads the snapshot (FetchSnapshot) first.
            self._update_replica(now, state, replica, request.fetch_offset)
            self._respond(source, correlation_id, self._fetch_response(m.NONE, snapshot=snapshot))
            return
        end = self.log.end_offset_for_epoch(request.last_fetched_epoch)
        if end.epoch != request.last_fetched_epoch or end.offset < request.fetch_offset:
            # The fetcher's log left ours after end.offset: it truncates there and fetches again.
            self._respond(source, correlation_id, self._fetch_response(
                m.NONE, diverging=m.EpochEndOffset(end.epoch, end.offset)))
            return
        state.parked.pop(replica, None)
        if voter or replica not in self.config.voters:
            self._update_replica(now, state, replica, request.fetch_offset)
        # else: a voter's id on another log dir (it lost its disk): served as an observer, never counted as it
        if voter:
            self._maybe_advance_high_watermark(now, state)
        if request.fetch_offset < self.log.end_offset or request.max_wait_ms <= 0:
            self._respond(source, correlation_id, self._fetch_response(m.NONE, request))
        else:
            wait = min(request.max_wait_ms, self.config.fetch_max_wait_ms)
            state.parked[replica] = ParkedFetch(correlation_id, request, now + wait)

    def _update_replica(self, now: int, leader: Leader, replica: int, fetch_offset: int) -> None:
        leader_end = self.log.end_offset
        previous = leader.replicas.get(replica)
        caught_up = -1 if previous is None else previous.last_caught_up_ms
        if fetch_offset >= leader_end:
            caught_up = now
        elif previous is not None and 0 < previous.leader_end_offset_at_fetch <= fetch_offset:
            caught_up = max(caught_up, previous.last_fetch_ms)
        leader.replicas[replica] = ReplicaState(fetch_offset, now, caught_up, leader_end)

    def _fetch_response(self, error: int, request: m.FetchRequest | None = None,
                        diverging: m.EpochEndOffset | None = None,
                        snapshot: m.SnapshotId | None = None) -> m.FetchResponse:
        records = () if request is None else self.log.read(request.fetch_offset, request.partition_max_bytes)
        return m.FetchResponse(
            error_code=error,
            high_watermark=-1 if self.high_watermark is None else self.high_watermark,
            log_start_offset=self.log.start_offset,
            current_leader=m.LeaderIdAndEpoch(self._leader_or_none(), self.epoch),
            diverging_epoch=diverging,
            snapshot_id=snapshot,
            records=records,
        )

    def _answer_parked(self, now: int, leader: Leader, replica: int) -> None:
        parked = leader.parked.pop(replica)
        if self.state is leader:
            response = self._fetch_response(m.NONE, parked.request)
        else:
            response = self._fetch_response(m.NOT_LEADER_OR_FOLLOWER)
        self._respond(replica, parked.correlation_id, response)

    def _complete_parked(self, now: int, leader: Leader) -> None:
        for replica in list(leader.parked):
            self._answer_parked(now, leader, replica)

    def _maybe_advance_high_watermark(self, now: int, leader: Leader) -> None:
        """The high watermark is the offset a majority of voters has reached, and moves only past this epoch's
        start: an entry of an earlier epoch is committed only by committing one of this epoch after it."""
        ends = sorted((self.log.end_offset if v == self.node_id else leader.end_offset(v)
                       for v in self.config.voters), reverse=True)
        reached = ends[len(ends) // 2]
        if reached > leader.epoch_start_offset and (self.high_watermark is None or reached > self.high_watermark):
            self.high_watermark = reached
            self._complete_parked(now, leader)

    def _fetch_request(self) -> m.FetchRequest:
        return m.FetchRequest(
            cluster_id=self.config.cluster_id,
            replica_id=self.node_id,
            max_wait_ms=self.config.fetch_max_wait_ms,
            current_leader_epoch=self.epoch,
            fetch_offset=self.log.end_offset,
            last_fetched_epoch=self.log.last_fetched_epoch,
            log_start_offset=self.log.start_offset,
            partition_max_bytes=self.config.fetch_max_bytes,
            replica_directory_id=self.config.directory_id,
        )

    def _fetch_from_any_voter(self, now: int) -> None:
        """An observer that knows no leader asks a voter; the answer names the leader (or its epoch)."""
        if any(expires > now for _, expires in self._inflight.values()):
            return
        ready = [v for v in sorted(self.config.voters) if self._can_send(v, now)]
        if ready:
            self._send_request(now, self._rng.choice(ready), self._fetch_request())

    def _on_fetch_response(self, now: int, source: int, response: m.FetchResponse) -> None:
        leader = response.current_leader
        if self._maybe_handle_common_response(now, response.error_code, leader.leader_id, leader.leader_epoch):
            if response.error_code != m.NONE:
                self._ready_at[source] = now + self.config.retry_backoff_ms
            return
        state = self.state
        if not isinstance(state, Follower) or source != state.leader_id:
            return
        diverging = response.diverging_epoch
        if diverging is not None:
            local = self.log.end_offset_for_epoch(diverging.epoch)
            truncate_to = min(local.offset, diverging.end_offset)
            if self.high_watermark is not None and truncate_to < self.high_watermark:
                raise RaftStateError(f"leader {source} asks to truncate to {truncate_to}, below the high watermark "
                                     f"{self.high_watermark}")
            self.log.truncate_to(truncate_to)
            self._effects.append(FlushLog(self.log.end_offset))
        else:
            records = response.records
            if records and records[0].offset == self.log.end_offset:
                self.log.append(records)
                self._effects.append(FlushLog(self.log.end_offset))
            if response.high_watermark >= 0:
                # Our log matches the leader's up to our end (the leader checked it), so this much is committed.
                reached = min(response.high_watermark, self.log.end_offset)
                if self.high_watermark is None or reached > self.high_watermark:
                    self.high_watermark = reached
        state.fetch_deadline = now + self.config.fetch_timeout_ms

    # --- helpers --------------------------------------------------------------------------------------------

    def _leader_or_none(self) -> int:
        leader = self.leader_id
        return -1 if leader is None else leader

    def _election_deadline(self, now: int) -> int | None:
        if not self.config.is_voter:
            return None
        timeout = self.config.election_timeout_ms
        return now + timeout + self._rng.randrange(timeout)

    def _election_backoff(self, retries: int) -> int:
        """Binary exponential: up to 2^retries units of 100 ms, at most election.backoff.max.ms."""
        return min(ELECTION_BACKOFF_BASE_MS * self._rng.randrange(2 << min(20, retries - 1)),
                   self.config.election_backoff_max_ms)

    def _end_epoch_backoff(self, preferred: tuple[int, ...]) -> int:
        if self.node_id not in preferred:
            return self.config.election_backoff_max_ms
        position = preferred.index(self.node_id)
        if position == 0:
            return 0
        return min(ELECTION_BACKOFF_BASE_MS << (position - 1), self.config.election_backoff_max_ms)

    def _can_send(self, destination: int, now: int) -> bool:
        inflight = self._inflight.get(destination)
        if inflight is not None and now < inflight[1]:
            return False
        return now >= self._ready_at.get(destination, 0)

    def _send_request(self, now: int, destination: int, request: m.Request) -> None:
        self._next_correlation_id += 1
        self._inflight[destination] = (self._next_correlation_id, now + self.config.request_timeout_ms)
        self._effects.append(Send(destination, self._next_correlation_id, request))

    def _respond(self, destination: int, correlation_id: int, response: m.Response) -> None:
        self._effects.append(Send(destination, correlation_id, response))

    _request_handlers = {
        m.VoteRequest: _on_vote_request,
        m.BeginQuorumEpochRequest: _on_begin_quorum_epoch_request,
        m.EndQuorumEpochRequest: _on_end_quorum_epoch_request,
        m.FetchRequest: _on_fetch_request,
    }
    _response_handlers = {
        m.VoteResponse: _on_vote_response,
        m.BeginQuorumEpochResponse: _on_begin_quorum_epoch_response,
        m.EndQuorumEpochResponse: _on_end_quorum_epoch_response,
        m.FetchResponse: _on_fetch_response,
    }

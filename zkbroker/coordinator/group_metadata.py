"""A consumer group as its coordinator holds it (Kafka's GroupMetadata and MemberMetadata): the group's state,
generation, chosen protocol, leader and members, and the offsets committed for it.

The five states and the rule that moves between them are data, stated once below; `GroupMetadata.transition_to`
refuses any other move. Members are kept in the order they joined: the first becomes the leader.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from zkbroker.topic_partition import TopicPartition


class GroupState(enum.Enum):
    """Kafka's group states; the values are the names DescribeGroups reports (Kafka 2.x's: 0.9-1.x called
    CompletingRebalance "AwaitingSync")."""

    EMPTY = "Empty"  # no members; committed offsets may remain
    PREPARING_REBALANCE = "PreparingRebalance"  # waiting for every member to (re)join
    COMPLETING_REBALANCE = "CompletingRebalance"  # joined; waiting for the leader's assignment (SyncGroup)
    STABLE = "Stable"  # assignment handed out; members heartbeat
    DEAD = "Dead"  # no members, no offsets, or no longer ours; about to be forgotten


_S = GroupState

#: A group may enter the state on the left only from the states on the right (GroupState.validPreviousStates).
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    _S.DEAD: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
}


class IllegalStateTransition(RuntimeError):
    """A transition the table does not allow: a bug in the coordinator, never the client's fault."""


@dataclass
class MemberMetadata:
    """One member of a group. `awaiting_join` / `awaiting_sync` hold the reply token of a JoinGroup or SyncGroup
    the coordinator has not answered yet; a member waiting on the coordinator is never expired for silence."""

    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata), in the member's order of preference
    last_heartbeat_ms: int = 0
    assignment: bytes = b""
    awaiting_join: Any = None
    awaiting_sync: Any = None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(d)) for n, d in protocols] == [(n, bytes(d)) for n, d in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        return next(name for name in self.protocol_names() if name in candidates)

    def session_deadline_ms(self) -> int | None:
        """When the member expires for lack of heartbeats; None while it waits on the coordinator."""
        if self.awaiting_join is not None or self.awaiting_sync is not None:
            return None
        return self.last_heartbeat_ms + self.session_timeout_ms


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int
    leader_epoch: int = -1  # OffsetCommit v6's committed_leader_epoch (KIP-320); -1 when none was given


@dataclass
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    # TxnOffsetCommit's offsets by producer id, written but pending until their transaction's marker (KIP-98)
    pending_txn_offsets: dict[int, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    # The pending rebalance (Kafka's DelayedJoin / InitialDelayedJoin), when PreparingRebalance.
    join_deadline_ms: int | None = None
    initial_delay_remaining_ms: int = 0  # what an initial delay may still be extended by
    initial_delay_active: bool = False
    new_member_added: bool = False

    def has_pending_txn_offset(self, tp: TopicPartition) -> bool:
        return any(tp in pending for pending in self.pending_txn_offsets.values())

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalStateTransition(f"Group {self.group_id} should be in one of "
                                         f"{sorted(s.value for s in VALID_PREVIOUS_STATES[state])} before moving "
                                         f"to {state.value}, but is {self.state.value}")
        self.state = state

    # ---- members ------------------------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member_id == self.leader_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ---- protocols ----------------------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        members = list(self.members.values())
        if not members:
            return set()
        candidates = set(members[0].protocol_names())
        for member in members[1:]:
            candidates &= set(member.protocol_names())
        return candidates

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """Whether a member of this type offering these protocols may join (Kafka 2.x's supportsProtocols)."""
        if self.is_(GroupState.EMPTY) or not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and any(n in self.candidate_protocols() for n in names)

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that all support; most votes wins, a tie going to
        the leader's preference (Kafka leaves ties to a hash map's order)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise IllegalStateTransition(f"Group {self.group_id}: no protocol every member supports")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        leader = self.members[self.leader_id] if self.leader_id in self.members else next(iter(self.members.values()))
        order = [n for n in leader.protocol_names() if n in candidates]
        return max(order, key=lambda name: (votes[name], -order.index(name)))

    def init_next_generation(self) -> None:
        """A rebalance ends: the next generation, in CompletingRebalance with a protocol, or Empty without one."""
        self.generation += 1
        if self.members:
            self.protocol = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol = None
            self.transition_to(GroupState.EMPTY)

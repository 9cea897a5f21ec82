"""The group coordinator's decisions, sans I/O (Kafka's GroupCoordinator with its DelayedJoin, InitialDelayedJoin
and DelayedHeartbeat, and the cache half of GroupMetadataManager).

Requests come in as method calls carrying the time (`now_ms`) and, for the answers that may wait (JoinGroup,
SyncGroup, OffsetCommit), an opaque reply token. What the coordinator wants done comes out of `take_outbox()`:
`Reply(token, body)` -- a response body, ready to encode -- and `Append(write_id, partition, records)` -- records
for `__consumer_offsets`, whose outcome the driver reports with `append_completed`. Timers are deadlines: the
driver calls `tick(now_ms)` at `next_deadline_ms()`. Nothing here reads a clock, a socket or a disk.

The rules, as Kafka 2.x's coordinator applies them to the 0.10.1 protocol we speak:
- A JoinGroup from a new member (empty member id) adds it with a fresh id and starts a rebalance; a known member
  rejoining with unchanged protocols in Stable or CompletingRebalance just hears its generation again (unless it
  leads, which triggers a rebalance, so a leader can rejoin to re-assign).
- A rebalance ends when every member has rejoined, or at the rebalance timeout (the largest of the members'
  JoinGroup v1 rebalance timeouts: the client's max.poll.interval.ms, KIP-62), when those that did not rejoin are
  removed. The first rebalance of an Empty group waits group.initial.rebalance.delay.ms first (KIP-134), extended
  by the same delay each time another member joins, up to the rebalance timeout.
- The leader's SyncGroup hands out the assignment once the group's metadata is written; the others wait for it.
- A member silent for its session timeout is removed -- except while it waits for the coordinator's answer to a
  JoinGroup or SyncGroup -- and the group rebalances.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from zkbroker.coordinator.consumer_protocol import decode_subscription
from zkbroker.coordinator.group_metadata import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata
from zkbroker.coordinator.lookup import partition_for
from zkbroker.coordinator.record_formats import (
    GroupKey,
    GroupValue,
    MemberRecord,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from zkbroker.protocol.errors import ErrorCode, ProtocolError
from zkbroker.topic_partition import TopicPartition

log = logging.getLogger("zkbroker.coordinator.GroupCoordinator")

Records = tuple[tuple[bytes, bytes | None], ...]

_MAX_INT64 = 2**63 - 1  # the largest timestamp offset value v1 can hold


@dataclass(frozen=True)
class CoordinatorConfig:
    """The broker keys the coordinator reads (zkbroker/config.py has their docs and defaults)."""

    offsets_topic_partitions: int = 50
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 0
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 24 * 60 * 60 * 1000

    @classmethod
    def from_broker_config(cls, config: Any) -> CoordinatorConfig:
        return cls(config["offsets.topic.num.partitions"], config["group.min.session.timeout.ms"],
                   config["group.max.session.timeout.ms"], config["group.initial.rebalance.delay.ms"],
                   config["offset.metadata.max.bytes"], config["offsets.retention.minutes"] * 60_000)


@dataclass(frozen=True)
class Reply:
    token: Any
    body: dict


@dataclass(frozen=True)
class Append:
    write_id: int
    partition: int
    records: Records
    #: A transactional producer's offsets (TxnOffsetCommit): written as its transactional batch, so that the
    #: marker of its transaction commits or aborts them in the log too.
    producer_id: int = -1
    producer_epoch: int = -1


# How an append's failure reads to the client (GroupMetadataManager's error mapping).
_UNAVAILABLE = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT)
_TOO_LARGE = (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE)


def append_error(error: int, for_offsets: bool) -> int:
    if error == ErrorCode.NONE:
        return error
    if error in _UNAVAILABLE:
        return ErrorCode.GROUP_COORDINATOR_NOT_AVAILABLE
    if error == ErrorCode.NOT_LEADER_FOR_PARTITION:
        return ErrorCode.NOT_COORDINATOR
    if error in _TOO_LARGE and for_offsets:
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return ErrorCode.UNKNOWN


def _join_error(member_id: str, error: int) -> dict:
    return {"error_code": error, "generation_id": -1, "group_protocol": "", "leader_id": "",
            "member_id": member_id, "members": []}


def _commit_body(results: dict[TopicPartition, int]) -> dict:
    topics: dict[str, list] = {}
    for tp, error in results.items():
        topics.setdefault(tp.topic, []).append({"partition": tp.partition, "error_code": error})
    return {"topics": [{"topic": t, "partitions": rows} for t, rows in topics.items()]}


def resolve_transactional_records(
        items: Iterable[tuple[bytes | None, bytes | None, int, bool | None]],
) -> tuple[list[tuple[bytes | None, bytes | None]], dict[int, list[tuple[bytes, bytes | None]]]]:
    """An offsets partition's records in offset order, as (key, value, producer id, marker): producer id -1 for a
    record outside any transaction; marker None for a record, True or False for the COMMIT or ABORT marker of
    the producer's transaction (key and value None). A transaction's records join the stream at its COMMIT
    marker -- later records still win over them -- and vanish at its ABORT; those whose marker is not in the
    log yet come back apart, pending, by producer id (Kafka's loadGroupsAndOffsets)."""
    records: list[tuple[bytes | None, bytes | None]] = []
    pending: dict[int, list[tuple[bytes, bytes | None]]] = {}
    for key, value, producer_id, marker in items:
        if marker is not None:
            held = pending.pop(producer_id, [])
            if marker:
                records.extend(held)
        elif producer_id >= 0:
            pending.setdefault(producer_id, []).append((key, value))
        else:
            records.append((key, value))
    return records, pending


class GroupCoordinator:
    def __init__(self, config: CoordinatorConfig,
                 new_member_id: Callable[[str], str] = lambda client_id: f"{client_id}-{uuid.uuid4()}") -> None:
        self.config = config
        self.groups: dict[str, GroupMetadata] = {}
        self.loading: set[int] = set()  # offsets partitions we lead and are still reading
        self.owned: set[int] = set()  # offsets partitions we lead and have read: their groups are ours
        # transaction markers written to a partition while it loads: its load read the log before them
        self._completed_while_loading: dict[int, list[tuple[int, bool]]] = {}
        self._new_member_id = new_member_id
        self._outbox: list[Reply | Append] = []
        self._pending_writes: dict[int, Callable[[int, int], None]] = {}
        self._next_write_id = 0

    # ---- the driver's side --------------------------------------------------------------------------------

    def take_outbox(self) -> list[Reply | Append]:
        out, self._outbox = self._outbox, []
        return out

    def append_completed(self, write_id: int, error: int, now_ms: int) -> None:
        """The outcome of an `Append`: NONE once the ISR has it (acks=-1), else the produce error."""
        callback = self._pending_writes.pop(write_id, None)
        if callback is not None:
            callback(error, now_ms)

    def next_deadline_ms(self) -> int | None:
        deadlines = []
        for group in self.groups.values():
            if group.join_deadline_ms is not None:
                deadlines.append(group.join_deadline_ms)
            for member in group.members.values():
                if (d := member.session_deadline_ms()) is not None:
                    deadlines.append(d)
        return min(deadlines, default=None)

    def tick(self, now_ms: int) -> None:
        """Fire every timer due: rebalances that reached their deadline, members whose session expired."""
        for group in list(self.groups.values()):
            if group.join_deadline_ms is not None and group.join_deadline_ms <= now_ms:
                self._join_deadline_reached(group, now_ms)
            for member in list(group.members.values()):
                deadline = member.session_deadline_ms()
                if deadline is not None and deadline <= now_ms and group.has(member.member_id):
                    log.info("[GroupCoordinator]: Member %s in group %s has failed (no heartbeat for %d ms)",
                             member.member_id, group.group_id, member.session_timeout_ms)
                    self._remove_member_and_update(group, member, now_ms, "its session expired")

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_partitions)

    def _emit(self, token: Any, body: dict) -> None:
        self._outbox.append(Reply(token, body))

    def _append(self, group_id: str, records: Records, on_done: Callable[[int, int], None],
                producer: tuple[int, int] = (-1, -1)) -> None:
        self._next_write_id += 1
        self._pending_writes[self._next_write_id] = on_done
        self._outbox.append(Append(self._next_write_id, self.partition_for(group_id), records, *producer))

    # ---- ownership: offsets partitions loaded and unloaded with their leadership -------------------------

    def begin_loading(self, partition: int) -> None:
        self.owned.discard(partition)
        self.loading.add(partition)
        self._completed_while_loading[partition] = []

    def finish_loading(self, partition: int, records: Iterable[tuple[bytes | None, bytes | None]],
                       now_ms: int, pending_txn: dict[int, list[tuple[bytes, bytes | None]]] | None = None) -> None:
        """Replay the partition's log (oldest first; later records win, tombstones delete) into groups.
        `pending_txn`: the offset records of transactions with no marker yet, by producer id (see
        `resolve_transactional_records`); they stay pending until their marker."""
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        metadata: dict[str, GroupValue | None] = {}
        for key_bytes, value in records:
            if key_bytes is None:
                continue
            key = decode_key(key_bytes)
            if isinstance(key, OffsetKey):
                tp = TopicPartition(key.topic, key.partition)
                if value is None:
                    offsets.get(key.group, {}).pop(tp, None)
                else:
                    v = decode_offset_value(value)
                    # A value without an expire timestamp expires offsets.retention.minutes after its commit
                    expire = v.expire_timestamp if v.expire_timestamp >= 0 else (
                        v.commit_timestamp + self.config.offsets_retention_ms)
                    offsets.setdefault(key.group, {})[tp] = OffsetAndMetadata(
                        v.offset, v.metadata, v.commit_timestamp, expire, v.leader_epoch)
            else:
                metadata[key.group] = None if value is None else decode_group_value(value)
        for group_id in sorted({g for g, o in offsets.items() if o} | {g for g, v in metadata.items() if v}):
            if self.partition_for(group_id) != partition:
                continue  # written under another partition count; not ours to serve
            group = GroupMetadata(group_id)
            value = metadata.get(group_id)
            if value is not None:
                group.generation = value.generation
                group.protocol_type = value.protocol_type or None
                group.protocol = value.protocol
                for m in value.members:
                    group.members[m.member_id] = MemberMetadata(
                        m.member_id, m.client_id, m.client_host, m.session_timeout, m.rebalance_timeout,
                        value.protocol_type, [(value.protocol or "", m.subscription)], now_ms, m.assignment)
                group.leader_id = value.leader if value.leader in group.members else next(iter(group.members), None)
                if group.members:
                    group.state = GroupState.STABLE
            group.offsets = offsets.get(group_id, {})
            self.groups[group_id] = group
        for producer_id, pending in (pending_txn or {}).items():
            for key_bytes, value in pending:
                key = decode_key(key_bytes)
                if not isinstance(key, OffsetKey) or value is None or self.partition_for(key.group) != partition:
                    continue
                v = decode_offset_value(value)
                expire = v.expire_timestamp if v.expire_timestamp >= 0 else (
                    v.commit_timestamp + self.config.offsets_retention_ms)
                group = self.groups.setdefault(key.group, GroupMetadata(key.group))
                group.pending_txn_offsets.setdefault(producer_id, {})[TopicPartition(key.topic, key.partition)] = (
                    OffsetAndMetadata(v.offset, v.metadata, v.commit_timestamp, expire, v.leader_epoch))
        self.loading.discard(partition)
        self.owned.add(partition)
        for producer_id, commit in self._completed_while_loading.pop(partition, []):
            self.complete_txn(partition, producer_id, commit)

    def unload(self, partition: int) -> None:
        """We no longer lead the partition: its groups go to the new coordinator; waiting members hear
        NOT_COORDINATOR and look for it."""
        self.loading.discard(partition)
        self.owned.discard(partition)
        self._completed_while_loading.pop(partition, None)
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            group = self.groups.pop(group_id)
            for member in group.members.values():
                if member.awaiting_join is not None:
                    self._emit(member.awaiting_join, _join_error(member.member_id, ErrorCode.NOT_COORDINATOR))
                if member.awaiting_sync is not None:
                    self._emit(member.awaiting_sync, {"error_code": ErrorCode.NOT_COORDINATOR,
                                                      "member_assignment": b""})
                member.awaiting_join = member.awaiting_sync = None
            group.transition_to(GroupState.DEAD)

    def _check_group(self, group_id: str) -> int:
        """Kafka's validateGroup: an id at all, then this coordinator's, then loaded."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        partition = self.partition_for(group_id)
        if partition in self.loading:
            return ErrorCode.GROUP_LOAD_IN_PROGRESS
        if partition not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    # ---- JoinGroup ----------------------------------------------------------------------------------------

    def join_group(self, now_ms: int, token: Any, group_id: str, member_id: str, client_id: str,
                   client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]]) -> None:
        error = self._check_group(group_id)
        if error == ErrorCode.NONE and not (self.config.min_session_timeout_ms <= session_timeout_ms
                                            <= self.config.max_session_timeout_ms):
            error = ErrorCode.INVALID_SESSION_TIMEOUT
        if error != ErrorCode.NONE:
            self._emit(token, _join_error(member_id, error))
            return
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                self._emit(token, _join_error(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return
            group = GroupMetadata(group_id)  # kept once its first member is in
        protocols = [(name, bytes(data)) for name, data in protocols]
        names = [name for name, _ in protocols]
        if not group.supports_protocols(protocol_type, names):
            self._emit(token, _join_error(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if member_id and not group.has(member_id) or group.is_(GroupState.DEAD):
            # A member the group no longer knows (its session expired): it must rejoin with an empty id.
            self._emit(token, _join_error(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            return
        if not member_id:
            member = MemberMetadata(self._new_member_id(client_id), client_id, client_host, session_timeout_ms,
                                    rebalance_timeout_ms, protocol_type, protocols, now_ms)
            member.awaiting_join = token
            self.groups.setdefault(group_id, group)
            group.add(member)
            group.new_member_added = True
            if not group.is_(GroupState.PREPARING_REBALANCE):
                self._prepare_rebalance(group, now_ms, f"member {member.member_id} joined")
        else:
            member = group.members[member_id]
            unchanged = member.matches(protocols)
            if group.is_(GroupState.PREPARING_REBALANCE):
                self._update_member(member, token, session_timeout_ms, rebalance_timeout_ms, protocols)
            elif group.is_(GroupState.COMPLETING_REBALANCE) and unchanged:
                # The member missed our answer: tell it the generation again (the leader, with the members).
                self._emit(token, self._join_body(group, member))
                return
            elif group.state in (GroupState.STABLE, GroupState.EMPTY) and unchanged \
                    and member_id != group.leader_id:
                self._emit(token, self._join_body(group, member))
                return
            else:
                self._update_member(member, token, session_timeout_ms, rebalance_timeout_ms, protocols)
                self._prepare_rebalance(group, now_ms, f"member {member_id} rejoined")
        self._try_complete_join(group, now_ms)

    @staticmethod
    def _update_member(member: MemberMetadata, token: Any, session_timeout_ms: int, rebalance_timeout_ms: int,
                       protocols: list[tuple[str, bytes]]) -> None:
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.protocols = protocols
        member.awaiting_join = token

    def _join_body(self, group: GroupMetadata, member: MemberMetadata) -> dict:
        members = []
        if member.member_id == group.leader_id:
            members = [{"member_id": m.member_id, "member_metadata": m.metadata(group.protocol)}
                       for m in group.members.values()]
        return {"error_code": ErrorCode.NONE, "generation_id": group.generation,
                "group_protocol": group.protocol or "", "leader_id": group.leader_id or "",
                "member_id": member.member_id, "members": members}

    def _prepare_rebalance(self, group: GroupMetadata, now_ms: int, reason: str) -> None:
        log.info("[GroupCoordinator]: Preparing to rebalance group %s in state %s with old generation %d (%s)",
                 group.group_id, group.state.value, group.generation, reason)
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        delay = self.config.initial_rebalance_delay_ms
        if group.is_(GroupState.EMPTY) and delay > 0:
            timeout = group.rebalance_timeout_ms()
            first = min(delay, timeout)
            group.join_deadline_ms = now_ms + first
            group.initial_delay_remaining_ms = max(timeout - first, 0)
            group.initial_delay_active = True
            group.new_member_added = False
        else:
            group.join_deadline_ms = now_ms + group.rebalance_timeout_ms()
            group.initial_delay_active = False
        group.transition_to(GroupState.PREPARING_REBALANCE)

    def _try_complete_join(self, group: GroupMetadata, now_ms: int) -> None:
        if group.is_(GroupState.PREPARING_REBALANCE) and not group.initial_delay_active \
                and not group.not_yet_rejoined():
            self._complete_join(group, now_ms)

    def _join_deadline_reached(self, group: GroupMetadata, now_ms: int) -> None:
        if group.initial_delay_active and group.new_member_added and group.initial_delay_remaining_ms > 0:
            # InitialDelayedJoin: someone joined during the delay; wait once more, within the rebalance timeout.
            delay = min(self.config.initial_rebalance_delay_ms, group.initial_delay_remaining_ms)
            group.initial_delay_remaining_ms -= delay
            group.new_member_added = False
            group.join_deadline_ms = now_ms + delay
            return
        group.initial_delay_active = False
        self._complete_join(group, now_ms)

    def _complete_join(self, group: GroupMetadata, now_ms: int) -> None:
        """DelayedJoin.onComplete: drop the members that did not rejoin, then start the next generation."""
        group.join_deadline_ms = None
        group.initial_delay_active = False
        for member in group.not_yet_rejoined():
            log.info("[GroupCoordinator]: Member %s in group %s did not rejoin within the rebalance timeout",
                     member.member_id, group.group_id)
            group.remove(member.member_id)
        if group.is_(GroupState.DEAD):
            return
        group.init_next_generation()
        log.info("[GroupCoordinator]: Stabilized group %s generation %d with %d members (protocol %s)",
                 group.group_id, group.generation, len(group.members), group.protocol)
        if group.is_(GroupState.EMPTY):
            self._store_group(group, lambda error, now: None)
            return
        for member in group.members.values():
            self._emit(member.awaiting_join, self._join_body(group, member))
            member.awaiting_join = None
            member.last_heartbeat_ms = now_ms

    # ---- SyncGroup ----------------------------------------------------------------------------------------

    def sync_group(self, now_ms: int, token: Any, group_id: str, generation: int, member_id: str,
                   assignments: dict[str, bytes]) -> None:
        def fail(error: int) -> None:
            self._emit(token, {"error_code": error, "member_assignment": b""})

        error = self._check_group(group_id)
        if error != ErrorCode.NONE:
            return fail(error)
        group = self.groups.get(group_id)
        if group is None or not group.has(member_id):
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation != group.generation:
            return fail(ErrorCode.ILLEGAL_GENERATION)
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return fail(ErrorCode.REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        member.last_heartbeat_ms = now_ms
        if group.is_(GroupState.STABLE):
            return self._emit(token, {"error_code": ErrorCode.NONE, "member_assignment": member.assignment})
        member.awaiting_sync = token
        if member_id != group.leader_id:
            return None
        complete = {m: bytes(assignments.get(m, b"")) for m in group.members}
        current_generation = group.generation

        def stored(error: int, now: int) -> None:
            if self.groups.get(group_id) is not group or not group.is_(GroupState.COMPLETING_REBALANCE) \
                    or group.generation != current_generation:
                return
            if error != ErrorCode.NONE:
                self._reset_and_propagate_assignment_error(group, append_error(error, for_offsets=False))
                self._prepare_rebalance(group, now, f"the group could not be written (error {error})")
                return
            for m in group.members.values():
                m.assignment = complete.get(m.member_id, b"")
            self._propagate_assignment(group, ErrorCode.NONE)
            group.transition_to(GroupState.STABLE)
            log.info("[GroupCoordinator]: Assignment received from leader %s for group %s for generation %d",
                     member_id, group_id, current_generation)

        self._store_group(group, stored, complete)
        return None

    def _propagate_assignment(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            if member.awaiting_sync is not None:
                self._emit(member.awaiting_sync, {"error_code": error, "member_assignment": member.assignment})
                member.awaiting_sync = None

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _store_group(self, group: GroupMetadata, on_done: Callable[[int, int], None],
                     assignments: dict[str, bytes] | None = None) -> None:
        assignments = assignments or {}
        value = GroupValue(group.protocol_type or "", group.generation, group.protocol, group.leader_id, tuple(
            MemberRecord(m.member_id, m.client_id, m.client_host, m.rebalance_timeout_ms, m.session_timeout_ms,
                         m.metadata(group.protocol) if group.protocol else b"",
                         assignments.get(m.member_id, m.assignment))
            for m in group.members.values()))
        record = (encode_group_key(GroupKey(group.group_id)), encode_group_value(value))
        self._append(group.group_id, (record,), on_done)

    # ---- Heartbeat and LeaveGroup -------------------------------------------------------------------------

    def heartbeat(self, now_ms: int, group_id: str, generation: int, member_id: str) -> int:
        error = self._check_group(group_id)
        if error != ErrorCode.NONE:
            return error
        group = self.groups.get(group_id)
        if group is None or group.state in (GroupState.EMPTY, GroupState.DEAD) or not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        group.members[member_id].last_heartbeat_ms = now_ms
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        # Stable, or CompletingRebalance: a member may heartbeat between its JoinGroup and SyncGroup answers
        # (Kafka 2.x; 0.10 answered REBALANCE_IN_PROGRESS there, sending the member round again).
        return ErrorCode.NONE

    def leave_group(self, now_ms: int, group_id: str, member_id: str) -> int:
        error = self._check_group(group_id)
        if error != ErrorCode.NONE:
            return error
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD) or not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members[member_id]
        if member.awaiting_join is not None:
            self._emit(member.awaiting_join, _join_error(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            member.awaiting_join = None
        self._remove_member_and_update(group, member, now_ms, f"member {member_id} left")
        return ErrorCode.NONE

    def _remove_member_and_update(self, group: GroupMetadata, member: MemberMetadata, now_ms: int,
                                  reason: str) -> None:
        """A member left or expired: the rest rebalance without it."""
        if member.awaiting_sync is not None:
            self._emit(member.awaiting_sync, {"error_code": ErrorCode.UNKNOWN_MEMBER_ID, "member_assignment": b""})
            member.awaiting_sync = None
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms, reason)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group, now_ms)

    # ---- offsets ------------------------------------------------------------------------------------------

    def commit_offsets(self, now_ms: int, token: Any, group_id: str, generation: int, member_id: str,
                       offsets: dict[TopicPartition, tuple[int, str | None]], retention_ms: int = -1,
                       leader_epochs: dict[TopicPartition, int] | None = None) -> None:
        """OffsetCommit v1+: checked against the group's generation, then written to `__consumer_offsets`;
        the answer comes once the write is acknowledged by the ISR. ``retention_ms`` > 0 is the commit's own
        retention time (v2-v4), else the broker's applies; ``leader_epochs`` are OffsetCommit v6's (KIP-320)."""
        error = self._check_group(group_id)
        group = self.groups.get(group_id)
        if error == ErrorCode.NONE:
            if group is None:
                if generation < 0:
                    # Not managed by the coordinator (manual assignment): the group exists for its offsets only.
                    group = self.groups[group_id] = GroupMetadata(group_id)
                else:
                    error = ErrorCode.ILLEGAL_GENERATION
            elif group.is_(GroupState.DEAD):
                error = ErrorCode.UNKNOWN_MEMBER_ID
            elif generation < 0 and group.is_(GroupState.EMPTY):
                pass
            elif group.is_(GroupState.COMPLETING_REBALANCE):
                error = ErrorCode.REBALANCE_IN_PROGRESS
            elif not group.has(member_id):
                error = ErrorCode.UNKNOWN_MEMBER_ID
            elif generation != group.generation:
                error = ErrorCode.ILLEGAL_GENERATION
            else:
                group.members[member_id].last_heartbeat_ms = now_ms  # a commit shows the member is alive
        if error != ErrorCode.NONE:
            self._emit(token, _commit_body({tp: error for tp in offsets}))
            return
        assert group is not None
        results: dict[TopicPartition, int] = {}
        to_write: dict[TopicPartition, OffsetAndMetadata] = {}
        retention = retention_ms if retention_ms > 0 else self.config.offsets_retention_ms
        for tp, (offset, metadata) in offsets.items():
            metadata = metadata or ""
            if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                results[tp] = ErrorCode.NONE
                epoch = (leader_epochs or {}).get(tp, -1)
                # A retention near Long.MAX_VALUE (OffsetCommit v2-v4 let a client name any) would overflow the
                # int64 on disk: it saturates there -- the offset never expires -- instead of failing the commit.
                expire = min(now_ms + retention, _MAX_INT64)
                to_write[tp] = OffsetAndMetadata(offset, metadata, now_ms, expire, epoch)
        if not to_write:
            self._emit(token, _commit_body(results))
            return
        def value(o: OffsetAndMetadata) -> OffsetValue:
            # Value v1 keeps the expire timestamp, v3 the leader epoch; a commit with both keeps the timestamp,
            # as Kafka 2.1 does (see record_formats). Either way the offset expires at o.expire_timestamp.
            if o.leader_epoch >= 0 and retention_ms <= 0:
                return OffsetValue(o.offset, o.metadata, o.commit_timestamp, -1, o.leader_epoch)
            return OffsetValue(o.offset, o.metadata, o.commit_timestamp, o.expire_timestamp)

        records = tuple((encode_offset_key(OffsetKey(group_id, tp.topic, tp.partition)), encode_offset_value(value(o)))
                        for tp, o in to_write.items())

        def written(append_err: int, now: int) -> None:
            error = append_error(append_err, for_offsets=True)
            for tp in to_write:
                results[tp] = error
            if error == ErrorCode.NONE and self.groups.get(group_id) is group:
                group.offsets.update(to_write)
            self._emit(token, _commit_body(results))

        self._append(group_id, records, written)

    def commit_txn_offsets(self, now_ms: int, token: Any, group_id: str, producer_id: int, producer_epoch: int,
                           offsets: dict[TopicPartition, tuple[int, str | None]],
                           leader_epochs: dict[TopicPartition, int] | None = None, generation: int = -1,
                           member_id: str = "") -> None:
        """TxnOffsetCommit: a transactional producer's offsets for the group, written in its transaction (a
        transactional batch of `__consumer_offsets`) and pending until the transaction's marker: committed
        offsets for OffsetFetch only then (`complete_txn`). From v3 (KIP-447) the consumer's generation and
        member id come along: a member the group no longer has is UNKNOWN_MEMBER_ID, an older generation
        ILLEGAL_GENERATION -- a zombie copier cannot commit offsets of partitions reassigned since; generation -1
        (a producer outside any group member, or v0-v2) is not checked."""
        error = self._check_group(group_id)
        group = self.groups.get(group_id)
        if error == ErrorCode.NONE and generation >= 0:
            if group is None or group.is_(GroupState.DEAD) or not group.has(member_id):
                error = ErrorCode.UNKNOWN_MEMBER_ID
            elif generation != group.generation:
                error = ErrorCode.ILLEGAL_GENERATION
        if error != ErrorCode.NONE:
            self._emit(token, _commit_body({tp: error for tp in offsets}))
            return
        if group is None or group.is_(GroupState.DEAD):
            group = self.groups[group_id] = GroupMetadata(group_id)
        results: dict[TopicPartition, int] = {}
        to_write: dict[TopicPartition, OffsetAndMetadata] = {}
        expire = min(now_ms + self.config.offsets_retention_ms, _MAX_INT64)
        for tp, (offset, metadata) in offsets.items():
            metadata = metadata or ""
            if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                results[tp] = ErrorCode.NONE
                to_write[tp] = OffsetAndMetadata(offset, metadata, now_ms, expire,
                                                 (leader_epochs or {}).get(tp, -1))
        if not to_write:
            self._emit(token, _commit_body(results))
            return
        records = tuple((encode_offset_key(OffsetKey(group_id, tp.topic, tp.partition)),
                         encode_offset_value(OffsetValue(o.offset, o.metadata, o.commit_timestamp, -1, o.leader_epoch)))
                        for tp, o in to_write.items())

        def written(append_err: int, now: int) -> None:
            error = append_error(append_err, for_offsets=True)
            for tp in to_write:
                results[tp] = error
            if error == ErrorCode.NONE and self.groups.get(group_id) is group:
                group.pending_txn_offsets.setdefault(producer_id, {}).update(to_write)
            self._emit(token, _commit_body(results))

        self._append(group_id, records, written, (producer_id, producer_epoch))

    def complete_txn(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """The marker of `producer_id`'s transaction is in offsets partition `offsets_partition` (Kafka's
        handleTxnCompletion): its pending offsets there become the groups' committed offsets, or are dropped.
        While the partition loads, the completion waits for the load's end."""
        if offsets_partition in self.loading:
            self._completed_while_loading.setdefault(offsets_partition, []).append((producer_id, commit))
            return
        for group in self.groups.values():
            if self.partition_for(group.group_id) != offsets_partition:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if pending and commit:
                group.offsets.update(pending)

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None) -> tuple[int, dict]:
        """OffsetFetch v1: (error, {partition: OffsetAndMetadata or None}); None asks for every partition.
        Offsets pending in a transaction are not committed yet: they are not answered."""
        error = self._check_group(group_id)
        if error != ErrorCode.NONE:
            return error, {}
        group = self.groups.get(group_id)
        stored = group.offsets if group is not None else {}
        if partitions is None:
            return ErrorCode.NONE, dict(stored)
        return ErrorCode.NONE, {tp: stored.get(tp) for tp in partitions}

    def unstable_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """The partitions whose offset awaits a transaction's marker (OffsetFetch v7's require_stable, KIP-447:
        those answer UNSTABLE_OFFSET_COMMIT, and the consumer asks again)."""
        group = self.groups.get(group_id)
        if group is None or not group.pending_txn_offsets:
            return set()
        return {tp for tp in partitions if group.has_pending_txn_offset(tp)}

    def expire_offsets(self, now_ms: int) -> int:
        """offsets.retention.minutes (Kafka 2.1's rule, KIP-211): the offsets of a group without members expire
        at their expire timestamp; a group left with neither members nor offsets is forgotten. Tombstones go to
        `__consumer_offsets`, so a restarted coordinator (and the log cleaner) forgets them too. Returns how many
        offsets expired. (0.8.2-2.0 expired offsets of active groups too, which made idle partitions re-read.)"""
        expired = 0
        for group in list(self.groups.values()):
            if not group.is_(GroupState.EMPTY) or self.partition_for(group.group_id) not in self.owned:
                continue
            gone = [tp for tp, o in group.offsets.items() if 0 <= o.expire_timestamp <= now_ms]
            records = [(encode_offset_key(OffsetKey(group.group_id, tp.topic, tp.partition)), None) for tp in gone]
            for tp in gone:
                del group.offsets[tp]
            expired += len(gone)
            if not group.offsets and not group.pending_txn_offsets:
                group.transition_to(GroupState.DEAD)
                del self.groups[group.group_id]
                records.append((encode_group_key(GroupKey(group.group_id)), None))
            if records:
                self._append(group.group_id, tuple(records), lambda error, now: None)
        return expired

    # ---- DeleteGroups (Kafka 1.1, KIP-229) ----------------------------------------------------------------

    def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        """Each group's error code. A group with members is NON_EMPTY_GROUP and an unknown one
        GROUP_ID_NOT_FOUND; an empty group is forgotten at once, its offsets and metadata tombstoned in
        `__consumer_offsets` so that a restarted coordinator forgets it too (GroupMetadataManager's
        cleanupGroupMetadata; the answer does not wait for the tombstones, as in Kafka)."""
        results = {}
        for group_id in dict.fromkeys(group_ids):
            error = self._check_group(group_id)
            group = self.groups.get(group_id)
            if error == ErrorCode.NONE and (group is None or group.is_(GroupState.DEAD)):
                error = ErrorCode.GROUP_ID_NOT_FOUND
            elif error == ErrorCode.NONE and not group.is_(GroupState.EMPTY):
                error = ErrorCode.NON_EMPTY_GROUP
            results[group_id] = error
            if error != ErrorCode.NONE:
                continue
            records = [(encode_offset_key(OffsetKey(group_id, tp.topic, tp.partition)), None) for tp in group.offsets]
            records.append((encode_group_key(GroupKey(group_id)), None))
            group.transition_to(GroupState.DEAD)
            del self.groups[group_id]
            log.info("[GroupCoordinator]: Group %s deleted (%d offsets)", group_id, len(records) - 1)
            self._append(group_id, tuple(records), lambda error, now: None)
        return results

    # ---- OffsetDelete (Kafka 2.4, KIP-496) ----------------------------------------------------------------

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> tuple[int, dict[TopicPartition, int]]:
        """(group error, {partition: error}). The offsets of topics no member subscribes to are tombstoned; a
        topic the group's consumers subscribe to answers GROUP_SUBSCRIBED_TO_TOPIC; a group with members of
        another protocol type is NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND."""
        error = self._check_group(group_id)
        group = self.groups.get(group_id)
        if error == ErrorCode.NONE and (group is None or group.is_(GroupState.DEAD)):
            error = ErrorCode.GROUP_ID_NOT_FOUND
        if error != ErrorCode.NONE:
            return error, {}
        subscribed: set[str] | None = set()  # None: every topic (subscriptions not known yet)
        if not group.is_(GroupState.EMPTY):
            if group.protocol_type != "consumer":
                return ErrorCode.NON_EMPTY_GROUP, {}
            if group.protocol is None:
                subscribed = None
            else:
                for member in group.members.values():
                    try:
                        subscribed |= set(decode_subscription(member.metadata(group.protocol)))
                    except ProtocolError:
                        subscribed = None  # a subscription we cannot read: keep every offset, as Kafka would
                        break
        results, gone = {}, []
        for tp in dict.fromkeys(partitions):
            if subscribed is None or tp.topic in subscribed:
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            results[tp] = ErrorCode.NONE
            if tp in group.offsets:
                gone.append(tp)
                del group.offsets[tp]
        if gone:
            log.info("[GroupCoordinator]: Deleted %d offsets of group %s", len(gone), group_id)
            self._append(group_id, tuple((encode_offset_key(OffsetKey(group_id, tp.topic, tp.partition)), None)
                                         for tp in gone), lambda error, now: None)
        return ErrorCode.NONE, results

    # ---- DescribeGroups and ListGroups --------------------------------------------------------------------

    def describe_group(self, group_id: str) -> dict:
        error = self._check_group(group_id)
        group = self.groups.get(group_id)
        if error != ErrorCode.NONE or group is None:
            # An unknown group reads as Dead with no error, as Kafka answers.
            return {"error_code": error, "group_id": group_id, "state": GroupState.DEAD.value,
                    "protocol_type": "", "protocol": "", "members": []}
        stable = group.is_(GroupState.STABLE)
        members = [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                    "member_metadata": m.metadata(group.protocol) if stable else b"",
                    "member_assignment": m.assignment if stable else b""}
                   for m in group.members.values()]
        return {"error_code": ErrorCode.NONE, "group_id": group_id, "state": group.state.value,
                "protocol_type": group.protocol_type or "", "protocol": (group.protocol or "") if stable else "",
                "members": members}

    def list_groups(self) -> tuple[int, list[tuple[str, str]]]:
        error = ErrorCode.GROUP_LOAD_IN_PROGRESS if self.loading else ErrorCode.NONE
        return error, sorted((g.group_id, g.protocol_type or "") for g in self.groups.values()
                             if not g.is_(GroupState.DEAD))

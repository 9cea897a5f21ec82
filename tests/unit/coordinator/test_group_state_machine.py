"""The group state machine, driven with a fake clock and no I/O: joins, generations, protocol selection, the
rebalance timeout, session expiry, the initial rebalance delay, every error code, and offsets."""

from __future__ import annotations

import itertools

import pytest

from zkbroker.coordinator.group_coordinator import Append, CoordinatorConfig, GroupCoordinator, Reply
from zkbroker.coordinator.group_metadata import GroupMetadata, GroupState, IllegalStateTransition
from zkbroker.coordinator.record_formats import (
    GroupKey,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from zkbroker.protocol.errors import ErrorCode
from zkbroker.topic_partition import TopicPartition

E = ErrorCode
RANGE = [("range", b"sub-range")]


class Harness:
    """A coordinator owning every offsets partition, a clock that moves only when told, and a log that
    acknowledges appends at once (or fails them with `fail_appends`)."""

    def __init__(self, **config) -> None:
        ids = itertools.count(1)
        self.gc = GroupCoordinator(CoordinatorConfig(**config), new_member_id=lambda c: f"{c}-{next(ids)}")
        for p in range(self.gc.config.offsets_topic_partitions):
            self.gc.begin_loading(p)
            self.gc.finish_loading(p, [], 0)
        self.now = 0
        self.tokens = itertools.count(1)
        self.replies: dict[int, dict] = {}
        self.log: list[tuple[int, bytes, bytes | None]] = []  # (partition, key, value) as appended
        self.fail_appends: int | None = None

    def drain(self) -> None:
        while out := self.gc.take_outbox():
            for event in out:
                if isinstance(event, Reply):
                    assert event.token not in self.replies, "a request answered twice"
                    self.replies[event.token] = event.body
                else:
                    assert isinstance(event, Append)
                    if self.fail_appends is None:
                        self.log += [(event.partition, k, v) for k, v in event.records]
                    self.gc.append_completed(event.write_id, self.fail_appends or E.NONE, self.now)

    def join(self, member_id: str = "", client: str = "c", group: str = "g", session: int = 10000,
             rebalance: int = 30000, protocols=None, protocol_type: str = "consumer") -> int:
        token = next(self.tokens)
        self.gc.join_group(self.now, token, group, member_id, client, "/127.0.0.1", session, rebalance,
                           protocol_type, RANGE if protocols is None else protocols)
        self.drain()
        return token

    def sync(self, member_id: str, generation: int, assignments=None, group: str = "g") -> int:
        token = next(self.tokens)
        self.gc.sync_group(self.now, token, group, generation, member_id, assignments or {})
        self.drain()
        return token

    def commit(self, member_id: str, generation: int, offsets: dict, group: str = "g") -> dict:
        token = next(self.tokens)
        self.gc.commit_offsets(self.now, token, group, generation, member_id,
                               {TopicPartition(*tp): v for tp, v in offsets.items()})
        self.drain()
        return {(t["topic"], p["partition"]): p["error_code"]
                for t in self.replies[token]["topics"] for p in t["partitions"]}

    def heartbeat(self, member_id: str, generation: int, group: str = "g") -> int:
        error = self.gc.heartbeat(self.now, group, generation, member_id)
        self.drain()
        return error

    def leave(self, member_id: str, group: str = "g") -> int:
        error = self.gc.leave_group(self.now, group, member_id)
        self.drain()
        return error

    def advance(self, ms: int) -> None:
        """Move the clock, firing every timer due on the way, in order."""
        target = self.now + ms
        while (deadline := self.gc.next_deadline_ms()) is not None and deadline <= target:
            self.now = max(self.now, deadline)
            self.gc.tick(self.now)
            self.drain()
        self.now = target

    def state(self, group: str = "g") -> GroupState:
        return self.gc.groups[group].state

    def stable_group(self, n: int) -> tuple[list[str], int]:
        """n members joined together and synced: (member ids, leader first; generation)."""
        tokens = [self.join(client=f"c{i}") for i in range(n)]
        if n > 1:  # the first join completed alone; the others made the first member rejoin
            first = self.replies[tokens[0]]
            self.join(member_id=first["member_id"], client="c0")
            tokens[0] = max(self.replies)  # its rejoin's answer
        bodies = [self.replies[t] for t in tokens]
        generation = bodies[-1]["generation_id"]
        ids = [b["member_id"] for b in bodies]
        leader = bodies[-1]["leader_id"]
        ids.sort(key=lambda m: m != leader)
        self.sync(leader, generation, {m: m.encode() for m in ids})
        for m in ids[1:]:
            self.sync(m, generation)
        assert self.state() is GroupState.STABLE
        return ids, generation


# ---- the state table --------------------------------------------------------------------------------------

def test_transitions_outside_the_table_are_refused():
    group = GroupMetadata("g")
    with pytest.raises(IllegalStateTransition):
        group.transition_to(GroupState.STABLE)
    group.transition_to(GroupState.PREPARING_REBALANCE)
    with pytest.raises(IllegalStateTransition):
        group.transition_to(GroupState.STABLE)
    group.transition_to(GroupState.COMPLETING_REBALANCE)
    group.transition_to(GroupState.STABLE)
    group.transition_to(GroupState.DEAD)


# ---- joining ----------------------------------------------------------------------------------------------

def test_first_member_becomes_leader_of_generation_1_at_once_without_initial_delay():
    h = Harness()
    token = h.join(client="alice")
    body = h.replies[token]
    assert body["error_code"] == E.NONE
    assert body["member_id"] == "alice-1"
    assert body["leader_id"] == "alice-1"
    assert body["generation_id"] == 1
    assert body["group_protocol"] == "range"
    assert body["members"] == [{"member_id": "alice-1", "member_metadata": b"sub-range"}]
    assert h.state() is GroupState.COMPLETING_REBALANCE


def test_leader_sync_hands_out_every_assignment_after_the_group_is_written():
    h = Harness()
    t1, t2 = h.join(client="a"), None
    leader = h.replies[t1]["member_id"]
    t2 = h.join(client="b")
    assert t2 not in h.replies  # the leader must rejoin first
    assert h.heartbeat(leader, 1) == E.REBALANCE_IN_PROGRESS
    t3 = h.join(member_id=leader, client="a")
    gen = h.replies[t3]["generation_id"]
    assert gen == 2
    follower = h.replies[t2]["member_id"]
    assert h.replies[t2]["members"] == []  # only the leader sees the members
    assert {m["member_id"] for m in h.replies[t3]["members"]} == {leader, follower}
    waiting = h.sync(follower, gen)
    assert waiting not in h.replies  # a follower waits for the leader's assignment
    done = h.sync(leader, gen, {leader: b"A", follower: b"B"})
    assert h.replies[done] == {"error_code": E.NONE, "member_assignment": b"A"}
    assert h.replies[waiting] == {"error_code": E.NONE, "member_assignment": b"B"}
    assert h.state() is GroupState.STABLE
    partition, key, value = h.log[-1]
    assert partition == h.gc.partition_for("g")
    assert decode_key(key) == GroupKey("g")
    stored = decode_group_value(value)
    assert stored.generation == 2 and stored.leader == leader
    assert {m.member_id: m.assignment for m in stored.members} == {leader: b"A", follower: b"B"}


def test_member_not_rejoining_within_the_rebalance_timeout_is_removed():
    h = Harness()
    (leader, follower), gen = h.stable_group(2)
    t_new = h.join(client="c", rebalance=5000)
    h.join(member_id=leader, client="c0", rebalance=5000)
    for _ in range(9):  # the follower keeps heartbeating but never rejoins
        h.advance(3000)
        assert h.heartbeat(follower, gen) == E.REBALANCE_IN_PROGRESS
    h.advance(2999)  # the group's rebalance timeout is the largest of its members' (30 s)
    assert t_new not in h.replies
    h.advance(1)
    assert h.replies[t_new]["generation_id"] == gen + 1
    assert follower not in h.gc.groups["g"].members


def test_stable_member_rejoining_with_the_same_protocols_hears_its_generation_again():
    h = Harness()
    (leader, follower), gen = h.stable_group(2)
    token = h.join(member_id=follower, client="c1")
    assert h.replies[token]["generation_id"] == gen
    assert h.state() is GroupState.STABLE


def test_stable_member_rejoining_with_new_protocols_starts_a_rebalance():
    h = Harness()
    (leader, follower), gen = h.stable_group(2)
    h.join(member_id=follower, client="c1", protocols=[("range", b"new-subscription")])
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_protocol_chosen_by_votes_among_those_all_members_support():
    h = Harness()
    both = [("roundrobin", b"r"), ("range", b"g")]
    t1 = h.join(client="a", protocols=[("range", b"g"), ("roundrobin", b"r")])
    leader = h.replies[t1]["member_id"]
    h.join(client="b", protocols=both)
    h.join(client="c", protocols=both)
    t = h.join(member_id=leader, client="a", protocols=[("range", b"g"), ("roundrobin", b"r")])
    assert h.replies[t]["group_protocol"] == "roundrobin"  # two votes to one
    assert h.replies[t]["members"][0]["member_metadata"] == b"r"


def test_protocol_tie_goes_to_the_leaders_preference():
    h = Harness()
    t1 = h.join(client="a", protocols=[("roundrobin", b"r"), ("range", b"g")])
    leader = h.replies[t1]["member_id"]
    h.join(client="b", protocols=[("range", b"g"), ("roundrobin", b"r")])
    t = h.join(member_id=leader, client="a", protocols=[("roundrobin", b"r"), ("range", b"g")])
    assert h.replies[t]["group_protocol"] == "roundrobin"


# ---- the initial rebalance delay (KIP-134) ----------------------------------------------------------------

def test_initial_delay_holds_the_first_rebalance_and_extends_for_each_new_member():
    h = Harness(initial_rebalance_delay_ms=3000)
    t1 = h.join(client="a")
    h.advance(1000)
    t2 = h.join(client="b")
    h.advance(1999)
    assert t1 not in h.replies  # the first delay ends at 3000
    h.advance(1)  # at 3000: b joined meanwhile, so wait another 3000
    assert t1 not in h.replies
    h.advance(2999)
    assert t1 not in h.replies
    h.advance(1)
    assert h.replies[t1]["generation_id"] == h.replies[t2]["generation_id"] == 1
    assert len(h.replies[t1]["members"]) == 2


def test_initial_delay_never_passes_the_rebalance_timeout():
    h = Harness(initial_rebalance_delay_ms=3000)
    t1 = h.join(client="a", rebalance=4000)
    h.advance(2000)
    h.join(client="b", rebalance=4000)
    h.advance(1999)  # first delay: 3000; then at most the 1000 left of the 4000 rebalance timeout
    assert t1 not in h.replies
    h.advance(1)
    assert h.replies[t1]["generation_id"] == 1


def test_initial_delay_applies_only_to_an_empty_group():
    h = Harness(initial_rebalance_delay_ms=3000)
    t1 = h.join(client="a")
    h.advance(3000)
    leader = h.replies[t1]["member_id"]
    h.sync(leader, 1, {leader: b""})
    h.join(client="b")
    t = h.join(member_id=leader, client="a")
    assert h.replies[t]["generation_id"] == 2  # no wait: the group was not empty


# ---- sessions ---------------------------------------------------------------------------------------------

def test_silent_member_expires_after_its_session_timeout_and_the_group_rebalances():
    h = Harness()
    (leader, follower), gen = h.stable_group(2)
    for _ in range(2):
        h.advance(4000)
        assert h.heartbeat(leader, gen) == E.NONE
    h.advance(4000)
    assert follower not in h.gc.groups["g"].members  # silent for 10 s
    assert h.heartbeat(leader, gen) == E.REBALANCE_IN_PROGRESS
    t = h.join(member_id=leader, client="c0")
    assert h.replies[t]["generation_id"] == gen + 1
    assert [m["member_id"] for m in h.replies[t]["members"]] == [leader]


def test_member_waiting_for_its_join_answer_is_not_expired():
    h = Harness()
    (leader, follower), gen = h.stable_group(2)
    t = h.join(member_id=follower, client="c1", protocols=[("range", b"changed")], session=6000)
    for _ in range(6):  # the leader heartbeats but never rejoins; the follower waits past its session timeout
        h.advance(3000)
        h.heartbeat(leader, gen)
    assert follower in h.gc.groups["g"].members
    h.advance(12000)  # the rebalance timeout: the leader is dropped, the follower leads the next generation
    assert h.replies[t]["leader_id"] == follower
    assert leader not in h.gc.groups["g"].members


def test_last_member_leaving_empties_the_group_and_stores_the_next_generation():
    h = Harness()
    (leader,), gen = h.stable_group(1)
    assert h.leave(leader) == E.NONE
    assert h.state() is GroupState.EMPTY
    assert h.gc.groups["g"].generation == gen + 1
    stored = decode_group_value(h.log[-1][2])
    assert stored.generation == gen + 1 and stored.members == ()


def test_leaving_member_makes_the_others_rebalance():
    h = Harness()
    (leader, follower), gen = h.stable_group(2)
    assert h.leave(leader) == E.NONE
    assert h.heartbeat(follower, gen) == E.REBALANCE_IN_PROGRESS
    t = h.join(member_id=follower, client="c1")
    assert h.replies[t]["leader_id"] == follower


# ---- error codes --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("session", "error"), [(5999, E.INVALID_SESSION_TIMEOUT), (6000, E.NONE),
                                                (45000, E.NONE), (1800000, E.NONE),
                                                (1800001, E.INVALID_SESSION_TIMEOUT)])
def test_session_timeout_bounds(session, error):
    h = Harness()
    assert h.replies[h.join(session=session)]["error_code"] == error


def test_inconsistent_group_protocol():
    h = Harness()
    h.stable_group(1)
    assert h.replies[h.join(protocols=[("sticky", b"")])]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.replies[h.join(protocol_type="connect")]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.replies[h.join(group="empty", protocols=[])]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert "empty" not in h.gc.groups


def test_unknown_member_id():
    h = Harness()
    assert h.replies[h.join(member_id="ghost")]["error_code"] == E.UNKNOWN_MEMBER_ID
    (leader,), gen = h.stable_group(1)
    assert h.replies[h.join(member_id="ghost")]["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("ghost", gen) == E.UNKNOWN_MEMBER_ID
    assert h.replies[h.sync("ghost", gen)]["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.leave("ghost") == E.UNKNOWN_MEMBER_ID
    assert h.commit("ghost", gen, {("t", 0): (1, "")}) == {("t", 0): E.UNKNOWN_MEMBER_ID}


def test_illegal_generation():
    h = Harness()
    (leader,), gen = h.stable_group(1)
    assert h.heartbeat(leader, gen - 1) == E.ILLEGAL_GENERATION
    assert h.replies[h.sync(leader, gen + 1)]["error_code"] == E.ILLEGAL_GENERATION
    assert h.commit(leader, gen - 1, {("t", 0): (1, "")}) == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.commit("m", 3, {("t", 0): (1, "")}, group="never-joined") == {("t", 0): E.ILLEGAL_GENERATION}


def test_rebalance_in_progress():
    h = Harness()
    (leader, follower), gen = h.stable_group(2)
    h.join(client="newcomer")
    assert h.heartbeat(follower, gen) == E.REBALANCE_IN_PROGRESS
    assert h.replies[h.sync(follower, gen)]["error_code"] == E.REBALANCE_IN_PROGRESS


def test_pending_sync_hears_rebalance_in_progress_when_a_member_joins_before_the_leader_syncs():
    h = Harness()
    t1 = h.join(client="a")
    leader = h.replies[t1]["member_id"]
    t2 = h.join(client="b")
    t3 = h.join(member_id=leader, client="a")
    gen = h.replies[t3]["generation_id"]
    follower = h.replies[t2]["member_id"]
    waiting = h.sync(follower, gen)
    assert h.commit(follower, gen, {("t", 0): (1, "")}) == {("t", 0): E.REBALANCE_IN_PROGRESS}
    h.join(client="c")
    assert h.replies[waiting]["error_code"] == E.REBALANCE_IN_PROGRESS


def test_not_coordinator_and_load_in_progress_and_invalid_group_id():
    h = Harness(offsets_topic_partitions=50)
    p = h.gc.partition_for("g")
    h.gc.unload(p)
    assert h.replies[h.join()]["error_code"] == E.NOT_COORDINATOR
    assert h.heartbeat("m", 1) == E.NOT_COORDINATOR
    assert h.gc.fetch_offsets("g", None)[0] == E.NOT_COORDINATOR
    h.gc.begin_loading(p)
    assert h.replies[h.join()]["error_code"] == E.GROUP_LOAD_IN_PROGRESS
    assert h.gc.describe_group("g")["error_code"] == E.GROUP_LOAD_IN_PROGRESS
    assert h.gc.list_groups()[0] == E.GROUP_LOAD_IN_PROGRESS
    assert h.replies[h.join(group="")]["error_code"] == E.INVALID_GROUP_ID


# ---- offsets ----------------------------------------------------------------------------------------------

def test_committed_offsets_are_written_then_served():
    h = Harness()
    (leader,), gen = h.stable_group(1)
    assert h.commit(leader, gen, {("t", 0): (42, "meta"), ("t", 1): (7, None)}) == {("t", 0): E.NONE,
                                                                                   ("t", 1): E.NONE}
    written = [decode_key(k) for _, k, _ in h.log[-2:]]
    assert written == [OffsetKey("g", "t", 0), OffsetKey("g", "t", 1)]
    error, offsets = h.gc.fetch_offsets("g", [TopicPartition("t", 0), TopicPartition("t", 2)])
    assert error == E.NONE
    assert offsets[TopicPartition("t", 0)].offset == 42
    assert offsets[TopicPartition("t", 0)].metadata == "meta"
    assert offsets[TopicPartition("t", 2)] is None


def test_leader_epochs_are_kept_in_value_v3_unless_the_commit_names_its_retention():
    """OffsetCommit v6's committed_leader_epoch goes to offset value v3 (Kafka 2.1's); a commit naming its own
    retention time (v2-v4) keeps value v1's expire timestamp, as Kafka 2.1 writes it; both survive a reload."""
    h = Harness()
    (leader,), gen = h.stable_group(1)
    t0, t1, t2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
    token = next(h.tokens)
    h.gc.commit_offsets(h.now, token, "g", gen, leader, {t0: (5, ""), t1: (6, "")}, -1, {t0: 4, t1: -1})
    token = next(h.tokens)
    h.gc.commit_offsets(h.now, token, "g", gen, leader, {t2: (7, "")}, 60_000, {t2: 4})
    h.drain()
    values = {decode_key(k).partition: decode_offset_value(v) for _, k, v in h.log if v is not None
              and isinstance(decode_key(k), OffsetKey)}
    retention = h.gc.config.offsets_retention_ms
    assert values == {0: OffsetValue(5, "", h.now, -1, 4), 1: OffsetValue(6, "", h.now, h.now + retention),
                      2: OffsetValue(7, "", h.now, h.now + 60_000)}
    stored = h.gc.fetch_offsets("g", None)[1]
    assert {tp: (o.leader_epoch, o.expire_timestamp) for tp, o in stored.items()} == {
        t0: (4, h.now + retention), t1: (-1, h.now + retention), t2: (4, h.now + 60_000)}
    p = h.gc.partition_for("g")
    new = Harness()
    new.gc.begin_loading(p)
    new.gc.finish_loading(p, [(k, v) for part, k, v in h.log if part == p], h.now)
    # value v3 has no expire timestamp: offsets.retention.minutes after the commit, as Kafka 2.1 reads it
    assert {tp: (o.offset, o.leader_epoch, o.expire_timestamp) for tp, o in new.gc.fetch_offsets("g", None)[1].items()
            } == {t0: (5, 4, h.now + retention), t1: (6, -1, h.now + retention), t2: (7, -1, h.now + 60_000)}


def test_commit_without_group_management_needs_a_negative_generation():
    h = Harness()
    assert h.commit("", -1, {("t", 0): (5, "")}, group="manual") == {("t", 0): E.NONE}
    assert h.gc.groups["manual"].state is GroupState.EMPTY


def test_failed_append_maps_to_the_coordinator_errors_and_caches_nothing():
    h = Harness()
    (leader,), gen = h.stable_group(1)
    h.fail_appends = E.NOT_LEADER_FOR_PARTITION
    assert h.commit(leader, gen, {("t", 0): (1, "")}) == {("t", 0): E.NOT_COORDINATOR}
    h.fail_appends = E.NOT_ENOUGH_REPLICAS
    assert h.commit(leader, gen, {("t", 0): (1, "")}) == {("t", 0): E.GROUP_COORDINATOR_NOT_AVAILABLE}
    h.fail_appends = E.MESSAGE_TOO_LARGE
    assert h.commit(leader, gen, {("t", 0): (1, "")}) == {("t", 0): E.INVALID_COMMIT_OFFSET_SIZE}
    assert h.gc.fetch_offsets("g", [TopicPartition("t", 0)])[1][TopicPartition("t", 0)] is None


def test_metadata_too_large_refuses_that_partition_only():
    h = Harness(offset_metadata_max_bytes=4)
    (leader,), gen = h.stable_group(1)
    assert h.commit(leader, gen, {("t", 0): (1, "12345"), ("t", 1): (1, "1234")}) == {
        ("t", 0): E.OFFSET_METADATA_TOO_LARGE, ("t", 1): E.NONE}


def test_failed_group_write_fails_the_sync_and_rebalances():
    h = Harness()
    t1 = h.join(client="a")
    leader = h.replies[t1]["member_id"]
    h.fail_appends = E.NOT_LEADER_FOR_PARTITION
    t = h.sync(leader, 1, {leader: b"A"})
    assert h.replies[t]["error_code"] == E.NOT_COORDINATOR
    assert h.state() is GroupState.PREPARING_REBALANCE


# ---- moving between coordinators ------------------------------------------------------------------------

def test_a_new_coordinator_loads_groups_and_offsets_and_the_members_carry_on():
    h = Harness()
    (leader, follower), gen = h.stable_group(2)
    h.commit(leader, gen, {("t", 0): (10, "")})
    h.commit(follower, gen, {("t", 1): (20, "")})
    p = h.gc.partition_for("g")
    records = [(k, v) for part, k, v in h.log if part == p]

    new = Harness()
    new.gc.unload(p)
    new.gc.begin_loading(p)
    new.gc.finish_loading(p, records, 0)
    group = new.gc.groups["g"]
    assert group.state is GroupState.STABLE and group.generation == gen and group.leader_id == leader
    assert new.heartbeat(follower, gen) == E.NONE
    assert new.replies[new.sync(follower, gen)] == {"error_code": E.NONE, "member_assignment": follower.encode()}
    assert {tp: o.offset for tp, o in new.gc.fetch_offsets("g", None)[1].items()} == {
        TopicPartition("t", 0): 10, TopicPartition("t", 1): 20}


def test_tombstones_delete_on_load():
    h = Harness()
    (leader,), gen = h.stable_group(1)
    h.commit(leader, gen, {("t", 0): (10, "")})
    p = h.gc.partition_for("g")
    records = [(k, v) for part, k, v in h.log if part == p]
    records += [(k, None) for k, _ in records]
    new = Harness()
    new.gc.begin_loading(p)
    new.gc.finish_loading(p, records, 0)
    assert "g" not in new.gc.groups


def test_unload_answers_waiting_members_not_coordinator():
    h = Harness()
    t1 = h.join(client="a")
    leader = h.replies[t1]["member_id"]
    t2 = h.join(client="b")
    h.gc.unload(h.gc.partition_for("g"))
    h.drain()
    assert h.replies[t2]["error_code"] == E.NOT_COORDINATOR
    assert "g" not in h.gc.groups
    assert h.heartbeat(leader, 1) == E.NOT_COORDINATOR


# ---- DescribeGroups and ListGroups --------------------------------------------------------------------------

def test_describe_and_list():
    h = Harness()
    (leader, follower), gen = h.stable_group(2)
    described = h.gc.describe_group("g")
    assert described["state"] == "Stable" and described["protocol"] == "range"
    assert described["protocol_type"] == "consumer"
    assert {m["member_id"]: m["member_assignment"] for m in described["members"]} == {
        leader: leader.encode(), follower: follower.encode()}
    assert h.gc.describe_group("nobody")["state"] == "Dead"
    h.join(client="x")
    preparing = h.gc.describe_group("g")
    assert preparing["state"] == "PreparingRebalance" and preparing["protocol"] == ""
    assert all(m["member_assignment"] == b"" for m in preparing["members"])
    assert h.gc.list_groups() == (E.NONE, [("g", "consumer")])


# ---- offsets retention ------------------------------------------------------------------------------------

def test_offsets_of_an_empty_group_expire_and_the_group_is_forgotten_with_tombstones():
    h = Harness(offsets_retention_ms=60_000)
    assert h.commit("", -1, {("t", 0): (5, "")}, group="idle") == {("t", 0): E.NONE}
    (leader,), gen = h.stable_group(1)
    h.commit(leader, gen, {("t", 0): (9, "")})
    h.now = 60_000
    assert h.gc.expire_offsets(h.now) == 1  # the active group's offsets stay (KIP-211)
    h.drain()
    assert "idle" not in h.gc.groups
    tombstones = [(decode_key(k), v) for _, k, v in h.log[-2:]]
    assert tombstones == [(OffsetKey("idle", "t", 0), None), (GroupKey("idle"), None)]
    assert h.gc.fetch_offsets("g", [TopicPartition("t", 0)])[1][TopicPartition("t", 0)].offset == 9


def test_delete_groups_forgets_an_empty_group_with_tombstones_and_refuses_the_others():
    h = Harness()
    (member,), gen = h.stable_group(1)
    assert h.commit(member, gen, {("t", 0): (5, ""), ("t", 1): (7, "")}) == {("t", 0): E.NONE, ("t", 1): E.NONE}
    assert h.gc.delete_groups(["g"]) == {"g": E.NON_EMPTY_GROUP}  # a member is in it
    assert h.leave(member) == E.NONE
    written = len(h.log)
    assert h.gc.delete_groups(["g", "nobody", ""]) == {"g": E.NONE, "nobody": E.GROUP_ID_NOT_FOUND,
                                                       "": E.INVALID_GROUP_ID}
    h.drain()
    assert "g" not in h.gc.groups
    tombstones = [(decode_key(k), v) for _, k, v in h.log[written:]]
    assert sorted((type(k).__name__, getattr(k, "partition", None)) for k, v in tombstones if v is None) == [
        ("GroupKey", None), ("OffsetKey", 0), ("OffsetKey", 1)]
    assert h.gc.delete_groups(["g"]) == {"g": E.GROUP_ID_NOT_FOUND}
    # a coordinator that replays the log forgets the group too
    replayed = Harness()
    partition = h.gc.partition_for("g")
    replayed.gc.begin_loading(partition)
    replayed.gc.finish_loading(partition, [(k, v) for p, k, v in h.log if p == partition], 0)
    assert "g" not in replayed.gc.groups


def test_delete_offsets_spares_the_topics_a_live_consumer_group_subscribes_to():
    from zkbroker.coordinator.consumer_protocol import encode_subscription

    h = Harness()
    token = h.join(protocols=[("range", encode_subscription(["t"]))])
    member, gen = h.replies[token]["member_id"], h.replies[token]["generation_id"]
    h.sync(member, gen, {member: b""})
    assert h.commit(member, gen, {("t", 0): (5, ""), ("u", 0): (6, "")}) == {("t", 0): E.NONE, ("u", 0): E.NONE}
    written = len(h.log)
    error, results = h.gc.delete_offsets("g", [TopicPartition("t", 0), TopicPartition("u", 0), TopicPartition("u", 9)])
    h.drain()
    assert error == E.NONE
    assert results == {TopicPartition("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, TopicPartition("u", 0): E.NONE,
                       TopicPartition("u", 9): E.NONE}
    assert set(h.gc.groups["g"].offsets) == {TopicPartition("t", 0)}
    assert [(decode_key(k).topic, v) for _, k, v in h.log[written:]] == [("u", None)]  # one tombstone
    assert h.leave(member) == E.NONE  # empty now: every offset may go
    assert h.gc.delete_offsets("g", [TopicPartition("t", 0)]) == (E.NONE, {TopicPartition("t", 0): E.NONE})
    assert h.gc.delete_offsets("nobody", [TopicPartition("t", 0)]) == (E.GROUP_ID_NOT_FOUND, {})


def test_delete_offsets_of_a_live_group_of_another_protocol_type_is_non_empty_group():
    h = Harness()
    h.join(protocol_type="connect")
    assert h.gc.delete_offsets("g", [TopicPartition("t", 0)]) == (E.NON_EMPTY_GROUP, {})


def test_a_retention_time_near_the_int64_maximum_saturates_instead_of_failing_the_commit():
    """Found by bench/fuzz.py: OffsetCommit v2 with retention_time_ms near Long.MAX_VALUE overflowed the expire
    timestamp of offset value v1 and the commit raised. It is stored as never expiring."""
    h = Harness()
    h.now = 1_700_000_000_000
    (leader,), gen = h.stable_group(1)
    token = next(h.tokens)
    h.gc.commit_offsets(h.now, token, "g", gen, leader, {TopicPartition("t", 0): (5, "")}, 2**63 - 5)
    h.drain()
    assert h.replies[token]["topics"][0]["partitions"][0]["error_code"] == E.NONE
    stored = h.gc.fetch_offsets("g", None)[1][TopicPartition("t", 0)]
    assert (stored.offset, stored.expire_timestamp) == (5, 2**63 - 1)

"""The real KafkaController driven event by event on an in-memory ZooKeeper (fakes.py): what it writes to the
znodes and what it sends to the brokers, for each 0.8.2 flow of reference §2, §3, §5."""

from __future__ import annotations

import json

import pytest

from controller.election import ControllerMovedError
from controller.events import (
    AlterReassignments,
    AutoLeaderRebalance,
    BrokerChange,
    ControlledShutdown,
    DeleteTopicsChange,
    ListReassignments,
    PreferredReplicaElectionChange,
    ReassignedPartitionIsrChange,
    ReassignPartitionsChange,
    TopicChange,
    TopicConfigChange,
    TopicDataChange,
    UncleanElection,
)
from controller.leadership_writer import read_leaderships
from controller.partition_state import PartitionState
from controller.replica_state import ReplicaState
from tests.unit.controller.fakes import ControllerHarness
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode
from zkbroker.zk import paths
from zkbroker.zk.znodes import TopicAssignment, encode_config_change


def _state(h: ControllerHarness, tp) -> tuple[int, list[int], int]:
    s = h.zk.state(*tp)
    return s["leader"], s["isr"], s["leader_epoch"]


# ---- failover, topic creation, new partitions ------------------------------------------------------------------


def test_failover_brings_new_partitions_online_and_sends_leader_and_isr_then_update_metadata(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (2, 1), 1: (3, 4)}})
    assert h.zk.state("t", 0) == {"version": 1, "leader": 2, "leader_epoch": 0, "controller_epoch": 2, "isr": [2, 1]}
    # Broker 4 is not registered: partition 1's first live replica leads, the ISR is the live replicas.
    assert _state(h, ("t", 1)) == (3, [3], 0)
    assert set(h.leader_and_isr(1)) == {("t", 0)} and set(h.leader_and_isr(3)) == {("t", 1)}
    assert h.leader_and_isr(2)[("t", 0)]["replicas"] == [2, 1]
    for broker in (1, 2, 3):
        assert set(h.update_metadata(broker)) == {("t", 0), ("t", 1)}
    kinds = [s.api_key for s in h.channel.sent]
    assert kinds == sorted(kinds, key=[ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA].index)


def test_new_topic_goes_online_and_its_data_is_watched_for_new_partitions(monkeypatch):
    h = ControllerHarness(monkeypatch)
    h.zk.put(paths.topic_path("new"), TopicAssignment({0: (1, 2)}).encode())
    h.process(TopicChange())
    assert _state(h, ("new", 0)) == (1, [1, 2], 0)
    assert h.controller.replica_state_machine.states[("new", 0, 2)] is ReplicaState.ONLINE
    assert paths.topic_path("new") in h.zk.data_watches

    h.zk.put(paths.topic_path("new"), TopicAssignment({0: (1, 2), 1: (2, 3)}).encode())
    h.process(TopicDataChange("new"))
    assert _state(h, ("new", 1)) == (2, [2, 3], 0)
    assert set(h.leader_and_isr(3)) == {("new", 1)}  # only the new partition is announced
    assert h.zk.state("new", 0)["leader_epoch"] == 0


def test_a_partition_node_left_without_state_by_an_older_controller_still_goes_online(monkeypatch):
    h = ControllerHarness(monkeypatch)
    h.zk.put(paths.partition_path("old", 1), b"")  # 0.8.2 created the parents and the state separately
    h.zk.put(paths.topic_path("old"), TopicAssignment({0: (1,), 1: (2,)}).encode())
    h.process(TopicChange())
    assert (_state(h, ("old", 0))[0], _state(h, ("old", 1))[0]) == (1, 2)


def test_unreadable_topic_and_state_znodes_are_skipped_and_the_rest_still_works(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"good": {0: (1, 2)}})
    h.zk.put(paths.topic_path("bad"), b"{not json")
    h.zk.put(paths.topic_path("half"), TopicAssignment({0: (2, 3)}).encode())
    h.zk.put(paths.partition_state_path("half", 0), b'{"version":1,"leader":"two"}')
    h.process(TopicChange())
    assert h.controller.context.all_topics == {"good", "bad", "half"}
    assert ("bad", 0) not in h.controller.context.assignments
    assert h.zk.nodes[paths.partition_state_path("half", 0)][0] == b'{"version":1,"leader":"two"}'
    h.unregister(1)
    h.process(BrokerChange())
    assert _state(h, ("good", 0)) == (2, [2], 1)


# ---- broker failure and startup --------------------------------------------------------------------------------


def test_broker_failure_elects_from_the_live_isr_in_assignment_order_and_shrinks_other_isrs(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 3, 2), 1: (2, 1)}},
                          states={("t", 0): (1, (1, 2, 3)), ("t", 1): (2, (2, 1))})
    h.unregister(1)
    h.process(BrokerChange())
    assert _state(h, ("t", 0)) == (3, [2, 3], 1)  # AR order, not ISR order
    assert _state(h, ("t", 1)) == (2, [2], 1)
    assert h.leader_and_isr(3)[("t", 0)]["leader"] == 3
    assert h.controller.replica_state_machine.states[("t", 0, 1)] is ReplicaState.OFFLINE


def test_a_fast_bounce_goes_unnoticed_unless_broker_epochs_are_on(monkeypatch):
    # KAFKA-1120: broker 2 re-registered (a new znode) before the controller read /brokers/ids.
    for epochs, noticed in (("false", False), ("true", True)):
        h = ControllerHarness(monkeypatch, topics={"t": {0: (2, 1)}}, states={("t", 0): (2, (2, 1))},
                              broker_epoch_enable=epochs)
        h.unregister(2)
        h.register(2)
        h.process(BrokerChange())
        if noticed:  # KIP-380: a failure (broker 1 leads) and a startup (broker 2 told to follow)
            assert _state(h, ("t", 0))[0] == 1
            assert h.leader_and_isr(2)[("t", 0)]["leader"] == 1
        else:  # 0.8.2: the same id set, so nothing at all happens
            assert _state(h, ("t", 0)) == (2, [2, 1], 0) and h.channel.sent == []


def test_a_pause_in_the_middle_of_an_event_that_cost_the_session_sends_nothing(monkeypatch):
    # The controller reads /brokers/ids, is frozen past its session timeout before the answer is used, and on
    # resume its ZooKeeper client already holds a new session: what it decided must not reach the brokers.
    h = ControllerHarness(monkeypatch, brokers=(1, 2), topics={"t": {0: (1, 3)}}, states={("t", 0): (1, (1,))})
    read_children = h.zk.get_children

    def read_then_lose_the_session(path: str) -> list[str]:
        children = read_children(path)
        if path == paths.BROKER_IDS:
            h.zk.session_id = 2
        return children

    monkeypatch.setattr(h.zk, "get_children", read_then_lose_the_session)
    h.register(3)
    channel = h.channel
    with pytest.raises(ControllerMovedError, match="its requests .* are not sent"):
        h.process(BrokerChange())
    assert channel.sent == []
    assert not h.controller.is_active()


def test_unclean_election_disabled_keeps_the_partition_offline_with_its_last_isr_member(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2)}}, states={("t", 0): (1, (1,))},
                          unclean_leader_election_enable="false")
    h.unregister(1)
    h.process(BrokerChange())
    assert _state(h, ("t", 0)) == (-1, [1], 1)
    assert h.controller.partition_state_machine.states[("t", 0)] is PartitionState.OFFLINE
    h.register(1)
    h.process(BrokerChange())
    assert _state(h, ("t", 0))[:2] == (1, [1])


def test_an_unclean_election_on_request_elects_a_live_replica_out_of_the_isr_whatever_the_config(monkeypatch):
    # KIP-460: the ISR's only member is dead and unclean.leader.election.enable is off; the Admin API asks anyway.
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2), 1: (2, 3), 2: (1, 4)}},
                          states={("t", 0): (1, (1,)), ("t", 1): (2, (2, 3)), ("t", 2): (1, (1,))},
                          unclean_leader_election_enable="false")
    h.unregister(1)
    h.process(BrokerChange())
    assert _state(h, ("t", 0)) == (-1, [1], 1)
    answers = []
    h.process(UncleanElection((("t", 0), ("t", 1), ("t", 2), ("t", 9)), answers.append))
    assert answers == [{("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.ELECTION_NOT_NEEDED,
                        ("t", 2): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,  # broker 4 was never there
                        ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}]
    assert _state(h, ("t", 0)) == (2, [2], 2)
    assert h.leader_and_isr(2)[("t", 0)]["leader"] == 2
    assert not h.controller.unclean_election_enabled("t")  # the topic's config is unchanged


def test_a_per_topic_override_changed_through_config_changes_reaches_the_controller(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2)}}, states={("t", 0): (1, (1,))})
    assert h.controller.unclean_election_enabled("t")
    h.zk.put(paths.topic_config_path("t"), b'{"version":1,"config":{"unclean.leader.election.enable":"false"}}')
    h.zk.put(f"{paths.CONFIG_CHANGES}/config_change_0000000000", encode_config_change("t"))
    h.process(TopicConfigChange())
    assert not h.controller.unclean_election_enabled("t")


def test_a_bad_per_topic_override_leaves_the_broker_value_in_force(monkeypatch):
    # "no" is not a boolean to the config table: the broker's value (true) stands, and the error is logged.
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2)}}, states={("t", 0): (1, (1,))})
    h.zk.put(paths.topic_config_path("t"), b'{"version":1,"config":{"unclean.leader.election.enable":"no"}}')
    h.zk.put(f"{paths.CONFIG_CHANGES}/config_change_0000000000", encode_config_change("t"))
    h.process(TopicConfigChange())
    assert h.controller.unclean_election_enabled("t")


def test_stale_state_written_by_a_newer_controller_epoch_aborts_the_election(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2)}}, states={("t", 0): (1, (1, 2))})
    h.put_state("t", 0, 1, (1, 2), leader_epoch=7, controller_epoch=3)
    h.unregister(1)
    h.process(BrokerChange())
    assert h.zk.state("t", 0)["leader_epoch"] == 7


# ---- controlled shutdown -----------------------------------------------------------------------------------------


def _shutdown(h: ControllerHarness, broker_id: int):
    answers = []
    event = ControlledShutdown(broker_id, lambda code, remaining: answers.append((code, remaining)))
    h.process(event)
    return answers


def test_controlled_shutdown_moves_leadership_to_the_isr_and_drops_the_broker_from_other_isrs(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2, 3), 1: (2, 1), 2: (1,)}},
                          states={("t", 0): (1, (1, 3, 2)), ("t", 1): (2, (2, 1)), ("t", 2): (1, (1,))})
    assert _shutdown(h, 1) == [(ErrorCode.NONE, [])]
    assert _state(h, ("t", 0)) == (3, [3, 2], 1)  # ISR order, minus the shutting-down broker
    assert h.leader_and_isr(1)[("t", 0)]["leader"] == 3  # the leaving broker hears it is a follower now
    assert _state(h, ("t", 1)) == (2, [2], 1)
    assert h.stop_replica(1, delete=False) == [("t", 1)]
    assert _state(h, ("t", 2)) == (1, [1], 0)  # a single replica is not moved
    assert 1 in h.controller.context.shutting_down_broker_ids
    assert 1 not in h.controller.context.live_broker_ids
    h.unregister(1)
    h.process(BrokerChange())
    assert not h.controller.context.shutting_down_broker_ids


def test_controlled_shutdown_answers_the_partitions_it_could_not_move(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2)}}, states={("t", 0): (1, (1,))})
    assert _shutdown(h, 1) == [(ErrorCode.NONE, [("t", 0)])]
    assert _shutdown(h, 9) == [(ErrorCode.BROKER_NOT_AVAILABLE, [])]


def test_controlled_shutdown_refused_by_a_broker_that_is_not_the_controller(monkeypatch):
    h = ControllerHarness(monkeypatch)
    h.controller._on_controller_resignation()
    answers = []
    event = ControlledShutdown(2, lambda code, remaining: answers.append((code, remaining)))
    h.controller._process(event)
    event.answer(ErrorCode.UNKNOWN)  # what the event loop does for an unanswered request
    assert answers == [(ErrorCode.UNKNOWN, [])]


# ---- preferred replica election and the auto-rebalance ------------------------------------------------------------


def test_preferred_replica_election_moves_leadership_back_and_deletes_the_admin_node(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2), 1: (3, 2), 2: (1, 3)}},
                          states={("t", 0): (2, (2, 1)), ("t", 1): (2, (2,)), ("t", 2): (1, (1, 3))})
    h.zk.put(paths.PREFERRED_REPLICA_ELECTION,
             b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"t","partition":1},'
             b'{"topic":"t","partition":2},{"topic":"gone","partition":0}]}')
    h.process(PreferredReplicaElectionChange())
    assert _state(h, ("t", 0)) == (1, [2, 1], 1)  # ISR unchanged
    assert _state(h, ("t", 1)) == (2, [2], 0)  # preferred replica 3 is not in the ISR: no change
    assert _state(h, ("t", 2)) == (1, [1, 3], 0)  # already led by the preferred replica
    assert paths.PREFERRED_REPLICA_ELECTION not in h.zk.nodes
    assert not h.controller.context.partitions_undergoing_preferred_election


def test_unreadable_preferred_election_node_is_deleted_and_changes_nothing(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2)}}, states={("t", 0): (2, (2, 1))})
    h.zk.put(paths.PREFERRED_REPLICA_ELECTION, b'{"partitions": "all of them"}')
    h.process(PreferredReplicaElectionChange())
    assert paths.PREFERRED_REPLICA_ELECTION not in h.zk.nodes
    assert _state(h, ("t", 0))[0] == 2


def test_pending_preferred_election_is_resumed_at_failover(monkeypatch):
    states = {("t", 0): (2, (2, 1))}
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2)}}, states=states)
    h.zk.put(paths.PREFERRED_REPLICA_ELECTION, b'{"version":1,"partitions":[{"topic":"t","partition":0}]}')
    h.controller._on_controller_resignation()
    h.controller._on_controller_failover()
    assert _state(h, ("t", 0))[0] == 1
    assert paths.PREFERRED_REPLICA_ELECTION not in h.zk.nodes


def test_auto_rebalance_moves_leaders_back_when_a_brokers_imbalance_exceeds_the_percentage(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2), 1: (1, 2), 2: (2, 1)}},
                          states={("t", 0): (2, (2, 1)), ("t", 1): (1, (1, 2)), ("t", 2): (2, (2, 1))},
                          leader_imbalance_per_broker_percentage="50")
    h.process(AutoLeaderRebalance())
    assert _state(h, ("t", 0))[0] == 2  # broker 1's imbalance is 1/2, not above 50%
    h.put_state("t", 1, 2, (2, 1))
    h.controller.context.leadership[("t", 1)] = read_leaderships(h.zk, [("t", 1)])[("t", 1)]
    h.process(AutoLeaderRebalance())
    assert (_state(h, ("t", 0))[0], _state(h, ("t", 1))[0]) == (1, 1)
    assert paths.PREFERRED_REPLICA_ELECTION not in h.zk.nodes


# ---- topic deletion --------------------------------------------------------------------------------------------------


def test_topic_deletion_stops_and_deletes_every_replica_then_removes_every_znode(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2), 1: (2, 3)}, "keep": {0: (1, 2)}},
                          delete_topic_enable="true")
    h.zk.put(paths.delete_topic_path("t"), b"")
    h.process(DeleteTopicsChange())
    assert {tp: s["leader"] for tp, s in h.update_metadata(3).items() if tp[0] == "t"} == {("t", 0): -2, ("t", 1): -2}
    assert sorted(h.stop_replica(2, delete=True)) == [("t", 0), ("t", 1)]
    assert h.stop_replica(1, delete=False) == [("t", 0)]
    assert paths.topic_path("t") in h.zk.nodes  # not before the brokers answer
    h.answer_stop_replicas()
    for path in (paths.topic_path("t"), paths.topic_config_path("t"), paths.delete_topic_path("t"),
                 paths.partition_state_path("t", 0)):
        assert path not in h.zk.nodes
    assert paths.topic_path("keep") in h.zk.nodes
    ctx = h.controller.context
    assert "t" not in ctx.all_topics and ("t", 0) not in ctx.assignments
    assert not [r for r in h.controller.replica_state_machine.states if r[0] == "t"]
    assert not h.controller.deletion.topics_to_be_deleted


def test_topic_deletion_waits_for_a_dead_replica_and_resumes_when_its_broker_returns(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 3)}}, delete_topic_enable="true")
    h.unregister(3)
    h.process(BrokerChange())
    h.zk.put(paths.delete_topic_path("t"), b"")
    h.process(DeleteTopicsChange())
    assert h.stop_replica(1, delete=True) == [("t", 0)]
    h.answer_stop_replicas()
    assert paths.topic_path("t") in h.zk.nodes
    assert h.controller.deletion.is_ineligible("t")
    h.register(3)
    h.process(BrokerChange())
    assert h.stop_replica(3, delete=True) == [("t", 0)]
    h.answer_stop_replicas()
    assert paths.topic_path("t") not in h.zk.nodes


def test_a_failed_replica_deletion_is_retried(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2)}}, delete_topic_enable="true")
    h.zk.put(paths.delete_topic_path("t"), b"")
    h.process(DeleteTopicsChange())
    h.answer_stop_replicas(error_code=ErrorCode.UNKNOWN)
    assert paths.topic_path("t") in h.zk.nodes
    h.controller.deletion.resume({"t"})
    h.process(TopicChange())  # any event lets the deletion work run again
    h.answer_stop_replicas()
    assert paths.topic_path("t") not in h.zk.nodes


def test_a_deletion_left_unfinished_is_resumed_at_failover(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2)}}, delete_topic_enable="true")
    h.zk.put(paths.delete_topic_path("t"), b"")
    h.controller._on_controller_resignation()
    h.controller._on_controller_failover()
    assert sorted(h.stop_replica(1, delete=True) + h.stop_replica(2, delete=True)) == [("t", 0), ("t", 0)]
    h.answer_stop_replicas()
    assert paths.topic_path("t") not in h.zk.nodes


def test_deleting_an_unknown_topic_only_removes_its_mark(monkeypatch):
    h = ControllerHarness(monkeypatch, delete_topic_enable="true")
    h.zk.put(paths.delete_topic_path("ghost"), b"")
    h.process(DeleteTopicsChange())
    assert paths.delete_topic_path("ghost") not in h.zk.nodes


def test_with_deletion_disabled_nobody_watches_the_marks(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2)}})
    assert paths.DELETE_TOPICS not in h.zk.child_watches


# ---- reassignment ----------------------------------------------------------------------------------------------------


def test_reassignment_runs_the_twelve_steps(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2), 1: (1, 2)}},
                          states={("t", 0): (1, (1, 2)), ("t", 1): (1, (1, 2))})
    h.zk.put(paths.REASSIGN_PARTITIONS, b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}')
    h.process(ReassignPartitionsChange())
    # 1. AR = OAR + RAR in ZooKeeper; 2. leader epoch + 1 and LeaderAndIsr to all of them; 3. 3 starts as follower.
    assert h.zk.json(paths.topic_path("t"))["partitions"] == {"0": [1, 2, 3], "1": [1, 2]}
    assert _state(h, ("t", 0)) == (1, [1, 2], 1)
    for broker in (1, 2, 3):
        assert h.leader_and_isr(broker)[("t", 0)]["replicas"] == [1, 2, 3]
    assert paths.REASSIGN_PARTITIONS in h.zk.nodes
    # 4. the leader adds 3 to the ISR ...
    h.put_state("t", 0, 1, (1, 2, 3), leader_epoch=1)
    h.process(ReassignedPartitionIsrChange(("t", 0)))
    # 7. leader moved into RAR; 8. 1 out of the ISR; 9. 1 deletes its replica; 10-11. AR = RAR, node gone.
    leader, isr, _ = _state(h, ("t", 0))
    assert (leader, isr) == (2, [2, 3])
    assert h.stop_replica(1, delete=True) == [("t", 0)]
    assert h.zk.json(paths.topic_path("t"))["partitions"] == {"0": [2, 3], "1": [1, 2]}
    assert paths.REASSIGN_PARTITIONS not in h.zk.nodes
    assert h.update_metadata(1)[("t", 0)]["replicas"] == [2, 3]
    assert h.controller.context.assignments[("t", 0)] == (2, 3)


def test_reassignment_to_a_dead_broker_or_an_unknown_partition_is_refused_and_removed(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2)}}, states={("t", 0): (1, (1, 2))})
    h.zk.put(paths.REASSIGN_PARTITIONS, json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 7]},
        {"topic": "t", "partition": 5, "replicas": [1, 2]}]}).encode())
    h.process(ReassignPartitionsChange())
    assert paths.REASSIGN_PARTITIONS not in h.zk.nodes
    assert h.zk.json(paths.topic_path("t"))["partitions"] == {"0": [1, 2]}


def test_unreadable_reassignment_node_is_deleted_and_the_controller_carries_on(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2)}}, states={("t", 0): (1, (1, 2))})
    h.zk.put(paths.REASSIGN_PARTITIONS, b'{"version":1,"partitions":{"topic":"t"}}')
    h.process(ReassignPartitionsChange())
    assert paths.REASSIGN_PARTITIONS not in h.zk.nodes
    h.unregister(1)
    h.process(BrokerChange())
    assert _state(h, ("t", 0))[0] == 2


def _api(h: ControllerHarness, event_type, argument):
    answers = []
    h.process(event_type(argument, answers.append))
    return answers[0]


def test_an_api_reassignment_keeps_its_moves_in_a_version_2_topic_znode_and_is_listed_until_done(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2), 1: (1, 2)}},
                          states={("t", 0): (1, (1, 2)), ("t", 1): (1, (1, 2))})
    answers = _api(h, AlterReassignments, {("t", 0): (2, 3), ("t", 1): (1, 2), ("t", 7): (1, 2),
                                           ("t", 2): None})
    assert {tp: code for tp, (code, _) in answers.items()} == {
        ("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE, ("t", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 2): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert h.zk.json(paths.topic_path("t")) == {"version": 2, "partitions": {"0": [1, 2, 3], "1": [1, 2]},
                                                "adding_replicas": {"0": [3]}, "removing_replicas": {"0": [1]}}
    assert paths.REASSIGN_PARTITIONS not in h.zk.nodes  # the API's moves are not the ZooKeeper tool's
    assert _api(h, ListReassignments, None) == {("t", 0): ((1, 2, 3), (3,), (1,))}
    again = _api(h, AlterReassignments, {("t", 0): (3, 2), ("t", 1): None})
    assert {tp: code for tp, (code, _) in again.items()} == {
        ("t", 0): ErrorCode.REASSIGNMENT_IN_PROGRESS, ("t", 1): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
    h.put_state("t", 0, 1, (1, 2, 3), leader_epoch=1)  # the new replica caught up
    h.process(ReassignedPartitionIsrChange(("t", 0)))
    assert h.zk.json(paths.topic_path("t")) == {"version": 1, "partitions": {"0": [2, 3], "1": [1, 2]}}
    assert h.stop_replica(1, delete=True) == [("t", 0)]
    assert _api(h, ListReassignments, None) == {}


def test_cancelling_an_api_reassignment_goes_back_to_the_original_replicas(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2)}}, states={("t", 0): (1, (1, 2))})
    _api(h, AlterReassignments, {("t", 0): (1, 3)})
    assert h.zk.json(paths.topic_path("t"))["partitions"] == {"0": [1, 2, 3]}
    assert _api(h, AlterReassignments, {("t", 0): None}) == {("t", 0): (ErrorCode.NONE, None)}
    assert h.zk.json(paths.topic_path("t")) == {"version": 1, "partitions": {"0": [1, 2]}}
    assert h.stop_replica(3, delete=True) == [("t", 0)]  # the replica it was adding goes
    assert _api(h, ListReassignments, [("t", 0)]) == {}


def test_an_api_reassignment_is_resumed_at_failover_from_the_topic_znode(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2)}}, states={("t", 0): (1, (1, 2))})
    _api(h, AlterReassignments, {("t", 0): (2, 3)})
    h.controller._on_controller_resignation()
    h.controller.context.api_reassignments.clear()  # what a new controller would not know
    h.controller._on_controller_failover()
    assert _api(h, ListReassignments, None) == {("t", 0): ((1, 2, 3), (3,), (1,))}
    h.put_state("t", 0, 1, (1, 2, 3), leader_epoch=1)
    h.process(ReassignedPartitionIsrChange(("t", 0)))
    assert h.zk.json(paths.topic_path("t")) == {"version": 1, "partitions": {"0": [2, 3]}}


def test_reassignment_is_resumed_at_failover(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2, 3)}}, states={("t", 0): (1, (1, 2, 3))})
    h.zk.put(paths.REASSIGN_PARTITIONS, b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}')
    h.controller._on_controller_resignation()
    h.controller._on_controller_failover()
    assert h.zk.json(paths.topic_path("t"))["partitions"] == {"0": [2, 3]}
    assert _state(h, ("t", 0))[:2] == (2, [2, 3])
    assert paths.REASSIGN_PARTITIONS not in h.zk.nodes

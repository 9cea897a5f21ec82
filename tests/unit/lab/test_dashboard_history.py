"""History as pictures and replay, from a hand-made timeline: leadership bands per leader epoch, ISR
membership, HW and log-end lines, acks per second and their gaps, fault bands; and the cluster rebuilt at
any moment of the run."""

from __future__ import annotations

from zkbroker.lab.dashboard.events import broker_of, matches
from zkbroker.lab.dashboard.history import history
from zkbroker.lab.dashboard.replay import snapshot_at
from zkbroker.lab.dashboard.snapshot import BrokerProcess, ZooKeeperServer
from zkbroker.lab.dashboard.views import cluster_view, partitions_view

T = 1_795_000_000_000.0


def ev(dt: float, source: str, kind: str, **fields) -> dict:
    return {"ts": T + dt, "source": source, "kind": kind, **fields}


TP = {"topic": "t", "partition": 0}
RUN = [
    ev(0, "lab", "process_started", node="broker:1", pid=11),
    ev(1, "lab", "process_started", node="broker:2", pid=12),
    ev(100, "broker:1", "broker_registered", broker=1, session=0x10, host="127.0.0.1", port=9092),
    ev(110, "broker:2", "broker_registered", broker=2, session=0x11, host="127.0.0.1", port=9093),
    ev(200, "controller:1", "controller_elected", broker=1, epoch=1),
    ev(300, "controller:1", "leader_changed", **TP, leader=1, leader_epoch=0, isr=[1, 2], zk_version=0),
    ev(310, "broker:1", "leader_and_isr_applied", **TP, leader=1, leader_epoch=0, isr=[1, 2], controller_epoch=1),
    ev(320, "broker:2", "leader_and_isr_applied", **TP, leader=1, leader_epoch=0, isr=[1, 2], controller_epoch=1),
    ev(400, "client:p", "produce_acked", **TP, offset=0, acks=-1),
    ev(450, "broker:1", "hw_moved", **TP, broker=1, **{"from": 0, "to": 1}),
    ev(500, "client:p", "produce_acked", **TP, offset=1, acks=-1),
    ev(1000, "lab", "process_killed", node="broker:1", pid=11, signal="SIGKILL"),
    ev(4000, "broker:1", "broker_expired", broker=1, session=0x10),
    ev(4100, "controller:2", "controller_elected", broker=2, epoch=2),
    ev(4200, "controller:2", "leader_changed", **TP, leader=2, leader_epoch=1, isr=[2], zk_version=1),
    ev(4300, "broker:2", "produce_acked", **TP, offset=2, last_offset=4, acks=-1),
    ev(5000, "lab", "process_started", node="broker:1", pid=21),
    ev(5100, "broker:1", "truncated", **TP, **{"from": 2, "to": 1}, reason="high-watermark"),
    ev(6000, "broker:2", "isr_changed", **TP, broker=2, isr=[2, 1], **{"from": [2]}),
]
BROKERS = [BrokerProcess(1, "127.0.0.1", 9092, 21, "running"), BrokerProcess(2, "127.0.0.1", 9093, 12, "running")]
SERVERS = [ZooKeeperServer(1, "127.0.0.1", 2181, 9, "standalone")]


def test_events_are_attributed_and_filtered():
    assert broker_of(RUN[0]) == 1 and broker_of(RUN[5]) == 1 and broker_of(RUN[8]) is None
    assert [e["kind"] for e in RUN if matches(e, broker=2)] == [
        "process_started", "broker_registered", "leader_and_isr_applied", "controller_elected",
        "leader_changed", "produce_acked", "isr_changed"]
    assert len([e for e in RUN if matches(e, topic="t", partition=0, kinds=["produce_acked"])]) == 3
    assert [e["kind"] for e in RUN if matches(e, since=T + 5000)] == ["truncated", "isr_changed"]
    assert not [e for e in RUN if matches(e, exclude={"produce_acked"}) and e["kind"] == "produce_acked"]


def test_history_bands_lines_and_gaps():
    h = history(RUN)
    assert (h["start"], h["end"]) == (T, T + 6000)
    assert [(c["broker"], c["epoch"], c["end"]) for c in h["controllers"]] == [(1, 1, T + 4100), (2, 2, None)]
    assert h["faults"] == [{"start": T + 1000, "end": T + 5000, "node": "broker:1", "what": "broker:1 killed"}]
    (p,) = h["partitions"]
    assert [(b["leader"], b["leader_epoch"], b["start"], b["end"]) for b in p["leadership"]] == [
        (1, 0, T + 300, T + 4200), (2, 1, T + 4200, None)]
    assert [s["isr"] for s in p["isr"]] == [[1, 2], [2], [1, 2]]
    assert p["isr_members"] == {"1": [[T + 300, T + 4200], [T + 6000, None]], "2": [[T + 300, None]]}
    assert p["hw"] == {"1": [[T + 450, 1]]}
    assert p["log_end"]["1"] == [[T + 400, 1], [T + 500, 2], [T + 5100, 1]]  # acked, acked, then truncated
    assert p["log_end"]["2"] == [[T + 4300, 5]]  # a batch of offsets 2-4 acknowledged by its leader
    assert p["ack_gaps"] == [{"start": T + 500, "end": T + 4300}]
    assert sum(n for _, n in p["acks"]) == 5
    assert p["truncations"] == [{"ts": T + 5100, "broker": 1, "from": 2, "to": 1, "reason": "high-watermark"}]


def test_a_new_leader_epoch_for_the_same_leader_is_a_new_band():
    h = history([ev(0, "controller:1", "leader_changed", **TP, leader=1, leader_epoch=0, isr=[1, 2], zk_version=0),
                 ev(5, "controller:1", "isr_changed", **TP, leader=1, leader_epoch=1, isr=[1], zk_version=1),
                 ev(9, "broker:1", "isr_changed", **TP, broker=1, isr=[1, 2], leader_epoch=1, zk_version=2)])
    (p,) = h["partitions"]
    assert [(b["leader"], b["leader_epoch"]) for b in p["leadership"]] == [(1, 0), (1, 1)]
    assert [s["isr"] for s in p["isr"]] == [[1, 2], [1], [1, 2]]


def test_an_empty_timeline_has_an_empty_history():
    assert history([]) == {"start": None, "end": None, "controllers": [], "quorum": [], "faults": [],
                           "partitions": []}


def test_the_quorums_leadership_epochs_are_bands_from_the_controllers_raft_states():
    h = history([ev(0, "controller:3001", "raft_state", node=3001, state="candidate", epoch=1),
                 ev(10, "controller:3001", "raft_state", node=3001, state="leader", epoch=1, leader=3001),
                 ev(15, "controller:3002", "raft_state", node=3002, state="follower", epoch=1, leader=3001),
                 ev(50, "controller:3002", "raft_state", node=3002, state="candidate", epoch=2),
                 ev(60, "controller:3002", "raft_state", node=3002, state="leader", epoch=2, leader=3002),
                 ev(70, "controller:3002", "raft_state", node=3002, state="resigned", epoch=2)])
    assert h["quorum"] == [{"start": T + 10, "end": T + 50, "node": 3001, "epoch": 1},
                           {"start": T + 60, "end": T + 70, "node": 3002, "epoch": 2}]


def test_a_pause_band_ends_at_resume_and_a_partition_band_at_heal():
    h = history([ev(0, "lab", "process_paused", node="broker:2", pid=1),
                 ev(5, "lab", "fault_applied", fault="partition", node="broker:1", peers=["zookeeper"], one_way=False),
                 ev(10, "lab", "process_resumed", node="broker:2", pid=1),
                 ev(20, "lab", "fault_healed", fault="partition", node="broker:1", peers=["zookeeper"], one_way=False)])
    assert [(f["what"], f["start"] - T, f["end"] - T) for f in h["faults"]] == [
        ("broker:2 paused", 0, 10), ("broker:1 cut off from zookeeper", 5, 20)]


def replay(at: float, nodes=()):
    zk, processes, beliefs, servers = snapshot_at(RUN, T + at, BROKERS, SERVERS, {("t", 0): (1, 2)}, nodes)
    return cluster_view(zk, processes, beliefs, servers), partitions_view(zk, beliefs)


def test_replay_before_the_failure():
    cluster, (p,) = replay(600)
    assert cluster["controller"]["broker"] == 1 and cluster["controller"]["epoch"] == 1
    assert [(b["state"], b["registered"], b["session"]) for b in cluster["brokers"]] == [
        ("running", True, "0x10"), ("running", True, "0x11")]
    assert (p["leader"], p["leader_epoch"], p["isr"], p["assigned"]) == (1, 0, [1, 2], [1, 2])
    assert [(r["believes_leader"], r["hw"]) for r in p["replicas"]] == [(1, 1), (1, None)]
    assert cluster["brokers"][0]["controller_epoch_seen"] == 1


def test_replay_after_the_kill_shows_the_new_controller_and_the_stale_belief():
    cluster, (p,) = replay(4250)
    assert cluster["controller"] == {"broker": 2, "epoch": 2, "elected_at": int(T + 4100), "epoch_zk_version": None}
    assert [(b["state"], b["registered"]) for b in cluster["brokers"]] == [("dead", False), ("running", True)]
    assert (p["leader"], p["leader_epoch"], p["isr"]) == (2, 1, [2])
    # broker 2 never recorded the new LeaderAndIsr in this timeline: its belief (epoch 0, leader 1) is stale
    assert "stale_leader_epoch" in p["replicas"][1]["mismatch"]


def test_replay_before_a_broker_started_shows_it_dead():
    cluster, _ = replay(0.5)
    assert [b["state"] for b in cluster["brokers"]] == ["running", "dead"]


def test_replay_shows_a_partition_in_force():
    events = RUN + [ev(7000, "lab", "fault_applied", fault="partition", node="broker:1", peers=["zookeeper"],
                       one_way=False)]
    zk, processes, _, _ = snapshot_at(events, T + 7001, BROKERS, SERVERS, {}, ["broker:1", "broker:2", "zookeeper:1"])
    assert processes[0].cut_off_from == ("zookeeper:1",) and processes[1].cut_off_from == ()


def test_replay_without_recorded_registrations_leaves_them_unknown():
    events = [e for e in RUN if e["kind"] not in ("broker_registered", "broker_expired")]
    zk, processes, beliefs, servers = snapshot_at(events, T + 4250, BROKERS, SERVERS, {})
    cluster = cluster_view(zk, processes, beliefs, servers)
    assert [(b["state"], b["registered"], b["mismatches"]) for b in cluster["brokers"]] == [
        ("dead", None, []), ("running", None, [])]

"""A KRaft lab's pure parts (DESIGN §17): cluster.json's KRaft form, the controllers' addresses in the lab network,
their server.properties, the quorum as `lab status` and the dashboard show it, the votes of the last election,
and the KRaft torture's seeded plan."""

from __future__ import annotations

import json

import pytest

from zkbroker.config import KafkaConfig
from zkbroker.lab.cluster import ClusterFile, ControllerEntry, LabCluster, LabError, member_label, member_node
from zkbroker.lab.dashboard.views import kraft_cluster_at, kraft_cluster_view, last_election_votes
from zkbroker.lab.kraft_lab import (
    broker_properties,
    broker_serving,
    controller_properties,
    leaderless_windows,
    quorum_status,
    voters_value,
)
from zkbroker.lab.kraft_torture import plan
from zkbroker.lab.network import NetworkError, plan_addresses


def _entry(node: int) -> ControllerEntry:
    return ControllerEntry(node, "127.0.0.1", 9090 + node - 3000, 100 + node,
                           f"/lab/controller-{node}/server.properties", f"/lab/controller-{node}/control.sock")


def test_cluster_json_of_a_kraft_lab_has_mode_and_controllers_and_no_zookeeper_keys(tmp_path):
    lab = LabCluster(tmp_path)
    lab.save(ClusterFile("", None, mode="kraft", controllers=[_entry(3001), _entry(3002)]))
    raw = json.loads(lab.cluster_file.read_text())
    assert raw["mode"] == "kraft" and not {"zookeeper", "zookeeper_pid", "zookeepers"} & set(raw)
    assert raw["controllers"][0] == {"id": 3001, "host": "127.0.0.1", "port": 9091, "pid": 3101,
                                     "config": "/lab/controller-3001/server.properties",
                                     "control": "/lab/controller-3001/control.sock"}
    loaded = lab.load()
    assert loaded.kraft and loaded.member("controller:3002").id == 3002
    lab.save(ClusterFile("127.0.0.1:2181/x", 1))
    raw = json.loads(lab.cluster_file.read_text())
    assert raw["mode"] == "zookeeper" and "controllers" not in raw and raw["zookeeper"] == "127.0.0.1:2181/x"


def test_members_are_brokers_by_id_or_controllers_by_name():
    cluster = ClusterFile("", None, mode="kraft", controllers=[_entry(3001)])
    assert (member_node(2), member_node("controller:3001")) == ("broker:2", "controller:3001")
    assert member_label("controller:3001") == "Controller 3001"
    with pytest.raises(LabError, match="no controller 3009"):
        cluster.member("controller:3009")
    with pytest.raises(LabError, match="names no lab member"):
        cluster.member("zookeeper:1")
    with pytest.raises(LabError, match="ZooKeeper mode"):
        ClusterFile("zk", None).member("controller:3001")


def test_controllers_have_addresses_of_their_own_in_the_lab_network():
    addresses = plan_addresses("10.213.7.0/24", [], [1], [3001, 3003])
    assert addresses["controller:3001"] == "10.213.7.201" and addresses["controller:3003"] == "10.213.7.203"
    assert addresses["broker:1"] == "10.213.7.101"
    with pytest.raises(NetworkError, match="Controller 4000"):
        plan_addresses("10.213.7.0/24", [], [], [4000])


def test_a_controllers_properties_are_a_valid_kraft_controller_configuration(tmp_path):
    voters = voters_value([(3001, "127.0.0.1", 9093), (3002, "127.0.0.1", 9094)])
    text = controller_properties(3002, "127.0.0.1", 9094, voters, tmp_path / "data",
                                 {"controller.quorum.pre.vote.enable": "true"})
    config = KafkaConfig.from_props(dict(line.split("=", 1) for line in text.splitlines()))
    assert config.node_id == 3002 and config.quorum_voters == {3001: ("127.0.0.1", 9093), 3002: ("127.0.0.1", 9094)}
    assert config["controller.quorum.pre.vote.enable"] is True and (config.host, config.port) == ("127.0.0.1", 9094)


def test_a_brokers_properties_are_a_valid_kraft_broker_configuration(tmp_path):
    voters = voters_value([(3001, "127.0.0.1", 9093)])
    text = broker_properties(2, "10.0.0.3", 9092, voters, tmp_path / "data", {"broker.session.timeout.ms": "4000"})
    config = KafkaConfig.from_props(dict(line.split("=", 1) for line in text.splitlines()))
    assert config.node_id == 2 and config["process.roles"] == ("broker",)
    assert (config.host, config.port) == ("10.0.0.3", 9092) and config["broker.session.timeout.ms"] == 4000


def test_a_kraft_broker_serves_once_registered_and_unfenced():
    assert not broker_serving(None) and not broker_serving({"lifecycle": None})
    assert not broker_serving({"lifecycle": {"broker_epoch": -1, "fenced": True}})
    assert not broker_serving({"lifecycle": {"broker_epoch": 5, "fenced": True}})
    assert broker_serving({"lifecycle": {"broker_epoch": 5, "fenced": False}})


def _row(node, process="running", **raft):
    base = {"state": "follower", "epoch": 2, "leader": 3002, "voted_for": None, "log_end_offset": 10,
            "high_watermark": 10, "log_start_offset": 0}
    return {"id": node, "host": "h", "port": 1, "pid": node, "process": process,
            "raft": None if process != "running" else {**base, **raft}}


def test_the_quorum_is_the_leader_of_the_highest_epoch_a_leader_holds_with_each_voters_lag():
    rows = [_row(3001, log_end_offset=7), _row(3002, state="leader", high_watermark=9),
            _row(3003, state="candidate", epoch=5, leader=None, voted_for=3003, log_end_offset=4)]
    quorum = quorum_status(rows)
    assert (quorum["leader"], quorum["epoch"], quorum["high_watermark"]) == (3002, 2, 9)
    assert [(v["id"], v["state"], v["lag"]) for v in quorum["voters"]] == [
        (3001, "follower", 3), (3002, "leader", 0), (3003, "candidate", 6)]
    down = quorum_status([_row(3001, process="dead"), _row(3002, process="paused")])
    assert down["leader"] is None and [v["state"] for v in down["voters"]] == ["down", "paused"]


def test_the_dashboards_kraft_view_is_designs_with_the_last_elections_votes():
    rows = [_row(3001), _row(3002, state="leader")]
    events = [{"kind": "vote", "from": 3001, "to": 3002, "epoch": 1, "granted": True},
              {"kind": "vote", "from": 3001, "to": 3002, "epoch": 2, "granted": False},
              {"kind": "vote", "from": 3001, "to": 3002, "epoch": 2, "granted": True}]
    votes = last_election_votes(events, 2)
    assert votes == [{"from": 3001, "to": 3002, "epoch": 2, "granted": True}]
    view = kraft_cluster_view(quorum_status(rows), rows, {"controller:3001": ["controller:3002"]}, ["x"], votes)
    assert view["mode"] == "kraft" and view["controller"] == {"node": 3002, "epoch": 2}
    assert view["quorum"]["high_watermark"] == 10 and view["quorum"]["votes"] == votes
    assert view["quorum"]["voters"][0]["cut_off_from"] == ["controller:3002"] and view["brokers"] == []


def test_a_kraft_torture_plan_is_seeded_and_draws_partitions_only_when_asked_for():
    assert plan(7, 3) == plan(7, 3) and plan(7, 3) != plan(7, 4)
    without = [plan(1, run, ("kill", "pause", "controller")) for run in range(20)]
    assert all(f.action in ("kill", "pause") for p in without for f in p.faults) and not any(p.network for p in without)
    drawn = [f for run in range(20) for f in plan(1, run).faults]
    assert {f.kind for f in drawn} == {"kill", "pause", "partition", "controller"} and plan(1, 0).network
    assert {f.cut for f in drawn if f.kind == "partition"} == {"brokers", "controller", "clients",
                                                               "brokers then controller"}


def test_a_kraft_torture_pauses_a_broker_past_its_session_and_places_every_partition_on_every_broker():
    from zkbroker.lab.kraft_torture import BROKERS, SESSION_MS

    for run in range(20):
        p = plan(3, run)
        assert all(sorted(row) == list(range(1, BROKERS + 1)) for row in p.rows)
        assert all(f.ms > SESSION_MS for f in p.faults if f.kind == "pause")
        assert all(f.target in ("leader", "follower") for f in p.faults if f.kind == "controller")


def _rs(ts, node, state, epoch, leader=None):
    return {"ts": ts, "kind": "raft_state", "node": node, "state": state, "epoch": epoch, "leader": leader}


def test_the_quorum_is_leaderless_only_while_no_leader_has_a_majority_in_its_epoch():
    elected = [_rs(0, 1, "candidate", 1), _rs(5, 1, "leader", 1, 1), _rs(6, 2, "follower", 1, 1),
               _rs(7, 3, "follower", 1, 1)]
    # a voter cut off alone stands in higher epochs: the leader keeps its majority
    cut_off = [_rs(20, 3, "candidate", 2), _rs(30, 3, "candidate", 3)]
    assert leaderless_windows(elected + cut_off, 3) == []
    # back, its Vote request takes the leader's epoch away until the next election ends
    disrupted = [_rs(40, 1, "unattached", 3), _rs(41, 2, "voted", 3), _rs(45, 3, "leader", 3, 3),
                 _rs(46, 1, "follower", 3, 3)]
    assert leaderless_windows(elected + cut_off + disrupted, 3) == [(40, 46)]
    # a killed leader counts until a majority no longer follows it; still open at the end, until `until`
    killed = [_rs(50, 2, "candidate", 2), _rs(52, 3, "voted", 2)]
    assert leaderless_windows(elected + killed, 3, until=99) == [(52, 99)]
    # brokers following the log as observers report their state too (source broker:ID): they are no majority
    observers = [{**_rs(51 + b, b, "follower", 1, 1), "source": f"broker:{b}"} for b in (4, 5, 6)]
    assert leaderless_windows(elected + killed + observers, 3, until=99) == [(52, 99)]


def test_a_kraft_strip_replayed_at_a_moment_shows_each_controllers_last_state_then():
    rows = [_row(3001), _row(3002, state="leader"), _row(3003)]
    now = kraft_cluster_view(quorum_status(rows), rows, {}, None, [])
    events = [_rs(10, 3001, "leader", 1, 3001), _rs(11, 3002, "follower", 1, 3001), _rs(11, 3003, "follower", 1, 3001),
              {"ts": 20, "kind": "process_killed", "node": "controller:3001"},
              _rs(25, 3002, "leader", 2, 3002), _rs(26, 3003, "follower", 2, 3002)]
    before = kraft_cluster_at(events, 15, now)
    assert before["controller"] == {"node": 3001, "epoch": 1}
    after = kraft_cluster_at(events, 30, now)
    assert after["controller"] == {"node": 3002, "epoch": 2}
    assert [v["state"] for v in after["quorum"]["voters"]] == ["down", "leader", "follower"]


def test_a_kraft_labs_brokers_in_the_dashboard_show_fencing_and_metadata_offsets():
    from zkbroker.lab.dashboard.page import render_strip
    from zkbroker.lab.dashboard.views import kraft_brokers_view

    rows = [{"id": 1, "host": "h", "port": 1, "pid": 11, "process": "dead", "registered": True, "fenced": True,
             "alive": False, "broker_epoch": 4, "metadata_offset": None, "controller_metadata_offset": 9},
            {"id": 2, "host": "h", "port": 2, "pid": 12, "process": "running", "registered": True, "fenced": False,
             "alive": True, "broker_epoch": 3, "metadata_offset": 12, "controller_metadata_offset": 12}]
    brokers = kraft_brokers_view(rows, {"broker:2": ["controller:3001"]})
    assert [(b["id"], b["state"], b["fenced"], b["metadata_offset"]) for b in brokers] == [
        (1, "dead", True, None), (2, "cut-off", False, 12)]
    view = kraft_cluster_view(quorum_status([_row(3002, state="leader")]), [_row(3002, state="leader")], {}, None,
                              [], brokers)
    html = render_strip(view)
    assert 'data-broker="1"' in html and "fenced" in html and "metadata offset 12" in html


def test_a_replayed_kraft_strip_shows_each_broker_as_the_timeline_tells_it():
    now = {"quorum": {"voters": [{"id": 3001, "host": "h", "port": 1, "pid": 1}]},
           "brokers": [{"id": 1, "host": "h", "port": 2, "pid": 2, "state": "running", "fenced": False,
                        "metadata_offset": 30, "controller_metadata_offset": 30, "broker_epoch": 9,
                        "cut_off_from": []}]}
    events = [_rs(1, 3001, "leader", 1, 3001),
              {"ts": 5, "kind": "broker_unfenced", "source": "controller:3001", "broker": 1, "epoch": 3},
              {"ts": 6, "kind": "metadata_applied", "source": "broker:1", "broker": 1, "offset": 7},
              {"ts": 10, "kind": "process_killed", "node": "broker:1"},
              {"ts": 19, "kind": "broker_fenced", "source": "controller:3001", "broker": 1, "epoch": 3}]
    before, after = (kraft_cluster_at(events, t, now)["brokers"][0] for t in (8, 20))
    assert (before["state"], before["fenced"], before["metadata_offset"]) == ("running", False, 7)
    assert (after["state"], after["fenced"]) == ("dead", True)


def test_directory_ids_without_kraft_are_refused_before_anything_starts(tmp_path):
    with pytest.raises(LabError, match="--directory-ids names the voters of a KRaft quorum"):
        LabCluster(tmp_path / "lab").up(directory_ids=True)
    assert not (tmp_path / "lab" / "cluster.json").exists()


def test_lab_status_names_a_controller_that_is_no_longer_its_voter_an_observer():
    from zkbroker.lab.cli import format_kraft_status

    def row(node: int, state: str, voter: bool) -> dict:
        return {"id": node, "host": "127.0.0.1", "port": 9000 + node, "pid": node, "process": "running",
                "raft": {"state": state, "epoch": 3, "leader": 3001, "voted_for": None, "log_end_offset": 9,
                         "high_watermark": 9, "voter": voter}}

    status = {"quorum": {"leader": 3001, "epoch": 3, "high_watermark": 9}, "brokers": [], "network": None,
              "topics": [], "controllers": [row(3001, "leader", True), row(3003, "follower", False)]}
    lines = format_kraft_status(status).splitlines()
    assert next(line for line in lines if line.startswith("3001")).split()[5] == "leader"
    assert "observer (follower)" in next(line for line in lines if line.startswith("3003"))

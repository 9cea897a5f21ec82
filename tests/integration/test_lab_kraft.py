"""`lab up --kraft`: a KRaft lab of real controller processes in the lab network, with the lab's verbs on
controllers (DESIGN §17): the active controller partitioned from the other voters resigns (check-quorum) and
they elect another; killed, the quorum elects again and it rejoins when started; fault points and `state`
answer through its control socket; `down` leaves nothing running. With KRaft brokers (process.roles=broker):
confluent-kafka creates a topic and produces to it with acks=all, and a broker killed by the lab is fenced by the
active controller after broker.session.timeout.ms, which moves its leaderships."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.integration.harness import wait_for
from tests.integration.lab_support import bootstrap, cluster_json, ok, partitions, produce_all, status
from zkbroker import timeline
from zkbroker.lab.processes import process_state

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def _quorum(lab_dir) -> dict:
    return status(lab_dir)["quorum"]


def _new_leader(lab_dir, old: int, above_epoch: int) -> tuple[int, int]:
    def elected():
        quorum = _quorum(lab_dir)
        if quorum["leader"] not in (None, old) and quorum["epoch"] > above_epoch:
            return quorum["leader"], quorum["epoch"]
        return None
    return wait_for(elected, 60, f"a leader other than {old} above epoch {above_epoch}", interval_s=0.3)


@pytest.mark.skipif(os.geteuid() != 0, reason="the lab network needs root (namespaces, nftables)")
def test_a_kraft_lab_partitions_kills_and_restarts_controllers_with_the_lab_verbs(lab_dir):
    out = ok("up", "--dir", str(lab_dir), "--kraft", "--network", "--brokers", "0")
    assert "Quorum leader: controller 30" in out
    cluster = cluster_json(lab_dir)
    assert cluster["mode"] == "kraft" and "zookeeper" not in cluster and cluster["brokers"] == []
    assert [c["id"] for c in cluster["controllers"]] == [3001, 3002, 3003]
    quorum = _quorum(lab_dir)
    leader, epoch = quorum["leader"], quorum["epoch"]
    others = [c for c in (3001, 3002, 3003) if c != leader]

    # Cut off from both other voters, the leader no longer hears a majority fetch: it resigns (check-quorum),
    # and the two elect one of themselves in a higher epoch.
    ok("partition", "--dir", str(lab_dir), f"controller:{leader}", "--from",
       ",".join(f"controller:{c}" for c in others))
    new, new_epoch = _new_leader(lab_dir, leader, epoch)
    assert new in others
    # The others may elect before the old leader's check-quorum (1.5 x the fetch timeout) has made it resign.
    wait_for(lambda: any(e["kind"] == "raft_state" and e["node"] == leader and e["state"] == "resigned"
                         for e in timeline.read(lab_dir / timeline.FILE_NAME)), 30, "the cut-off leader to resign")
    ok("heal", "--dir", str(lab_dir))
    wait_for(lambda: all(c["raft"] and c["raft"]["leader"] is not None for c in status(lab_dir)["controllers"]),
             60, "every controller to know a leader after the heal")

    # Killed, the active controller is replaced; started again, it rejoins as a follower.
    quorum = _quorum(lab_dir)
    out = ok("kill", "--dir", str(lab_dir), "--controller", "active")
    assert f"Killed controller {quorum['leader']}" in out
    newer, _ = _new_leader(lab_dir, quorum["leader"], quorum["epoch"])
    ok("start", "--dir", str(lab_dir), "--controller", str(quorum["leader"]))
    wait_for(lambda: json.loads(ok("state", "--dir", str(lab_dir), "--controller", str(quorum["leader"]),
                                   "--json"))["raft"]["state"] == "follower", 60, "the restarted controller to follow")

    follower = next(c for c in (3001, 3002, 3003) if c != newer)
    in_force = json.loads(ok("fault", "--dir", str(lab_dir), "--controller", str(follower), "hold_fetchers",
                             "--json"))
    assert in_force == [{"point": "hold_fetchers"}]
    assert "Fault point: controller" in ok("status", "--dir", str(lab_dir))
    ok("fault", "--dir", str(lab_dir), "--controller", str(follower), "--heal")

    network = json.loads((lab_dir / "network.json").read_text())
    pids = [c["pid"] for c in cluster_json(lab_dir)["controllers"]]
    ok("down", "--dir", str(lab_dir))
    assert all(process_state(pid) == "dead" for pid in pids)
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(ns in namespaces for ns in network["namespaces"].values())


def test_a_kraft_labs_broker_killed_is_fenced_and_its_leaderships_move(lab_dir):
    from confluent_kafka.admin import AdminClient, NewTopic

    out = ok("up", "--dir", str(lab_dir), "--kraft", "--controllers", "1", "--brokers", "2",
             "--config", "broker.session.timeout.ms=3000", "--config", "broker.heartbeat.interval.ms=500")
    assert "Broker 1: " in out and "Broker 2: " in out and "unfenced" in out
    rows = status(lab_dir)["brokers"]
    assert [(b["id"], b["fenced"], b["lifecycle"]) for b in rows] == [(1, False, "running"), (2, False, "running")]
    assert all(b["metadata_offset"] >= 0 for b in rows)

    servers = bootstrap(lab_dir)
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic("t", 2, 2)])["t"].result(30)
    acked, errors = produce_all(servers, "t", [f"v{i}".encode() for i in range(20)])
    assert len(acked) == 20 and errors == []
    led_by_1 = wait_for(lambda: [p for p, (leader, _, isr) in partitions(status(lab_dir), "t").items()
                                 if leader == 1 and len(isr) == 2] or None, 30, "broker 1 to lead a partition",
                        interval_s=0.5)

    ok("kill", "--dir", str(lab_dir), "--broker", "1")

    def moved():
        now = status(lab_dir)
        fenced = next(b for b in now["brokers"] if b["id"] == 1)["fenced"]
        leaders = partitions(now, "t")
        return now if fenced and all(leaders[p][0] == 2 and leaders[p][2] == [2] for p in led_by_1) else None
    now = wait_for(moved, 60, "broker 1 fenced and its partitions led by broker 2", interval_s=0.5)
    assert next(b for b in now["brokers"] if b["id"] == 1)["process"] == "dead"
    events = timeline.read(lab_dir / timeline.FILE_NAME)
    assert any(e["kind"] == "broker_fenced" and e["broker"] == 1 and e["source"] == "controller:3001"
               for e in events)
    # the leaderships it lost, in the timeline as ZooKeeper mode's controller tells them (with the partition epoch)
    wait_for(lambda: {e["partition"] for e in timeline.read(lab_dir / timeline.FILE_NAME)
                      if e["kind"] == "leader_changed" and e["source"] == "controller:3001" and e["topic"] == "t"
                      and e["leader"] == 2 and e["previous_leader"] == 1} >= set(led_by_1) or None, 30,
             "the new leaders in the timeline", interval_s=0.5)
    state = json.loads(ok("state", "--dir", str(lab_dir), "--broker", "2", "--json"))
    assert state["role"] == "broker" and state["lifecycle"]["fenced"] is False
    assert {(p["partition"], p["role"]) for p in state["partitions"]} >= {(p, "leader") for p in led_by_1}


def test_a_broker_whose_heartbeats_are_held_is_fenced_and_hears_it_from_the_metadata_log_only(lab_dir):
    """`lab up --kraft --directory-ids` names the voters as KIP-853 does, on every node; then the broker fault points
    of raft-fenced-broker-serves: with its heartbeats and its metadata fetches held, the active controller fences
    the broker after its session while the broker's own view still has it serving; released, the metadata log
    tells it (its image leaves itself out of the live brokers), and the next heartbeat gets it unfenced."""
    out = ok("up", "--dir", str(lab_dir), "--kraft", "--controllers", "1", "--brokers", "1", "--directory-ids",
             "--config", "broker.session.timeout.ms=3000", "--config", "broker.heartbeat.interval.ms=500")
    assert "Broker 1: " in out and "unfenced" in out
    cluster = cluster_json(lab_dir)
    (controller,) = cluster["controllers"]
    meta = dict(line.split("=", 1) for line in (lab_dir / "controller-3001" / "data" / "meta.properties")
                .read_text().splitlines() if "=" in line and not line.startswith("#"))
    voters = f"controller.quorum.voters=3001@{controller['host']}:{controller['port']}:{meta['directory.id']}"
    for node in (controller, *cluster["brokers"]):
        assert voters in open(node["config"]).read().splitlines(), node["config"]

    def broker() -> dict:
        return json.loads(ok("state", "--dir", str(lab_dir), "--broker", "1", "--json"))

    def believed() -> dict:
        (row,) = status(lab_dir)["brokers"]
        return row

    in_force = json.loads(ok("fault", "--dir", str(lab_dir), "--broker", "1", "hold_metadata", "--json"))
    assert in_force == [{"point": "hold_metadata"}]
    in_force = json.loads(ok("fault", "--dir", str(lab_dir), "--broker", "1", "hold_heartbeats", "--json"))
    assert sorted(f["point"] for f in in_force) == ["hold_heartbeats", "hold_metadata"]
    held_at = broker()["metadata_offset"]
    wait_for(lambda: believed()["fenced"] is True or None, 30, "the active controller to fence broker 1",
             interval_s=0.5)
    own = broker()
    assert own["lifecycle"]["fenced"] is False and own["lifecycle"]["state"] == "running"
    assert own["metadata_offset"] == held_at and 1 in own["metadata"]["live_brokers"]

    ok("fault", "--dir", str(lab_dir), "--broker", "1", "release_metadata")
    wait_for(lambda: 1 not in broker()["metadata"]["live_brokers"] or None, 30,
             "broker 1's own image to say it is fenced", interval_s=0.5)
    assert believed()["fenced"] is True  # its heartbeats are still held
    ok("fault", "--dir", str(lab_dir), "--broker", "1", "release_heartbeats")
    wait_for(lambda: believed()["fenced"] is False or None, 30, "broker 1 unfenced", interval_s=0.5)
    wait_for(lambda: 1 in broker()["metadata"]["live_brokers"] or None, 30, "broker 1 live in its own image",
             interval_s=0.5)
    events = timeline.read(lab_dir / timeline.FILE_NAME)
    fired = {(e["source"], e["point"]) for e in events if e["kind"] == "fault_fired"}
    assert fired >= {("broker:1", "hold_heartbeats"), ("broker:1", "hold_metadata")}
    assert [e["kind"] for e in events if e["kind"] in ("broker_fenced", "broker_unfenced")
            and e["source"] == "controller:3001" and e["broker"] == 1 and not e.get("registered")][-2:] == [
        "broker_fenced", "broker_unfenced"]

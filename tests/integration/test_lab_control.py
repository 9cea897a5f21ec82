"""The lab control interface on real brokers and a real ZooKeeper: each broker's socket is in cluster.json and
answers `state` as ZooKeeper says; fault points inside the processes (held fetchers, a dropped LeaderAndIsr, a
held controller event queue, a stop right before a ZooKeeper write) do what they say, and heal."""

from __future__ import annotations

import json
import time

import pytest

from tests.integration.admin_support import tool
from tests.integration.harness import ZkView, wait_for
from tests.integration.lab_support import bootstrap, cluster_json, ok, partitions, produce_all, status
from zkbroker import timeline
from zkbroker.lab.cluster import LabCluster
from zkbroker.lab.processes import process_state

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SESSION_MS = 3000
LAG_MS = 2000
TOPIC = "t"


def lab_up(lab_dir, zookeeper, *config: str) -> LabCluster:
    args = ["up", "--dir", str(lab_dir), "--brokers", "3", "--zookeeper", zookeeper.connect_string,
            "--config", f"zookeeper.session.timeout.ms={SESSION_MS}", "--config", "replica.fetch.wait.max.ms=200"]
    for item in config:
        args += ["--config", item]
    ok(*args)
    return LabCluster(lab_dir)


def create_topic(lab_dir, replicas: list[int]) -> None:
    """One partition on `replicas`, the first its leader; waits until every replica is in the ISR."""
    code, _, err = tool("topics", "--zookeeper", cluster_json(lab_dir)["zookeeper"], "--create", "--topic", TOPIC,
                        "--replica-assignment", ":".join(map(str, replicas)))
    assert code == 0, err
    wait_for(lambda: partitions(status(lab_dir), TOPIC).get(0, (None, None, []))[0] == replicas[0]
             and len(partitions(status(lab_dir), TOPIC)[0][2]) == len(replicas), 30, "the topic's leader and ISR")


def zk_state(lab_dir) -> tuple[dict, int]:
    """The partition's `state` znode and its zkVersion."""
    view = ZkView(cluster_json(lab_dir)["zookeeper"])
    try:
        data, stat = view.client.get(f"/brokers/topics/{TOPIC}/partitions/0/state")
        return json.loads(data), stat.version
    finally:
        view.close()


def roles(lab_dir) -> tuple[int, int, int]:
    """(controller, then the two other brokers), so a test can keep the controller out of its way."""
    controller = status(lab_dir)["controller"]
    others = [b for b in (1, 2, 3) if b != controller]
    return controller, others[0], others[1]


def mine(state: dict) -> dict:
    (partition,) = [p for p in state["partitions"] if (p["topic"], p["partition"]) == (TOPIC, 0)]
    return partition


def test_each_brokers_control_socket_is_in_cluster_json_and_answers_state_as_zookeeper_says(lab_dir, zookeeper):
    lab = lab_up(lab_dir, zookeeper)
    cluster = cluster_json(lab_dir)
    for b in cluster["brokers"]:
        assert b["control"] == str(lab_dir.resolve() / f"broker-{b['id']}" / "control.sock")
    controller, leader, third = roles(lab_dir)
    create_topic(lab_dir, [leader, controller, third])
    assert produce_all(bootstrap(lab_dir), TOPIC, [b"a", b"b", b"c"]) == ([b"a", b"b", b"c"], [])

    zk_node, zk_version = zk_state(lab_dir)
    view = ZkView(cluster["zookeeper"])
    try:
        sessions = {b: view.stat(f"/brokers/ids/{b}").ephemeralOwner for b in (1, 2, 3)}
        epoch = view.epoch()
    finally:
        view.close()
    for b in cluster["brokers"]:
        state = wait_for(lambda b=b: (s := lab.broker_state(b["id"])) and mine(s)["hw"] == 3 and s, 10,
                         f"broker {b['id']} to learn the high watermark")
        assert (state["broker"], state["pid"]) == (b["id"], b["pid"])
        assert state["session"] == f"0x{sessions[b['id']]:x}" and state["zookeeper_connected"]
        assert state["controller_epoch_seen"] == epoch
        p = mine(state)
        assert (p["leader"], p["leader_epoch"], p["isr"]) == (zk_node["leader"], zk_node["leader_epoch"],
                                                              zk_node["isr"])
        assert p["role"] == ("leader" if b["id"] == leader else "follower")
        assert (p["leo"], p["log_start"], p["metadata_leader"]) == (3, 0, leader)
        assert (p["lso"], p["open_transactions"]) == (3, 0)  # no transaction: the LSO is the high watermark
        if b["id"] == leader:
            assert p["zk_version"] == zk_version
        assert state["metadata"]["controller"] == controller and state["metadata"]["live_brokers"] == [1, 2, 3]
        assert state["faults"] == []
        if b["id"] == controller:
            view_ = state["controller"]
            assert view_["epoch"] == epoch and view_["live_brokers"] == [1, 2, 3] and not view_["queue_held"]
            (known,) = view_["partitions"]
            assert (known["leader"], known["isr"], known["replicas"]) == (leader, zk_node["isr"], [leader, controller,
                                                                                                   third])
        else:
            assert state["controller"] is None

    words = ok("state", "--dir", str(lab_dir), "--broker", str(leader))
    assert f"Broker {leader} (pid " in words and f"ZooKeeper session 0x{sessions[leader]:x}" in words
    assert "Fault points: none" in words
    assert json.loads(ok("state", "--dir", str(lab_dir), "--broker", str(third), "--json"))["broker"] == third


def test_held_fetchers_keep_a_follower_out_of_the_isr_until_released(lab_dir, zookeeper):
    lab_up(lab_dir, zookeeper, f"replica.lag.time.max.ms={LAG_MS}")
    controller, leader, follower = roles(lab_dir)
    create_topic(lab_dir, [leader, controller, follower])

    assert "replica fetchers held" in ok("fault", "--dir", str(lab_dir), "--broker", str(follower), "hold_fetchers")
    assert "broker " + str(follower) + ": replica fetchers held" in ok("status", "--dir", str(lab_dir))
    assert produce_all(bootstrap(lab_dir), TOPIC, [b"during"]) == ([b"during"], [])  # once the ISR shrinks
    wait_for(lambda: follower not in zk_state(lab_dir)[0]["isr"], LAG_MS / 1000 + 20, "the follower out of the ISR")
    lab = LabCluster(lab_dir)
    held = mine(lab.broker_state(follower))
    assert held["leo"] == 0 and lab.broker_state(follower)["faults"] == [{"point": "hold_fetchers"}]
    time.sleep(LAG_MS / 1000)  # however long it lasts, a held follower does not come back
    assert follower not in zk_state(lab_dir)[0]["isr"] and mine(lab.broker_state(follower))["leo"] == 0

    ok("fault", "--dir", str(lab_dir), "--broker", str(follower), "release_fetchers")
    wait_for(lambda: follower in zk_state(lab_dir)[0]["isr"], 30, "the follower back in the ISR")
    assert mine(lab.broker_state(follower))["leo"] == 1
    assert status(lab_dir)["brokers"][follower - 1]["faults"] == []
    events = [(e["kind"], e["fault"]) for e in timeline.read(lab_dir / "timeline.jsonl")
              if e["kind"].startswith("fault_") and e.get("node") == f"broker:{follower}"]
    assert events == [("fault_applied", "hold_fetchers"), ("fault_healed", "hold_fetchers")]


def test_a_dropped_leader_and_isr_leaves_a_brokers_view_stale_while_zookeeper_moves_on(lab_dir, zookeeper):
    lab = lab_up(lab_dir, zookeeper)
    controller, leader, stale = roles(lab_dir)
    create_topic(lab_dir, [leader, controller, stale])
    before, _ = zk_state(lab_dir)
    # Enough drops that the controller's resends (every 300 ms) cannot spend them during the test.
    lab.fault(stale, "drop_next_leader_and_isr", count=1000)

    ok("kill", "--dir", str(lab_dir), "--broker", str(leader))
    after = wait_for(lambda: (s := zk_state(lab_dir)[0])["leader"] == controller and s, SESSION_MS / 1000 + 20,
                     "the controller's own broker elected")
    assert after["leader_epoch"] > before["leader_epoch"]
    wait_for(lambda: lab.broker_state(stale)["faults"][0]["count"] < 1000, 10, "the controller's request dropped")
    # The broker still believes the dead broker leads, with the old epoch and ISR. So does its metadata cache:
    # the UpdateMetadata sent behind the LeaderAndIsr on the same connection went with it, unread.
    view = mine(lab.broker_state(stale))
    assert (view["leader"], view["leader_epoch"], view["isr"]) == (leader, before["leader_epoch"], before["isr"])
    assert view["metadata_leader"] == leader and zk_state(lab_dir)[0]["leader"] == controller

    lab.heal_faults(stale)
    healed = wait_for(lambda: (p := mine(lab.broker_state(stale)))["leader"] == controller and p, 10,
                      "the resent LeaderAndIsr to apply once healed")
    assert healed["leader_epoch"] == zk_state(lab_dir)[0]["leader_epoch"]
    wait_for(lambda: mine(lab.broker_state(stale))["metadata_leader"] == controller, 10, "the UpdateMetadata too")


def test_a_held_controller_event_queue_elects_nobody_until_released(lab_dir, zookeeper):
    lab = lab_up(lab_dir, zookeeper)
    controller, leader, third = roles(lab_dir)
    create_topic(lab_dir, [leader, controller, third])
    before, _ = zk_state(lab_dir)
    lab.fault(controller, "hold_controller_queue")

    ok("kill", "--dir", str(lab_dir), "--broker", str(leader))
    wait_for(lambda: not next(b for b in status(lab_dir)["brokers"] if b["id"] == leader)["registered"],
             SESSION_MS / 1000 + 20, "the dead leader's registration gone")
    held = wait_for(lambda: (c := lab.broker_state(controller)["controller"])["queued_events"] > 0 and c, 10,
                    "the broker change to wait in the controller's queue")
    assert held["queue_held"] and held["live_brokers"] == [1, 2, 3]  # it has not taken the change in
    time.sleep(1.0)
    assert zk_state(lab_dir)[0] == before  # nobody elected a leader: the partition names the dead one

    lab.fault(controller, "release_controller_queue")
    after = wait_for(lambda: (s := zk_state(lab_dir)[0])["leader"] in (controller, third) and s, 20,
                     "a leader elected once the queue is released")
    assert after["leader_epoch"] == before["leader_epoch"] + 1
    released = lab.broker_state(controller)["controller"]
    assert not released["queue_held"] and leader not in released["live_brokers"]


def test_a_stop_right_before_a_zookeeper_write_leaves_zookeeper_unchanged(lab_dir, zookeeper):
    lab = lab_up(lab_dir, zookeeper, f"replica.lag.time.max.ms={LAG_MS}")
    controller, leader, follower = roles(lab_dir)
    create_topic(lab_dir, [leader, controller, follower])
    pid = cluster_json(lab_dir)["brokers"][leader - 1]["pid"]

    # The leader dies right before it writes the ISR shrink that the held follower causes.
    lab.fault(leader, "stop_before_zookeeper_write", write="isr_update", action="kill")
    lab.fault(follower, "hold_fetchers")
    wait_for(lambda: process_state(pid) == "dead", LAG_MS / 1000 + 20, "the leader to stop itself")
    assert follower in zk_state(lab_dir)[0]["isr"]  # the shrink was never written (by it, or anyone)
    fired = [e for e in timeline.read(lab_dir / "timeline.jsonl") if e["kind"] == "fault_fired"]
    assert [(e["source"], e["point"], e["write"]) for e in fired] == [
        (f"broker:{leader}", "stop_before_zookeeper_write", "isr_update")]

    # A stop armed while a broker is down is in force from its next start: it never registers.
    lab.fault(leader, "stop_before_zookeeper_write", write="registration")
    assert status(lab_dir)["brokers"][leader - 1]["faults_at_start"] == [
        {"point": "stop_before_zookeeper_write", "write": "registration"}]
    # the killed process's registration lingers until its session expires: let it go first, so that what is
    # asserted below is the new process's (it must never register)
    wait_for(lambda: not status(lab_dir)["brokers"][leader - 1]["registered"], 60,
             "the killed broker's registration to expire")
    entry = lab.start(leader)
    wait_for(lambda: process_state(entry.pid) == "dead", 30, "the restarted broker to stop itself")
    row = status(lab_dir)["brokers"][leader - 1]
    assert (row["registered"], row["faults_at_start"]) == (False, [])

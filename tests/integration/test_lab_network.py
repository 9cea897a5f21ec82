"""`lab up --network` and `lab partition` / `heal`: real network namespaces, a bridge and nftables drop
rules between the lab's nodes (Jepsen's method), on real brokers and a real ZooKeeper."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.integration.admin_support import tool
from tests.integration.harness import ZkView, wait_for
from tests.integration.lab_support import bootstrap, cluster_json, lab, ok, partitions, produce_all, status
from zkbroker import timeline
from zkbroker.client.connection import BrokerConnection
from zkbroker.lab.processes import process_state
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.message_set import build_message_set

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300),
              pytest.mark.skipif(os.geteuid() != 0, reason="the lab network needs root (namespaces, nftables)")]

SESSION_MS = 3000
LAG_MS = 4000
TOPIC = "t"


def network_lab(lab_dir, *config: str) -> dict:
    args = ["up", "--dir", str(lab_dir), "--network", "--brokers", "3",
            "--config", f"zookeeper.session.timeout.ms={SESSION_MS}"]
    for item in config:
        args += ["--config", item]
    ok(*args)
    return cluster_json(lab_dir)


def create_topic(lab_dir, replicas: list[int]) -> None:
    """One partition on `replicas`, the first its preferred leader; waits until that leader leads."""
    cluster = cluster_json(lab_dir)
    code, _, err = tool("topics", "--zookeeper", cluster["zookeeper"], "--create", "--topic", TOPIC,
                        "--replica-assignment", ":".join(map(str, replicas)))
    assert code == 0, err
    wait_for(lambda: partitions(status(lab_dir), TOPIC).get(0, (None, None, []))[0] == replicas[0]
             and len(partitions(status(lab_dir), TOPIC)[0][2]) == len(replicas), 30, "the topic's leader")


def produce_to(broker: dict, values: list[bytes], timeout_ms: int = 3000) -> int:
    """An acks=all Produce v0 sent straight to one broker; returns its error code."""
    records = build_message_set([(None, v) for v in values])
    with BrokerConnection(broker["host"], broker["port"], timeout_s=timeout_ms / 1000 + 10) as conn:
        response = conn.send(ApiKey.PRODUCE, 0, {"acks": -1, "timeout_ms": timeout_ms, "topics": [
            {"topic": TOPIC, "partitions": [{"partition": 0, "records": records}]}]})
    return response.topics[0].partitions[0].error_code


def broker_entry(lab_dir, broker_id: int) -> dict:
    return next(b for b in cluster_json(lab_dir)["brokers"] if b["id"] == broker_id)


def down_and_check_nothing_left(lab_dir) -> None:
    cluster = cluster_json(lab_dir)
    state = json.loads((lab_dir / "network.json").read_text())
    ok("down", "--dir", str(lab_dir))
    pids = [b["pid"] for b in cluster["brokers"]] + [z["pid"] for z in cluster["zookeepers"]]
    assert all(process_state(pid) == "dead" for pid in pids)
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(ns in namespaces for ns in state["namespaces"].values())
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert state["bridge"] not in links and f"zv{state['lab_id']}" not in links
    assert not (lab_dir / "network.json").exists()


def test_partition_needs_a_lab_network_and_changes_nothing_without_one(lab_dir, zookeeper):
    ok("up", "--dir", str(lab_dir), "--brokers", "1", "--zookeeper", zookeeper.connect_string)
    before = status(lab_dir)
    result = lab("partition", "--dir", str(lab_dir), "broker:1", "--from", "zookeeper")
    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0 and "lab up --network" in result.stderr
    assert lab("heal", "--dir", str(lab_dir)).returncode != 0
    after = status(lab_dir)
    assert [b["registered"] for b in after["brokers"]] == [b["registered"] for b in before["brokers"]] == [True]
    assert after["network"] is None
    assert not any(e["kind"] == "fault_applied" for e in timeline.read(lab_dir / "timeline.jsonl"))


def test_a_broker_cut_off_from_zookeeper_only_loses_its_registration_and_rejoins_after_heal(lab_dir):
    cluster = network_lab(lab_dir)
    assert all(b["host"] != "127.0.0.1" for b in cluster["brokers"])
    controller = status(lab_dir)["controller"]
    victim, *others = [b for b in (1, 2, 3) if b != controller] + [controller]
    create_topic(lab_dir, [victim, *others])
    assert produce_all(bootstrap(lab_dir), TOPIC, [b"before"]) == ([b"before"], [])
    (_, epoch_before, _) = partitions(status(lab_dir), TOPIC)[0]

    assert "Partitioned" in ok("partition", "--dir", str(lab_dir), f"broker:{victim}", "--from", "zookeeper")
    cut = wait_for(lambda: (s := status(lab_dir)) and not next(b for b in s["brokers"] if b["id"] == victim)[
        "registered"] and partitions(s, TOPIC)[0][0] != victim and s, SESSION_MS / 1000 + 20,
        "the victim's registration gone and its leadership moved")
    assert next(b for b in cut["brokers"] if b["id"] == victim)["process"] == "running"
    leader, epoch, isr = partitions(cut, TOPIC)[0]
    assert leader in others and epoch > epoch_before
    assert cut["controller"] == controller
    assert "cut off from zookeeper" in ok("status", "--dir", str(lab_dir))

    # It still believes it leads, but no follower fetches from it any more: acks=all is never acknowledged.
    assert produce_to(broker_entry(lab_dir, victim), [b"to-the-cut-off-leader"]) != ErrorCode.NONE
    # The new leader takes writes (from clients that ask the others: the victim's metadata is stale).
    others_only = ",".join(f"{b['host']}:{b['port']}" for b in cluster["brokers"] if b["id"] != victim)
    assert produce_all(others_only, TOPIC, [b"during"]) == ([b"during"], [])

    assert "Healed" in ok("heal", "--dir", str(lab_dir), f"broker:{victim}")
    back = wait_for(lambda: (s := status(lab_dir)) and next(b for b in s["brokers"] if b["id"] == victim)[
        "registered"] and victim in partitions(s, TOPIC)[0][2] and s, 60, "the victim re-registered, in the ISR")
    assert partitions(back, TOPIC)[0][0] == leader
    events = [e for e in timeline.read(lab_dir / "timeline.jsonl") if e["kind"].startswith("fault_")]
    assert [(e["kind"], e["node"], e["peers"]) for e in events] == [
        ("fault_applied", f"broker:{victim}", ["zookeeper"]), ("fault_healed", f"broker:{victim}", ["zookeeper"])]
    down_and_check_nothing_left(lab_dir)


def test_a_follower_cut_off_from_its_leader_leaves_the_isr_after_the_lag_time_and_rejoins(lab_dir):
    network_lab(lab_dir, f"replica.lag.time.max.ms={LAG_MS}")
    leader, follower, third = 1, 2, 3
    create_topic(lab_dir, [leader, follower, third])
    assert produce_all(bootstrap(lab_dir), TOPIC, [b"before"]) == ([b"before"], [])

    ok("partition", "--dir", str(lab_dir), f"broker:{follower}", "--from", f"broker:{leader}")
    cut_at = next(e["ts"] for e in timeline.read(lab_dir / "timeline.jsonl") if e["kind"] == "fault_applied")
    # Writes go on, as in Kafka's replication_replica_failure_test: acks=all waits for the cut-off follower
    # until the leader drops it from the ISR, then is acknowledged.
    assert produce_all(bootstrap(lab_dir), TOPIC, [b"during"]) == ([b"during"], [])
    shrunk = wait_for(lambda: (s := status(lab_dir)) and follower not in partitions(s, TOPIC)[0][2] and s,
                      LAG_MS / 1000 + 30, "the follower out of the ISR")
    view = ZkView(cluster_json(lab_dir)["zookeeper"])
    try:
        shrunk_at = view.stat(f"/brokers/topics/{TOPIC}/partitions/0/state").mtime
    finally:
        view.close()
    # Its last fetch before the cut was at most one fetch wait (500 ms) earlier; allow that and clock rounding.
    assert shrunk_at - cut_at >= LAG_MS - 1000
    assert partitions(shrunk, TOPIC)[0][0] == leader  # the leader never lost ZooKeeper, so it still leads
    assert next(b for b in shrunk["brokers"] if b["id"] == follower)["registered"]  # ZooKeeper still reaches it

    ok("heal", "--dir", str(lab_dir))
    wait_for(lambda: follower in partitions(status(lab_dir), TOPIC)[0][2], 60, "the follower back in the ISR")

    # `clients` is everything outside the lab, this test included.
    ok("partition", "--dir", str(lab_dir), "clients", "--from", f"broker:{leader}")
    with pytest.raises(OSError):
        produce_to(broker_entry(lab_dir, leader), [b"from-outside"], timeout_ms=1000)
    ok("heal", "--dir", str(lab_dir), "clients")
    assert produce_to(broker_entry(lab_dir, leader), [b"from-outside"]) == ErrorCode.NONE
    down_and_check_nothing_left(lab_dir)


def test_ctrl_c_during_lab_up_leaves_nothing_behind(lab_dir):
    up = subprocess.Popen([sys.executable, "-m", "zkbroker", "lab", "up", "--dir", str(lab_dir), "--network",
                           "--brokers", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Interrupt once the network exists and the brokers are being started.
        started = wait_for(lambda: (lab_dir / "network.json").exists() and (lab_dir / "cluster.json").exists()
                           and (c := cluster_json(lab_dir))["brokers"] and all(b["pid"] for b in c["brokers"])
                           and c, 60, "lab up to start the brokers", interval_s=0.01)
        state = json.loads((lab_dir / "network.json").read_text())
        up.send_signal(signal.SIGINT)
        assert up.wait(120) != 0
    finally:
        if up.poll() is None:
            up.kill()
    pids = [b["pid"] for b in started["brokers"]] + [z["pid"] for z in started["zookeepers"]]
    assert all(process_state(pid) == "dead" for pid in pids)
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(ns in namespaces for ns in state["namespaces"].values())
    assert state["bridge"] not in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert not (lab_dir / "cluster.json").exists() and not (lab_dir / "network.json").exists()

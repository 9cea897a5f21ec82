"""`zkbroker lab ...` end to end: the commands, their output and cluster.json, on real processes."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.integration.harness import ZkView, wait_for
from tests.integration.lab_support import lab, ok, status
from zkbroker.lab.processes import process_state

pytestmark = pytest.mark.integration


def test_lab_with_its_own_zookeeper_up_status_down(lab_dir):
    out = ok("up", "--dir", str(lab_dir), "--brokers", "2", "--config", "zookeeper.session.timeout.ms=2000")
    assert "Controller: broker" in out
    cluster = json.loads((lab_dir / "cluster.json").read_text())
    # DESIGN §17: "mode" is "zookeeper" unless the lab is a KRaft one (which has no zookeeper keys)
    assert list(cluster) == ["zookeeper", "zookeeper_pid", "zookeepers", "brokers", "mode"]
    assert cluster["mode"] == "zookeeper"
    zk_port = int(cluster["zookeeper"].split("/")[0].split(":")[1])
    assert cluster["zookeepers"] == [{"id": 1, "host": "127.0.0.1", "port": zk_port, "pid": cluster["zookeeper_pid"]}]
    assert cluster["zookeeper"].startswith("127.0.0.1:") and "/zkbroker-" in cluster["zookeeper"]
    assert process_state(cluster["zookeeper_pid"]) == "running"  # it outlived the `lab up` command
    for i, b in enumerate(cluster["brokers"], start=1):
        assert list(b) == ["id", "host", "port", "pid", "config", "control"]
        assert (b["id"], b["host"]) == (i, "127.0.0.1")
        assert b["config"] == str(lab_dir.resolve() / f"broker-{i}" / "server.properties")
        assert b["control"] == str(lab_dir.resolve() / f"broker-{i}" / "control.sock")
        assert process_state(b["pid"]) == "running"
    ok("down", "--dir", str(lab_dir))
    assert all(process_state(b["pid"]) == "dead" for b in cluster["brokers"])
    assert process_state(cluster["zookeeper_pid"]) == "dead"
    assert not (lab_dir / "cluster.json").exists()


def test_lab_commands_drive_failover(lab_dir, zookeeper):
    ok("up", "--dir", str(lab_dir), "--brokers", "3", "--zookeeper", zookeeper.connect_string,
       "--config", "zookeeper.session.timeout.ms=2000")
    cluster = json.loads((lab_dir / "cluster.json").read_text())
    assert cluster["zookeeper_pid"] is None
    first = status(lab_dir)
    assert first["controller_epoch"] == 1
    assert [(b["id"], b["process"], b["registered"]) for b in first["brokers"]] == [
        (1, "running", True), (2, "running", True), (3, "running", True)]
    table = ok("status", "--dir", str(lab_dir))
    assert f"Controller: broker {first['controller']} (epoch 1)" in table
    assert "BROKER  HOST       PORT" in table

    old = first["controller"]
    assert "with SIGKILL" in ok("kill", "--dir", str(lab_dir), "--broker", str(old))
    # /controller names the new one a moment before it writes /controller_epoch: a status read in between saw
    # epoch 1. Wait for both (each `lab status` is a process of its own: a generous bound on a loaded machine).
    after = wait_for(lambda: (s := status(lab_dir))["controller"] not in (None, old) and s["controller_epoch"] == 2
                     and s, 30, "a new controller with epoch 2 after the kill")
    assert next(b for b in after["brokers"] if b["id"] == old)["process"] == "dead"

    assert "it is registered" in ok("start", "--dir", str(lab_dir), "--broker", str(old))
    assert next(b for b in status(lab_dir)["brokers"] if b["id"] == old)["registered"]

    other = next(i for i in (1, 2, 3) if i not in (old, after["controller"]))
    ok("pause", "--dir", str(lab_dir), "--broker", str(other))
    assert next(b for b in status(lab_dir)["brokers"] if b["id"] == other)["process"] == "paused"
    ok("resume", "--dir", str(lab_dir), "--broker", str(other))
    assert next(b for b in status(lab_dir)["brokers"] if b["id"] == other)["process"] == "running"

    ok("stop", "--dir", str(lab_dir), "--broker", str(other))
    stopped = next(b for b in status(lab_dir)["brokers"] if b["id"] == other)
    assert (stopped["process"], stopped["registered"]) == ("dead", False)

    view = ZkView(cluster["zookeeper"])
    try:
        assert view.registered() == {1, 2, 3} - {other}
    finally:
        view.close()
    ok("down", "--dir", str(lab_dir))
    assert all(process_state(b["pid"]) == "dead" for b in cluster["brokers"] if b["pid"])


def test_lab_errors_are_one_sentence(lab_dir):
    result = lab("status", "--dir", str(lab_dir))
    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0 and "No lab cluster in" in result.stderr
    result = lab("up", "--dir", str(lab_dir), "--brokers", "0")
    assert result.returncode != 0 and "at least one broker" in result.stderr


@pytest.mark.timeout(480)  # Spark's JVM starts while the chapters before it run; chapter 12 starts two labs
def test_demo_tells_the_story_end_to_end():
    result = subprocess.run([sys.executable, "-m", "zkbroker.lab.demo"], capture_output=True, text=True,
                            timeout=450)
    assert result.returncode == 0, result.stdout + result.stderr
    for heading in ("1. A cluster starts", "2. A topic", "3. Real Kafka clients",
                    "4. A consumer group shares the partitions through ZooKeeper",
                    "4b. Both worlds: a coordinator group on the same topic", "5. The controller dies",
                    "6. The old controller comes back", "7. A long pause looks like a death",
                    "8. Then and now: an acknowledged write lost, and kept", "9. Into Spark, exactly once",
                    "9b. Exactly once inside Kafka: a transaction", "10. Tearing down",
                    "11. Without ZooKeeper: a KRaft quorum",
                    "12. Why ZooKeeper was removed: one broker failure, two designs"):
        assert heading in result.stdout
    assert "Consumer a read" in result.stdout and "consumer a owned every partition again" in result.stdout
    assert "later x owned every partition" in result.stdout and "Stabilized group demo-coordinated" in result.stdout
    assert "Spark, per partition" in result.stdout
    assert re.search(r"read_committed +kept-0 kept-1 kept-2$", result.stdout, re.MULTILINE), result.stdout
    assert re.search(r"read_uncommitted +kept-0 kept-1 kept-2 gone-0 gone-1 gone-2$", result.stdout, re.MULTILINE)
    # Chapter 8 is the kafka-1211 scenario through the runner, in both modes, with its timeline.
    assert re.search(r"^0\.8 +lost +yes +3 +1 ", result.stdout, re.MULTILINE), result.stdout
    assert re.search(r"^fixed +ok +yes +3 +0 ", result.stdout, re.MULTILINE)
    assert "0.8: lost t-0 offset 1 truncated on broker 1" in result.stdout
    assert re.search(r"^ +0\.8  .*Truncating log t-0 to offset 1", result.stdout, re.MULTILINE)
    assert "/controller_epoch      2" in result.stdout
    assert "All 1000 records came back" in result.stdout
    assert re.search(r"new leader +controller 300\d, epoch \d+, [\d.]+ s after the kill", result.stdout)
    assert "CurrentVoters:          [3001,3002,3003]" in result.stdout
    # Chapter 12: the same broker killed on a ZooKeeper lab and a KRaft lab, each one's times after the kill.
    assert re.search(r"^ +leadership moved +[\d.]+ s +[\d.]+ s$", result.stdout, re.MULTILINE), result.stdout
    assert "The consumer still reads all 1000 records" in result.stdout

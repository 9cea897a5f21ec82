"""`lab up --zookeepers 3`: a real ensemble under the brokers. One server down changes nothing; a majority
down stops every ZooKeeper write, yet the brokers keep serving what they know, and the ensemble's return
finds the same sessions, registrations and leaders (internals §8, "ZooKeeper quorum loss")."""

from __future__ import annotations

import time

import pytest

from tests.integration.admin_support import tool
from tests.integration.harness import ZkView, wait_for
from tests.integration.lab_support import bootstrap, cluster_json, ok, partitions, produce_all, read_all, status
from zkbroker.lab.processes import process_state

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SESSION_MS = 6000  # 0.8.2's default zookeeper.session.timeout.ms
TOPIC = "t"


def start_lab(lab_dir) -> dict:
    ok("up", "--dir", str(lab_dir), "--zookeepers", "3", "--brokers", "3",
       "--config", f"zookeeper.session.timeout.ms={SESSION_MS}")
    cluster = cluster_json(lab_dir)
    assert tool("topics", "--zookeeper", cluster["zookeeper"], "--create", "--topic", TOPIC,
                "--partitions", "3", "--replication-factor", "3")[0] == 0
    wait_for(lambda: (p := partitions(status(lab_dir), TOPIC)) and all(len(isr) == 3 for _, _, isr in p.values()),
             30, "every partition led with a full ISR")
    return cluster


def roles(lab_dir) -> dict[int, str]:
    return {z["id"]: z["role"] for z in status(lab_dir)["zookeepers"]}


def registrations(cluster: dict) -> dict[int, int]:
    """{broker id: the session that owns its /brokers/ids znode}."""
    view = ZkView(cluster["zookeeper"])
    try:
        return {b: view.stat(f"/brokers/ids/{b}").ephemeralOwner for b in sorted(view.registered())}
    finally:
        view.close()


def values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(count)]


def test_a_three_server_ensemble_has_one_leader_and_lists_every_server(lab_dir):
    cluster = start_lab(lab_dir)
    assert [z["id"] for z in cluster["zookeepers"]] == [1, 2, 3]
    hosts = cluster["zookeeper"].split("/")[0].split(",")
    assert hosts == [f"{z['host']}:{z['port']}" for z in cluster["zookeepers"]]
    assert cluster["zookeeper"].split("/", 1)[1].startswith("zkbroker-")  # the chroot comes last
    assert cluster["zookeeper_pid"] is None
    assert sorted(roles(lab_dir).values()) == ["follower", "follower", "leader"]
    assert "ZOOKEEPER  HOST" in ok("status", "--dir", str(lab_dir))


def test_one_zookeeper_server_of_three_down_changes_nothing(lab_dir):
    cluster = start_lab(lab_dir)
    before = status(lab_dir)
    sessions = registrations(cluster)
    assert produce_all(bootstrap(lab_dir), TOPIC, values("a", 50)) == (values("a", 50), [])

    leader = next(i for i, role in roles(lab_dir).items() if role == "leader")
    ok("kill", "--dir", str(lab_dir), "--zookeeper", str(leader))
    wait_for(lambda: sorted(roles(lab_dir).values()) == ["down", "follower", "leader"], 30, "a new ZooKeeper leader")

    acked, errors = produce_all(bootstrap(lab_dir), TOPIC, values("b", 50))
    assert (acked, errors) == (values("b", 50), [])
    read = read_all(bootstrap(lab_dir), TOPIC, 3, 100)
    assert sorted(r.value for r in read) == sorted(values("a", 50) + values("b", 50))
    after = status(lab_dir)
    assert (after["controller"], after["controller_epoch"]) == (before["controller"], before["controller_epoch"])
    assert partitions(after, TOPIC) == partitions(before, TOPIC)
    assert registrations(cluster) == sessions

    assert "it serves" in ok("start", "--dir", str(lab_dir), "--zookeeper", str(leader))
    assert sorted(roles(lab_dir).values()) == ["follower", "follower", "leader"]
    assert registrations(cluster) == sessions

    words = ok("timeline", "--dir", str(lab_dir))
    assert f"zookeeper:{leader} killed with SIGKILL" in words
    assert f"ZooKeeper server {leader} is down (does not answer)" in words
    killed_at = words.index(f"zookeeper:{leader} killed with SIGKILL")
    assert "is leader (LEADING)" in words[killed_at:]  # the ensemble's new leader, as the lab saw it


def test_two_zookeeper_servers_of_three_down_brokers_serve_on_and_recover(lab_dir):
    cluster = start_lab(lab_dir)
    before = status(lab_dir)
    sessions = registrations(cluster)
    leader = next(i for i, role in roles(lab_dir).items() if role == "leader")
    down = [leader, next(i for i in (1, 2, 3) if i != leader)]
    for server in down:
        ok("kill", "--dir", str(lab_dir), "--zookeeper", str(server))
    # The survivor notices within a tick or two that it lost its quorum.
    wait_for(lambda: sorted(roles(lab_dir).values()) == ["down", "down", "looking"], 10, "the survivor looking")
    lost = status(lab_dir)
    assert lost["zookeeper_reachable"] is False
    assert sorted(z["role"] for z in lost["zookeepers"]) == ["down", "down", "looking"]

    # Hold the quorum away for longer than a session: no ZooKeeper can expire one, so nothing changes.
    produced: list[bytes] = []
    outage_ends = time.monotonic() + SESSION_MS / 1000 * 1.5
    round_ = 0
    while time.monotonic() < outage_ends:
        batch = values(f"during-{round_}", 20)
        assert produce_all(bootstrap(lab_dir), TOPIC, batch) == (batch, [])
        produced += batch
        round_ += 1
    read = read_all(bootstrap(lab_dir), TOPIC, 3, len(produced))
    assert sorted(r.value for r in read) == sorted(produced)
    assert all(b["process"] == "running" for b in status(lab_dir)["brokers"])

    for server in down:
        ok("start", "--dir", str(lab_dir), "--zookeeper", str(server))
    wait_for(lambda: sorted(roles(lab_dir).values()) == ["follower", "follower", "leader"], 30, "the quorum back")
    after = status(lab_dir)
    assert (after["controller"], after["controller_epoch"]) == (before["controller"], before["controller_epoch"])
    assert partitions(after, TOPIC) == partitions(before, TOPIC)
    assert registrations(cluster) == sessions
    assert produce_all(bootstrap(lab_dir), TOPIC, values("after", 20)) == (values("after", 20), [])
    pids = [z["pid"] for z in cluster_json(lab_dir)["zookeepers"]]
    ok("down", "--dir", str(lab_dir))
    assert all(process_state(pid) == "dead" for pid in pids)

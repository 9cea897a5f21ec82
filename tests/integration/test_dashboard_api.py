"""The dashboard's JSON API and event stream (DESIGN §11) against a real lab: real ZooKeeper, real broker
processes answering on their lab control sockets, a real consumer group; `zkbroker lab ui` in a process of
its own, asked over HTTP."""

from __future__ import annotations

import http.client

import pytest

from tests.integration.admin_support import tool
from tests.integration.dashboard_support import Dashboard
from tests.integration.harness import ZkView, wait_for
from tests.integration.lab_support import bootstrap, cluster_json, ok, produce_all
from zkbroker.zk.znodes import ControllerRegistration, decode_controller_epoch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


@pytest.fixture
def lab(lab_dir, zookeeper):
    ok("up", "--dir", str(lab_dir), "--brokers", "3", "--zookeeper", zookeeper.connect_string,
       "--config", "zookeeper.session.timeout.ms=2000")
    code, _, err = tool("topics", "--zookeeper", cluster_json(lab_dir)["zookeeper"], "--create", "--topic", "t",
                        "--partitions", "2", "--replication-factor", "2")
    assert code == 0, err
    return lab_dir


@pytest.fixture
def dashboard(lab):
    d = Dashboard(lab)
    yield d
    d.close()


def truth(lab_dir) -> tuple[int, int, dict[int, int], dict[str, int]]:
    """ZooKeeper's own answer: (controller, epoch, {broker: session}, {state znode: version})."""
    zk = ZkView(cluster_json(lab_dir)["zookeeper"])
    try:
        controller = ControllerRegistration.decode(zk.client.get("/controller")[0]).broker_id
        epoch = decode_controller_epoch(zk.client.get("/controller_epoch")[0])
        sessions = {int(b): zk.client.get(f"/brokers/ids/{b}")[1].ephemeralOwner
                    for b in zk.client.get_children("/brokers/ids")}
        versions = {f"t-{p}": zk.client.get(f"/brokers/topics/t/partitions/{p}/state")[1].version for p in (0, 1)}
        return controller, epoch, sessions, versions
    finally:
        zk.close()


def settled(dashboard: Dashboard) -> list[dict]:
    """/api/partitions once every replica answers and agrees with its state znode."""
    def ready():
        parts = dashboard.get("/api/partitions")
        good = len(parts) == 2 and all(
            p["leader"] >= 0 and all(r["answered"] and r["believes_leader"] == p["leader"] for r in p["replicas"])
            for p in parts)
        return parts if good else None
    return wait_for(ready, 30, "every replica to apply its LeaderAndIsr")


def test_cluster_and_partitions_are_zookeepers_truth_beside_each_brokers_view(dashboard, lab):
    parts = settled(dashboard)
    controller, epoch, sessions, versions = truth(lab)
    cluster = dashboard.get("/api/cluster")
    assert cluster["controller"]["broker"] == controller and cluster["controller"]["epoch"] == epoch
    assert cluster["zookeepers"] == []  # the lab uses the test's ZooKeeper, which it did not start
    assert [b["id"] for b in cluster["brokers"]] == [1, 2, 3]
    for b in cluster["brokers"]:
        assert b["state"] == "running" and b["registered"] is True
        assert b["session"] == f"0x{sessions[b['id']]:x}" == b["own_session"]
        assert b["controller_epoch_seen"] == epoch and b["mismatches"] == []
    for p in parts:
        assert set(p) >= {"topic", "partition", "leader", "leader_epoch", "isr", "zk_version", "replicas"}
        assert p["zk_version"] == versions[f"t-{p['partition']}"] and p["mismatches"] == []
        assert sorted(p["isr"]) == sorted(r["broker"] for r in p["replicas"])
        for r in p["replicas"]:
            assert set(r) >= {"broker", "believes_leader", "leader_epoch", "hw", "leo"}
            assert r["leader_epoch"] == p["leader_epoch"] and r["hw"] == r["leo"] == 0
    # the page says it before any script runs
    assert f'<b id="controller-broker">{controller}</b>' in dashboard.page()


def test_zookeeper_tree_topics_groups_and_events(dashboard, lab):
    settled(dashboard)
    controller, _, sessions, _ = truth(lab)
    node = dashboard.get("/api/zookeeper?path=/controller")
    assert node["stat"]["ephemeralOwner"] == f"0x{sessions[controller]:x}"
    assert f'"brokerid":{controller}' in node["data"].replace(" ", "")
    assert {"brokers", "controller", "controller_epoch", "consumers", "config"} <= set(
        dashboard.get("/api/zookeeper?path=/")["children"])
    assert dashboard.get("/api/zookeeper?path=/brokers/ids")["children"] == ["1", "2", "3"]
    status, _, body = dashboard.request("GET", "/api/zookeeper?path=/no/such/node")
    assert status == 404 and body == {"error": "No znode /no/such/node"}

    acked, errors = produce_all(bootstrap(lab), "t", [b"m%d" % i for i in range(10)])
    assert len(acked) == 10, errors
    from consumer.connector import ZookeeperConsumerConnector
    connector = ZookeeperConsumerConnector({"zookeeper.connect": cluster_json(lab)["zookeeper"], "group.id": "g",
                                            "auto.offset.reset": "smallest", "zookeeper.session.timeout.ms": 2000,
                                            "consumer.timeout.ms": 5000})
    try:
        stream = connector.create_message_streams({"t": 1})["t"][0]
        for _ in range(4):
            next(stream)
        connector.commit_offsets()

        def grouped():
            groups = dashboard.get("/api/groups")
            return groups if groups and sum(p["offset"] or 0 for p in groups[0]["partitions"]) == 4 else None
        (group,) = wait_for(grouped, 20, "the group's owners and offsets")
        assert group["group"] == "g" and len(group["members"]) == 1
        owners = {p["partition"]: p["owner"] for p in group["partitions"]}
        assert sorted(owners) == [0, 1] and all(o.startswith(group["members"][0]["id"]) for o in owners.values())
        topics = dashboard.get("/api/topics")
        hw = {p["partition"]: p["hw"] for p in topics["partitions"]}
        assert sum(hw.values()) == 10
        committed = [p for p in group["partitions"] if p["offset"] is not None]
        assert all(p["lag"] == hw[p["partition"]] - p["offset"] for p in committed)
        assert group["lag"] == sum(hw[p["partition"]] for p in committed) - 4
    finally:
        connector.shutdown()
    row = topics["partitions"][0]
    assert set(row) >= {"leader", "replicas", "isr", "preferred_leader", "under_replicated", "offline", "log_start",
                        "log_end", "hw"}
    assert not row["under_replicated"] and not row["offline"] and row["log_start"] == 0
    events = dashboard.get("/api/events")
    assert [e["node"] for e in events if e["kind"] == "process_started"] == ["broker:1", "broker:2", "broker:3"]


def test_a_kill_through_the_api_is_streamed_and_moves_the_controller(dashboard, lab):
    settled(dashboard)
    controller, epoch, _, _ = truth(lab)
    with dashboard.stream() as messages:
        status, answer = dashboard.fault({"action": "kill", "broker": controller})
        assert status == 200 and answer["ok"] and answer["message"].startswith(f"Killed broker {controller}")
        killed = moved = None
        for name, data in messages:
            if name is None and data["kind"] == "process_killed":
                killed = data
            # /controller names the new one a moment before it writes /controller_epoch: a snapshot between
            # the two shows the old epoch, so the move is the first snapshot with both changed.
            if name == "cluster" and data["controller"]["broker"] not in (None, controller) \
                    and data["controller"]["epoch"] != epoch:
                moved = data
            if killed and moved:
                break
    assert killed["node"] == f"broker:{controller}"
    assert moved["controller"]["epoch"] == epoch + 1
    assert next(b for b in moved["brokers"] if b["id"] == controller)["state"] == "dead"
    assert truth(lab)[:2] == (moved["controller"]["broker"], epoch + 1)


def test_state_changes_need_post_and_the_token_and_the_host_must_be_the_bound_address(dashboard, lab):
    status, _, body = dashboard.request("POST", "/api/faults", {"action": "kill", "broker": 1})
    assert status == 403 and "X-Lab-Token" in body["error"]
    status, _, body = dashboard.request("POST", "/api/faults", {"action": "kill", "broker": 1},
                                        {"X-Lab-Token": "guessed"})
    assert status == 403
    status, _, body = dashboard.request("GET", "/api/faults")
    assert status == 405 and "error" in body
    status, body = dashboard.fault({"action": "kill", "broker": 9})
    assert status == 409 and "There is no broker 9" in body["error"]
    status, body = dashboard.fault({"action": "kill"})
    assert status == 400
    conn = http.client.HTTPConnection(dashboard.host, dashboard.port, timeout=10)
    conn.request("GET", "/api/cluster", headers={"Host": f"rebound.example:{dashboard.port}"})
    response = conn.getresponse()
    assert response.status == 403 and b"DNS rebinding" in response.read()
    conn.close()
    assert all(b["state"] == "running" for b in dashboard.get("/api/cluster")["brokers"])  # nothing was killed

"""The dashboard's views from hand-made snapshots: DESIGN §11's shapes, and each mismatch between ZooKeeper's
truth and a broker's own view found and worded (a missed re-registration, a zombie controller or leader, a
stuck ISR)."""

from __future__ import annotations

from zkbroker.lab.dashboard.page import render_strip
from zkbroker.lab.dashboard.snapshot import (
    BrokerBelief,
    BrokerProcess,
    PartitionTruth,
    Registration,
    ReplicaBelief,
    ZooKeeperServer,
    ZooKeeperSnapshot,
)
from zkbroker.lab.dashboard.views import cluster_view, groups_view, partitions_view, topics_view

S1, S2, S3 = 0x100000C63760007, 0x100000C63760005, 0x100000C63760004


def registrations(*ids: int) -> dict[int, Registration]:
    sessions = {1: S1, 2: S2, 3: S3}
    return {b: Registration(b, "127.0.0.1", 9090 + b, sessions[b], 1000 + b) for b in ids}


def processes(**states: str) -> list[BrokerProcess]:
    return [BrokerProcess(b, "127.0.0.1", 9090 + b, 100 + b, states.get(f"b{b}", "running")) for b in (1, 2, 3)]


TRUTH = PartitionTruth("t", 0, (1, 2, 3), leader=2, leader_epoch=4, controller_epoch=3, isr=(2, 3), zk_version=7)
ZK = ZooKeeperSnapshot(True, controller=2, controller_elected_at=5000, controller_epoch=3,
                       controller_epoch_zk_version=2, registrations=registrations(1, 2, 3), partitions=(TRUTH,))
SERVERS = [ZooKeeperServer(1, "127.0.0.1", 2181, 99, "standalone")]


def belief(broker: int, epoch_seen: int = 3, session: int | None = None, **replica) -> BrokerBelief:
    fields = {"leader": 2, "leader_epoch": 4, "isr": (2, 3), "zk_version": 7, "metadata_leader": 2, "hw": 10,
              "leo": 10, **replica}
    return BrokerBelief(broker, epoch_seen, session or {1: S1, 2: S2, 3: S3}[broker], broker == 2,
                        (ReplicaBelief("t", 0, **fields),))


AGREEING = {b: belief(b) for b in (1, 2, 3)}


def kinds(items: list[dict]) -> list[str]:
    return [m["kind"] for m in items]


def test_cluster_view_has_design_11_shape():
    view = cluster_view(ZK, processes(), AGREEING, SERVERS)
    assert view["controller"] == {"broker": 2, "epoch": 3, "elected_at": 5000, "epoch_zk_version": 2}
    assert view["zookeepers"] == [{"id": 1, "host": "127.0.0.1", "port": 2181, "pid": 99, "role": "standalone",
                                   "process": "running"}]
    b1 = view["brokers"][0]
    assert {k: b1[k] for k in ("id", "state", "registered", "session", "controller_epoch_seen")} == {
        "id": 1, "state": "running", "registered": True, "session": "0x100000c63760007", "controller_epoch_seen": 3}
    assert all(b["mismatches"] == [] for b in view["brokers"])


def test_broker_states_running_paused_dead_and_cut_off():
    procs = processes(b2="paused", b3="dead")
    procs[0] = BrokerProcess(1, "10.213.0.101", 9092, 101, "running", ("zookeeper:1",))
    view = cluster_view(ZK, procs, {}, SERVERS)
    assert [b["state"] for b in view["brokers"]] == ["cut-off", "paused", "dead"]
    assert view["brokers"][0]["cut_off_from"] == ["zookeeper:1"]


def test_a_running_broker_without_registration_is_a_mismatch():
    zk = ZooKeeperSnapshot(True, 2, 5000, 3, 2, registrations(2, 3), (TRUTH,))
    view = cluster_view(zk, processes(), {}, SERVERS)
    b1 = view["brokers"][0]
    assert b1["registered"] is False
    assert kinds(b1["mismatches"]) == ["not_registered"]
    assert "/brokers/ids/1 is gone" in b1["mismatches"][0]["text"]


def test_a_dead_broker_still_registered_is_a_lingering_ephemeral():
    view = cluster_view(ZK, processes(b1="dead"), {}, SERVERS)
    assert kinds(view["brokers"][0]["mismatches"]) == ["lingering_registration"]


def test_registration_owned_by_another_session_is_kafka_7165():
    view = cluster_view(ZK, processes(), {1: belief(1, session=0x1234)}, SERVERS)
    (m,) = view["brokers"][0]["mismatches"]
    assert m["kind"] == "registration_session" and "KAFKA-7165" in m["text"] and "0x1234" in m["text"]


def test_stale_controller_epoch_and_zombie_controller():
    zombie = BrokerBelief(1, 2, S1, True, ())
    view = cluster_view(ZK, processes(), {1: zombie}, SERVERS)
    assert kinds(view["brokers"][0]["mismatches"]) == ["stale_controller_epoch", "zombie_controller"]


def test_zookeeper_unreachable_says_unknown_and_judges_nothing():
    view = cluster_view(ZooKeeperSnapshot(False), processes(), {}, SERVERS)
    assert view["zookeeper_reachable"] is False
    assert all(b["registered"] is None and b["mismatches"] == [] for b in view["brokers"])
    assert "Controller unknown" in render_strip(view)


def test_partitions_view_has_design_11_shape():
    (p,) = partitions_view(ZK, AGREEING)
    assert {k: p[k] for k in ("topic", "partition", "leader", "leader_epoch", "isr", "zk_version")} == {
        "topic": "t", "partition": 0, "leader": 2, "leader_epoch": 4, "isr": [2, 3], "zk_version": 7}
    assert [r["broker"] for r in p["replicas"]] == [1, 2, 3]
    r = p["replicas"][1]
    assert {k: r[k] for k in ("broker", "believes_leader", "leader_epoch", "hw", "leo")} == {
        "broker": 2, "believes_leader": 2, "leader_epoch": 4, "hw": 10, "leo": 10}
    assert p["mismatches"] == []


def test_a_replica_that_missed_a_leader_and_isr():
    beliefs = {**AGREEING, 3: belief(3, leader=1, leader_epoch=3, metadata_leader=1)}
    (p,) = partitions_view(ZK, beliefs)
    assert kinds(p["mismatches"]) == ["stale_leader_epoch", "wrong_leader", "metadata_leader"]
    assert p["replicas"][2]["mismatch"] == ["stale_leader_epoch", "wrong_leader", "metadata_leader"]


def test_a_zombie_leader_cut_off_from_zookeeper():
    # Broker 1 led at epoch 3, lost its session; the controller moved leadership to 2 at epoch 4.
    beliefs = {**AGREEING, 1: belief(1, leader=1, leader_epoch=3, isr=(1, 2, 3))}
    (p,) = partitions_view(ZK, beliefs)
    zombie = [m for m in p["mismatches"] if m["kind"] == "zombie_leader"]
    assert zombie and zombie[0]["broker"] == 1 and "still believes it leads [t,0]" in zombie[0]["text"]


def test_a_stuck_isr_shows_the_cached_zk_version():
    beliefs = {**AGREEING, 2: belief(2, zk_version=6, isr=(2, 3, 1))}
    (p,) = partitions_view(ZK, beliefs)
    assert kinds(p["mismatches"]) == ["cached_zk_version", "isr_differs"]
    assert "Cached zkVersion [6] not equal to that in zookeeper (7)" in p["mismatches"][0]["text"]


def test_a_silent_broker_is_unknown_not_wrong():
    (p,) = partitions_view(ZK, {2: AGREEING[2]})
    assert [r["answered"] for r in p["replicas"]] == [False, True, False]
    assert p["replicas"][0]["believes_leader"] is None and p["mismatches"] == []


def test_topics_view_columns():
    offline = PartitionTruth("t", 1, (3, 1), leader=-1, leader_epoch=5, controller_epoch=3, isr=(), zk_version=9)
    zk = ZooKeeperSnapshot(True, 2, 5000, 3, 2, registrations(1, 2), (TRUTH, offline))
    leader = ReplicaBelief("t", 0, 2, 4, hw=8, leo=10, log_start=2, lso=6, open_transactions=1)
    view = topics_view(zk, {2: BrokerBelief(2, 3, S2, True, (leader,))},
                       {("t", 0): (0, 8), ("t", 1): (0, 0)})
    p0, p1 = view["partitions"]
    assert (p0["preferred_leader"], p0["leader_is_preferred"]) == (1, False)
    assert (p0["under_replicated"], p0["offline"]) == (True, False)
    assert (p0["log_start"], p0["hw"], p0["lso"], p0["log_end"], p0["open_transactions"]) == (2, 8, 6, 10, 1)
    assert (p1["lso"], p1["open_transactions"]) == (None, None)
    assert (p1["offline"], p1["offline_replicas"], p1["log_end"]) == (True, [3], None)
    hosted = {b["broker"]: b for b in view["brokers"]}
    assert hosted[2]["leaders"] == 1 and hosted[1]["out_of_isr"] == 2 and hosted[3]["registered"] is False
    assert view["topics"] == [{"topic": "t", "overrides": {}}]


def test_topics_view_names_each_topics_config_overrides():
    zk = ZooKeeperSnapshot(True, 2, 5000, 3, 2, registrations(1, 2), (TRUTH,),
                           {"t": {"segment.bytes": "4096", "retention.ms": "1000"}})
    assert topics_view(zk, {})["topics"] == [{"topic": "t", "overrides": {"retention.ms": "1000",
                                                                          "segment.bytes": "4096"}}]


def test_groups_view_lag():
    groups = {"g": {"members": {"g_host-1": {"subscription": {"t": 1}, "pattern": "static"}},
                    "owners": {("t", 0): "g_host-1-0"}, "offsets": {("t", 0): 4, ("t", 1): 2}}}
    (g,) = groups_view(groups, {("t", 0): 10, ("t", 1): None})
    assert g["members"] == [{"id": "g_host-1", "subscription": {"t": 1}, "pattern": "static"}]
    assert g["partitions"] == [
        {"topic": "t", "partition": 0, "owner": "g_host-1-0", "offset": 4, "log_end": 10, "lag": 6},
        {"topic": "t", "partition": 1, "owner": None, "offset": 2, "log_end": None, "lag": None}]
    assert g["lag"] == 6


def test_the_strip_is_rendered_with_the_controller_and_escapes_what_it_shows():
    view = cluster_view(ZK, processes(), AGREEING, SERVERS)
    view["brokers"][0]["mismatches"] = [{"kind": "x", "broker": 1, "text": "<script>alert(1)</script>"}]
    html = render_strip(view)
    assert '<b id="controller-broker">2</b>' in html and '<b id="controller-epoch">3</b>' in html
    assert 'data-broker="2"' in html and "is-controller" in html
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_the_security_view_lists_who_is_connected_as_whom_and_marks_a_recent_throttle():
    from zkbroker.lab.dashboard.broker_state import parse_state
    from zkbroker.lab.dashboard.views import security_view

    state = {"broker": 1, "connections": [
        {"listener": "SASL_SSL", "security_protocol": "SASL_SSL", "principal": "User:broker", "authenticated": True,
         "client_id": "controller-1", "address": "127.0.0.1:2"},
        {"listener": "SASL_SSL", "security_protocol": "SASL_SSL", "principal": "User:alice", "authenticated": True,
         "client_id": "p", "address": "127.0.0.1:1"}, "not a connection"],
        "quotas": [{"quota": "producer_byte_rate", "user": "alice", "client_id": None, "bound": 4096.0, "rate": 5000.0,
                    "throttle_ms": 39, "throttled_s_ago": 2.5},
                   {"quota": "consumer_byte_rate", "user": "bob", "client_id": None, "bound": 10.0, "rate": 0.0,
                    "throttle_ms": 0, "throttled_s_ago": None}]}
    view = security_view({1: parse_state(state, 1)}, {"protocol": "SASL_SSL", "mechanisms": ["PLAIN"],
                                                      "admin": {"username": "admin", "password": "secret"}})
    assert [(c["principal"], c["listener"]) for c in view["connections"]] == [("User:alice", "SASL_SSL"),
                                                                               ("User:broker", "SASL_SSL")]
    assert view["principals"] == [{"principal": "User:alice", "connections": 1},
                                  {"principal": "User:broker", "connections": 1}]
    assert [(q["user"], q["throttled"]) for q in view["quotas"]] == [("alice", True), ("bob", False)]
    assert "secret" not in str(view) and view["protocol"] == "SASL_SSL"
    assert security_view({}, None) == {"protocol": "PLAINTEXT", "mechanisms": [], "principals": [],
                                       "connections": [], "quotas": []}

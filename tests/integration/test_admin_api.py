"""The Admin API over the wire in ZooKeeper mode (issue 23, DESIGN §16), driven by real clients: confluent-kafka's
AdminClient and kafka-python's KafkaAdminClient against three real brokers. Each operation is followed by what
ZooKeeper holds and what the brokers then do.

One cluster serves the whole module (the checks use topics of their own and do not interfere), which keeps the
suite time this adds small.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest

from tests.integration.admin_support import tool
from tests.integration.clients import PYTHON_CLIENTS
from tests.integration.harness import Broker, ZkView, wait_for, wait_for_leaders
from zkbroker import timeline

# AlterConfigs (33) itself is under test, which confluent-kafka deprecates in favour of IncrementalAlterConfigs
pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")]

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

CONFLUENT = next(c for c in PYTHON_CLIENTS if c.id == "confluent-kafka")
TIMEOUT_S = 30


@dataclass
class Cluster:
    zk_connect: str
    zk: ZkView
    brokers: dict[int, Broker]
    timeline: Path  # the brokers write it as a lab's do

    def events(self, kind: str) -> list[dict]:
        lines = self.timeline.read_text().splitlines() if self.timeline.exists() else []
        return [e for e in map(json.loads, lines) if e["kind"] == kind]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def zk_state(self) -> dict:
        """What the Admin API may write: topics, configs, notifications and deletion marks."""
        out = {}
        for parent in ("/brokers/topics", "/config/topics", "/config/brokers", "/config/changes",
                       "/admin/delete_topics"):
            for child in self.zk.children(parent):
                out[f"{parent}/{child}"] = self.zk.get(f"{parent}/{child}")
        return out


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    root = tmp_path_factory.mktemp("admin-api")
    zk_connect = f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:10]}"
    hosts, chroot = zk_connect.split("/", 1)
    bootstrap_view = ZkView(hosts)
    bootstrap_view.client.ensure_path("/" + chroot)
    bootstrap_view.close()
    brokers = {i: Broker(root, i, zk_connect, control=True, delete_topic_enable="true",
                         log_retention_check_interval_ms=300, log_segment_delete_delay_ms=0) for i in (1, 2, 3)}
    view = ZkView(zk_connect)
    timeline_path = root / "timeline.jsonl"
    try:
        with mock.patch.dict(os.environ, {timeline.ENV_VAR: str(timeline_path)}):
            for b in brokers.values():
                b.start()
        wait_for(lambda: view.registered() == {1, 2, 3} and view.controller(), 30, "three brokers and a controller")
        controller = view.controller()
        wait_for(lambda: brokers[controller].log_lines("is ready to serve as the new controller"), 20,
                 "the controller's failover")
        yield Cluster(zk_connect, view, brokers, timeline_path)
    finally:
        for b in brokers.values():
            b.cleanup()
        view.close()


def _result(futures: dict, key, timeout_s: float = TIMEOUT_S):
    return futures[key].result(timeout=timeout_s)


def _error(futures: dict, key) -> ck.KafkaError:
    with pytest.raises(ck.KafkaException) as info:
        _result(futures, key)
    return info.value.args[0]


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# ---- CreateTopics ---------------------------------------------------------------------------------------------

def test_confluent_create_topic_with_an_explicit_assignment_leaves_the_znodes_of_topics_zookeeper(cluster):
    admin = cluster.admin()
    name = _topic("explicit")
    futures = admin.create_topics([NewTopic(name, 3, -1, replica_assignment=[[1, 2], [2, 3], [3, 1]],
                                            config={"retention.ms": "86400000"})], operation_timeout=TIMEOUT_S)
    assert _result(futures, name) is None
    # `topics --zookeeper` for the same assignment and configs: the same bytes in both znodes
    twin = _topic("twin")
    assert tool("topics", "--zookeeper", cluster.zk_connect, "--create", "--topic", twin, "--replica-assignment",
                "1:2,2:3,3:1", "--config", "retention.ms=86400000")[0] == 0
    assert cluster.zk.get(f"/brokers/topics/{name}") == cluster.zk.get(f"/brokers/topics/{twin}") == (
        b'{"version":1,"partitions":{"0":[1,2],"1":[2,3],"2":[3,1]}}')
    assert cluster.zk.get(f"/config/topics/{name}") == cluster.zk.get(f"/config/topics/{twin}") == (
        b'{"version":1,"config":{"retention.ms":"86400000"}}')
    # answered once leaders are elected (DelayedCreatePartitions): every broker serves the topic at once
    leaders = wait_for_leaders(list(cluster.brokers.values()), name, 3, timeout_s=5)
    assert leaders == {0: 1, 1: 2, 2: 3}
    # the topic takes produce and consume
    records = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(30)]
    acked = CONFLUENT.produce(cluster.bootstrap, name, records)
    assert len(acked) == 30
    got = CONFLUENT.consume(cluster.bootstrap, name, {0: 0, 1: 0, 2: 0}, 30)
    assert sorted((r.key, r.value) for r in got) == sorted(records)


def test_confluent_create_topic_with_counts_and_validate_only(cluster):
    admin = cluster.admin()
    checked, made = _topic("validated"), _topic("counted")
    before = cluster.zk_state()
    futures = admin.create_topics([NewTopic(checked, num_partitions=4, replication_factor=3)], validate_only=True)
    assert _result(futures, checked) is None
    assert cluster.zk_state() == before  # validate_only writes nothing
    futures = admin.create_topics([NewTopic(made, num_partitions=4, replication_factor=3)],
                                  operation_timeout=TIMEOUT_S)
    assert _result(futures, made) is None
    assignment = json.loads(cluster.zk.get(f"/brokers/topics/{made}"))["partitions"]
    assert sorted(assignment) == ["0", "1", "2", "3"] and all(sorted(r) == [1, 2, 3] for r in assignment.values())
    assert cluster.zk.get(f"/config/topics/{made}") == b'{"version":1,"config":{}}'
    metadata = admin.list_topics(made, timeout=10).topics[made]
    assert metadata.error is None and all(p.leader in (1, 2, 3) for p in metadata.partitions.values())


@pytest.mark.parametrize(("spec", "code"), [
    (dict(num_partitions=1, replication_factor=4), "INVALID_REPLICATION_FACTOR"),
    (dict(num_partitions=0, replication_factor=1), "INVALID_PARTITIONS"),
    (dict(num_partitions=1, replication_factor=1, config={"retention.ms": "soon"}), "INVALID_CONFIG"),
    (dict(num_partitions=1, replication_factor=1, config={"no.such.key": "1"}), "INVALID_CONFIG"),
    (dict(num_partitions=1, replication_factor=-1, replica_assignment=[[1, 1]]),
     "INVALID_REPLICA_ASSIGNMENT"),  # a broker named twice
    (dict(num_partitions=2, replication_factor=-1, replica_assignment=[[1, 2], [3]]),
     "INVALID_REPLICA_ASSIGNMENT"),
    # 100,000 partitions of 3 replicas: 1.7 MB of JSON, refused up front naming ZooKeeper's bound
    (dict(num_partitions=100000, replication_factor=3), "INVALID_REQUEST"),
])
def test_a_bad_create_gets_kafkas_error_and_leaves_zookeeper_unchanged(cluster, spec, code):
    admin = cluster.admin()
    name = _topic("bad")
    before = cluster.zk_state()
    error = _error(admin.create_topics([NewTopic(name, **spec)], operation_timeout=TIMEOUT_S), name)
    assert error.name() == code, error
    if code == "INVALID_REQUEST":
        assert "jute.maxbuffer" in error.str()
    assert cluster.zk_state() == before


@pytest.mark.parametrize(("name", "code"), [("bad/name", "TOPIC_EXCEPTION"), ("x" * 250, "TOPIC_EXCEPTION")])
def test_an_illegal_topic_name_is_refused_and_leaves_zookeeper_unchanged(cluster, name, code):
    admin = cluster.admin()  # kept: a client destroyed meanwhile fails its futures
    before = cluster.zk_state()
    error = _error(admin.create_topics([NewTopic(name, 1, 1)]), name)
    assert error.code() == 17, error  # INVALID_TOPIC_EXCEPTION
    assert cluster.zk_state() == before


def test_creating_an_existing_topic_is_topic_already_exists(cluster):
    admin = cluster.admin()
    name = _topic("twice")
    assert _result(admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=TIMEOUT_S), name) is None
    before = cluster.zk_state()
    error = _error(admin.create_topics([NewTopic(name, 2, 1)], operation_timeout=TIMEOUT_S), name)
    assert error.name() == "TOPIC_ALREADY_EXISTS" and name in error.str()
    assert cluster.zk_state() == before


# ---- DeleteTopics, CreatePartitions ------------------------------------------------------------------------

def test_confluent_delete_topic_removes_its_znodes_and_logs(cluster):
    admin = cluster.admin()
    name = _topic("doomed")
    assert _result(admin.create_topics([NewTopic(name, 2, 2)], operation_timeout=TIMEOUT_S), name) is None
    CONFLUENT.produce(cluster.bootstrap, name, [(b"k", b"v")])
    assert _result(admin.delete_topics([name], operation_timeout=TIMEOUT_S), name) is None
    # answered once the topic is gone from the controller's metadata; the znodes go with it
    wait_for(lambda: all(cluster.zk.stat(p) is None for p in (f"/brokers/topics/{name}", f"/config/topics/{name}",
                                                                  f"/admin/delete_topics/{name}")), 10, "znodes gone")
    wait_for(lambda: not any(b.partition_dir(name, p).exists() for b in cluster.brokers.values() for p in (0, 1)),
             10, "every log of the topic removed")
    error = _error(admin.delete_topics([name], operation_timeout=TIMEOUT_S), name)
    assert error.name() == "UNKNOWN_TOPIC_OR_PART"


def test_confluent_create_partitions_adds_partitions_that_take_produce(cluster):
    admin = cluster.admin()
    name = _topic("growing")
    assert _result(admin.create_topics([NewTopic(name, 2, 2)], operation_timeout=TIMEOUT_S), name) is None
    before = cluster.zk_state()
    assert _result(admin.create_partitions([NewPartitions(name, 4)], validate_only=True), name) is None
    assert cluster.zk_state() == before
    futures = admin.create_partitions([NewPartitions(name, 4, replica_assignment=[[3, 1], [1, 2]])],
                                      operation_timeout=TIMEOUT_S)
    assert _result(futures, name) is None
    partitions = json.loads(cluster.zk.get(f"/brokers/topics/{name}"))["partitions"]
    assert (partitions["2"], partitions["3"]) == ([3, 1], [1, 2])
    assert wait_for_leaders(list(cluster.brokers.values()), name, 4, timeout_s=5)
    acked = CONFLUENT.produce(cluster.bootstrap, name, [(f"k{i}".encode(), b"v") for i in range(40)])
    assert {p for p, _ in acked} == {0, 1, 2, 3}
    before = cluster.zk_state()
    error = _error(admin.create_partitions([NewPartitions(name, 3)]), name)
    assert error.name() == "INVALID_PARTITIONS"
    error = _error(admin.create_partitions([NewPartitions(name, 5, replica_assignment=[[1, 9]])]), name)
    assert error.name() == "INVALID_REPLICA_ASSIGNMENT" and "9" in error.str()
    assert cluster.zk_state() == before


# ---- configs ---------------------------------------------------------------------------------------------------

def _describe(admin: AdminClient, resource: ConfigResource) -> dict[str, ConfigEntry]:
    return admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)


def test_confluent_configs_of_a_topic_described_altered_and_in_force_without_a_restart(cluster):
    admin = cluster.admin()
    name = _topic("configured")
    futures = admin.create_topics([NewTopic(name, 1, 3, config={"segment.bytes": "3000"})],
                                  operation_timeout=TIMEOUT_S)
    assert _result(futures, name) is None
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    configs = _describe(admin, resource)
    assert configs["segment.bytes"].value == "3000"
    assert configs["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["retention.ms"].value == str(7 * 24 * 3600 * 1000)

    # enough records for several segments on every replica (one record a batch, each ~2 KB)
    _produce_to(cluster, name, 0, [(b"k", b"x" * 2000) for _ in range(6)], **{"batch.num.messages": 1, "acks": "all"})
    replicas = list(cluster.brokers.values())
    wait_for(lambda: all(len(b.segment_files(name, 0)) >= 3 for b in replicas), 10, "several segments per replica")

    # AlterConfigs replaces the whole set of overrides
    alter = admin.alter_configs([ConfigResource(ConfigResource.Type.TOPIC, name,
                                                set_config={"segment.bytes": "3000", "retention.ms": "1000"})])
    assert alter[next(iter(alter))].result(timeout=TIMEOUT_S) is None
    assert json.loads(cluster.zk.get(f"/config/topics/{name}")) == {
        "version": 1, "config": {"segment.bytes": "3000", "retention.ms": "1000"}}
    changes = sorted(cluster.zk.children("/config/changes"))
    assert json.loads(cluster.zk.get(f"/config/changes/{changes[-1]}")) == {
        "version": 2, "entity_path": f"topics/{name}"}
    # retention.ms=1000, in force live: every replica deletes its old segments, keeping the active one
    wait_for(lambda: all(len(b.segment_files(name, 0)) == 1 for b in replicas), 20,
             "old segments deleted on every replica")
    assert all(b.log_lines(f"Processed topic config change for topic {name}") for b in replicas)

    # IncrementalAlterConfigs: one key at a time; DELETE returns it to the broker's default
    incremental = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ck.admin.ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ck.admin.ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
    futures = admin.incremental_alter_configs([incremental])
    assert futures[next(iter(futures))].result(timeout=TIMEOUT_S) is None
    assert json.loads(cluster.zk.get(f"/config/topics/{name}")) == {
        "version": 1, "config": {"segment.bytes": "3000", "cleanup.policy": "compact"}}
    configs = _describe(admin, resource)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_the_lab_timeline_shows_the_admin_request_its_znodes_and_each_brokers_config_change(cluster):
    admin = cluster.admin()
    name = _topic("timed")
    assert _result(admin.create_topics([NewTopic(name, 3, 3)], operation_timeout=TIMEOUT_S), name) is None
    controller = cluster.zk.controller()
    (created,) = [e for e in cluster.events("admin_request") if e["resource"] == name]
    assert (created["source"], created["api"], created["error"]) == (f"broker:{controller}", "CreateTopics", "NONE")
    assert created["znodes"] == [f"/config/topics/{name}", f"/brokers/topics/{name}"]
    # the controller's reaction follows the request in the same timeline
    assert wait_for(lambda: [e for e in cluster.events("leader_and_isr_applied") if e.get("topic") == name
                             and e["ts"] >= created["ts"]], 10, "the controller's LeaderAndIsr for the topic")
    futures = admin.incremental_alter_configs([ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ck.admin.ConfigEntry("retention.ms", "600000", incremental_operation=AlterConfigOpType.SET)])])
    assert futures[next(iter(futures))].result(timeout=TIMEOUT_S) is None
    changed = wait_for(lambda: {e["source"] for e in cluster.events("config_changed") if e["entity_name"] == name}
                       == {"broker:1", "broker:2", "broker:3"} and True, 10, "every broker's config_changed event")
    assert changed


def test_a_bad_config_change_gets_kafkas_error_and_leaves_zookeeper_unchanged(cluster):
    admin = cluster.admin()
    name = _topic("guarded")
    assert _result(admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=TIMEOUT_S), name) is None
    before = cluster.zk_state()
    cases = [
        (ConfigResource(ConfigResource.Type.TOPIC, name, set_config={"retention.ms": "soon"}), "INVALID_REQUEST"),
        (ConfigResource(ConfigResource.Type.TOPIC, name, set_config={"no.such.key": "1"}), "INVALID_CONFIG"),
        (ConfigResource(ConfigResource.Type.TOPIC, _topic("absent"), set_config={"retention.ms": "1"}),
         "UNKNOWN_TOPIC_OR_PART"),
        (ConfigResource(ConfigResource.Type.BROKER, "1", set_config={"zookeeper.connect": "elsewhere:2181"}),
         "INVALID_REQUEST"),  # not a dynamic config
        (ConfigResource(ConfigResource.Type.BROKER, "2", set_config={"message.max.bytes": "-5x"}), "INVALID_REQUEST"),
    ]
    for resource, code in cases:
        futures = admin.alter_configs([resource])
        with pytest.raises(ck.KafkaException) as info:
            futures[next(iter(futures))].result(timeout=TIMEOUT_S)
        assert info.value.args[0].name() == code, (resource, info.value)
    assert cluster.zk_state() == before


def test_broker_configs_per_broker_and_cluster_default_in_force_without_a_restart(cluster):
    """confluent-kafka sets broker 2's own message.max.bytes; the cluster default (resource "", which
    librdkafka cannot name) goes through zkbroker's own client, the same IncrementalAlterConfigs v0."""
    from zkbroker.protocol.api import ApiKey

    admin = cluster.admin()
    name = _topic("bounded")  # partition i on broker i + 1 alone
    futures = admin.create_topics([NewTopic(name, 3, -1, replica_assignment=[[1], [2], [3]])],
                                  operation_timeout=TIMEOUT_S)
    assert _result(futures, name) is None
    pids = {i: b.pid for i, b in cluster.brokers.items()}
    big = [(b"k", b"x" * 8000)]

    def refused() -> set[int]:
        out = set()
        for partition in range(3):
            try:
                _produce_to(cluster, name, partition, big)
            except AssertionError as e:
                assert "MSG_SIZE_TOO_LARGE" in str(e)
                out.add(partition + 1)
        return out

    def alter(resource_name: str, value: str | None) -> None:
        op = 0 if value is not None else 1
        with cluster.brokers[int(resource_name or 1)].connection() as conn:
            answer = conn.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, {"validate_only": False, "resources": [
                {"resource_type": 4, "resource_name": resource_name,
                 "configs": [{"name": "message.max.bytes", "config_operation": op, "value": value}]}]})
        assert answer.responses[0].error_code == 0, answer

    def applied(entity: str, brokers, count: int) -> None:
        wait_for(lambda: all(len(cluster.brokers[i].log_lines(f"Processed broker config change for brokers/{entity}"))
                             == count for i in brokers), 10, f"brokers {brokers} applied change {count} of {entity}")

    futures = admin.incremental_alter_configs([ConfigResource(ConfigResource.Type.BROKER, "2", incremental_configs=[
        ck.admin.ConfigEntry("message.max.bytes", "4000", incremental_operation=AlterConfigOpType.SET)])])
    assert futures[next(iter(futures))].result(timeout=TIMEOUT_S) is None
    assert json.loads(cluster.zk.get("/config/brokers/2")) == {"version": 1, "config": {"message.max.bytes": "4000"}}
    applied("2", [2], 1)
    assert refused() == {2}
    described = _describe(admin, ConfigResource(ConfigResource.Type.BROKER, "2"))
    assert described["message.max.bytes"].value == "4000"
    assert described["message.max.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert not described["message.max.bytes"].is_read_only and described["broker.id"].is_read_only

    alter("", "3000")  # the cluster default: every broker; broker 2's own value still wins there
    assert json.loads(cluster.zk.get("/config/brokers/<default>")) == {
        "version": 1, "config": {"message.max.bytes": "3000"}}
    applied("<default>", [1, 2, 3], 1)
    assert refused() == {1, 2, 3}
    described = _describe(admin, ConfigResource(ConfigResource.Type.BROKER, "1"))
    assert (described["message.max.bytes"].value, described["message.max.bytes"].source) == (
        "3000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert _describe(admin, ConfigResource(ConfigResource.Type.BROKER, "2"))["message.max.bytes"].value == "4000"

    alter("", None)
    alter("2", None)
    applied("<default>", [1, 2, 3], 2)
    applied("2", [2], 2)
    assert refused() == set()
    assert {i: b.pid for i, b in cluster.brokers.items()} == pids  # no broker restarted


def _in_force(cluster: Cluster, entity: str, brokers: list[int], alter):
    """alter(), then wait until each of `brokers` has processed one more config change of brokers/`entity`."""
    def processed(i: int) -> int:
        return len(cluster.brokers[i].log_lines(f"Processed broker config change for brokers/{entity}"))

    before = {i: processed(i) for i in brokers}
    result = alter()
    wait_for(lambda: all(processed(i) > before[i] for i in brokers), 10, f"brokers {brokers} applied the change")
    return result


def _produce_to(cluster: Cluster, topic: str, partition: int, records, **config) -> None:
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1", "message.max.bytes": 100000,
                            "linger.ms": 0, **config})
    errors = []
    for key, value in records:
        producer.produce(topic, value, key, partition=partition, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    if errors[0] is not None:
        raise AssertionError(errors[0].name())


# ---- DescribeCluster ------------------------------------------------------------------------------------------

def test_confluent_describe_cluster_names_the_brokers_and_the_controller(cluster):
    admin = cluster.admin()
    description = admin.describe_cluster(include_authorized_operations=True).result(timeout=TIMEOUT_S)
    assert sorted((n.id, n.host, n.port) for n in description.nodes) == sorted(
        (i, b.host, b.port) for i, b in cluster.brokers.items())
    assert description.controller.id == cluster.zk.controller()
    assert description.cluster_id == json.loads(cluster.zk.get("/cluster/id"))["id"]


# ---- NOT_CONTROLLER, and a malformed request ------------------------------------------------------------------

def test_controller_bound_requests_answer_not_controller_on_other_brokers(cluster):
    from zkbroker.protocol.api import ApiKey

    controller = cluster.zk.controller()
    other = next(b for i, b in cluster.brokers.items() if i != controller)
    before = cluster.zk_state()
    with other.connection() as conn:
        created = conn.send(ApiKey.CREATE_TOPICS, 1, {"topics": [{"name": _topic("elsewhere"), "num_partitions": 1,
                                                                  "replication_factor": 1, "assignments": [],
                                                                  "configs": []}],
                                                      "timeout_ms": 1000, "validate_only": False})
        deleted = conn.send(ApiKey.DELETE_TOPICS, 1, {"topic_names": ["t"], "timeout_ms": 1000})
        grown = conn.send(ApiKey.CREATE_PARTITIONS, 0, {"topics": [{"name": "t", "count": 2, "assignments": None}],
                                                        "timeout_ms": 1000, "validate_only": False})
    assert created.topics[0].error_code == deleted.responses[0].error_code == grown.results[0].error_code == 41
    assert cluster.zk_state() == before


def test_a_hostile_create_of_two_billion_partitions_is_refused_at_once(cluster):
    from zkbroker.protocol.api import ApiKey

    controller = cluster.brokers[cluster.zk.controller()]
    before = cluster.zk_state()
    topic = {"name": _topic("huge"), "num_partitions": 2**31 - 1, "replication_factor": 1, "assignments": [],
             "configs": []}
    with controller.connection() as conn:
        answer = conn.send(ApiKey.CREATE_TOPICS, 1, {"topics": [topic], "timeout_ms": 1000, "validate_only": False})
    assert answer.topics[0].error_code == 42 and "jute.maxbuffer" in answer.topics[0].error_message
    assert cluster.zk_state() == before


def test_a_truncated_admin_request_closes_one_connection_and_changes_nothing(cluster):
    import socket
    import struct

    controller = cluster.brokers[cluster.zk.controller()]
    before = cluster.zk_state()
    # CreateTopics v0 whose topic array claims 1000 entries but ends after the count
    body = struct.pack(">hhih", 19, 0, 7, 4) + b"evil" + struct.pack(">i", 1000)
    with socket.create_connection((controller.host, controller.port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        assert s.recv(64) == b""  # closed, unanswered
    assert cluster.zk_state() == before
    admin = cluster.admin()
    assert admin.list_topics(timeout=10).brokers  # the broker serves everyone else


# ---- kafka-python's KafkaAdminClient --------------------------------------------------------------------------

def test_kafka_python_admin_client_core_operations(cluster):
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewPartitions as KpPartitions
    from kafka.admin import NewTopic as KpTopic

    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        name = _topic("kp")
        client.create_topics([KpTopic(name, 2, 2, topic_configs={"retention.ms": "3600000"})], timeout_ms=20000)
        assert json.loads(cluster.zk.get(f"/config/topics/{name}"))["config"] == {"retention.ms": "3600000"}
        assert wait_for_leaders(list(cluster.brokers.values()), name, 2, timeout_s=5)
        client.create_partitions({name: KpPartitions(3)}, timeout_ms=20000)
        assert sorted(json.loads(cluster.zk.get(f"/brokers/topics/{name}"))["partitions"]) == ["0", "1", "2"]
        client.alter_configs([KpResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": "7200000"})])
        assert json.loads(cluster.zk.get(f"/config/topics/{name}"))["config"] == {"retention.ms": "7200000"}
        described = client.describe_configs([KpResource(ConfigResourceType.TOPIC, name)])
        text = repr(described)
        assert "7200000" in text and "retention.ms" in text
        cluster_info = client.describe_cluster()
        assert cluster_info["controller_id"] == cluster.zk.controller()
        assert sorted(b["broker_id"] for b in cluster_info["brokers"]) == [1, 2, 3]
        assert cluster_info["cluster_id"] == json.loads(cluster.zk.get("/cluster/id"))["id"]
        CONFLUENT.produce(cluster.bootstrap, name, [(b"k", b"v" * 100)])
        dirs = client.describe_log_dirs()  # DescribeLogDirs to every broker
        assert sorted(d["broker"] for d in dirs) == [1, 2, 3]
        sizes = {(d["broker"], t["name"], p["partition_index"]): p["partition_size"]
                 for d in dirs for result in d["log_dirs"] for t in result["topics"] for p in t["partitions"]}
        replicas = json.loads(cluster.zk.get(f"/brokers/topics/{name}"))["partitions"]
        assert {(b, p) for (b, t, p) in sizes if t == name} == {(b, int(p)) for p, rs in replicas.items() for b in rs}
        assert sum(size for (b, t, p), size in sizes.items() if t == name) > 0
        assert all(result["log_dir"] == str(cluster.brokers[d["broker"]].dir / "data")
                   for d in dirs for result in d["log_dirs"])
        client.delete_topics([name], timeout_ms=20000)
        wait_for(lambda: cluster.zk.stat(f"/brokers/topics/{name}") is None, 10, "the topic's znode gone")
    finally:
        client.close()



# ---- the tools, Kafka 2.x's forms (golden files as for 0.8.2's tools) -----------------------------------------

def test_topics_bootstrap_server_output_is_kafka_2x(cluster):
    from tests.integration.test_admin_tools_golden import assert_golden

    bs = ("topics", "--bootstrap-server", cluster.bootstrap)
    out = []
    for argv in (("--create", "--topic", "golden-t", "--replica-assignment", "1:2,2:3", "--config",
                  "retention.ms=1000"),
                 ("--create", "--topic", "golden-u", "--partitions", "1", "--replication-factor", "1"),
                 ("--create", "--topic", "golden-t", "--partitions", "1", "--replication-factor", "1"),
                 ("--alter", "--topic", "golden-t", "--partitions", "3", "--replica-assignment", "1:2,2:3,3:1")):
        out.append(_run_tool(*bs, *argv))
    wait_for_leaders(list(cluster.brokers.values()), "golden-t", 3, timeout_s=10)
    wait_for(lambda: _in_sync(_run_tool(*bs, "--describe", "--topic", "golden-t"), 3), 15,
             "every replica of golden-t in sync")
    out.append(_run_tool(*bs, "--describe", "--topic", "golden-t"))
    out.append(_run_tool(*bs, "--list", "--topic", "golden-.*"))
    out.append(_run_tool(*bs, "--alter", "--topic", "golden-t", "--config", "retention.ms=2000"))
    out.append(_run_tool(*bs, "--delete", "--topic", "golden-u"))
    wait_for(lambda: "golden-u" not in _run_tool(*bs, "--list"), 15, "golden-u deleted")
    out.append(_run_tool(*bs, "--list", "--topic", "golden-.*"))
    assert_golden("topics_bootstrap_server.txt", "".join(out))


def test_configs_tool_both_forms_output_is_kafka_2x(cluster):
    from tests.integration.test_admin_tools_golden import assert_golden

    admin = cluster.admin()
    assert _result(admin.create_topics([NewTopic("golden-c", 1, 1)], operation_timeout=TIMEOUT_S), "golden-c") is None
    zk = ("configs", "--zookeeper", cluster.zk_connect)
    bs = ("configs", "--bootstrap-server", cluster.bootstrap)
    topic = ("--entity-type", "topics", "--entity-name", "golden-c")
    out = [
        _run_tool(*zk, "--alter", *topic, "--add-config", "retention.ms=1000,cleanup.policy=compact"),
        _run_tool(*zk, "--describe", *topic),
        _run_tool(*bs, "--alter", *topic, "--add-config", "segment.bytes=4096", "--delete-config", "cleanup.policy"),
        _run_tool(*bs, "--describe", *topic),
        _run_tool(*bs, "--alter", *topic, "--delete-config", "no.such.key"),
        # A broker describes the configs in force, and a change is in force once the broker has read its
        # notification: each describe waits for that, as a user reading the tool's output a moment later would.
        _in_force(cluster, "2", [2], lambda: _run_tool(
            *bs, "--alter", "--entity-type", "brokers", "--entity-name", "2", "--add-config",
            "log.cleaner.delete.retention.ms=3600000")),
        _run_tool(*bs, "--describe", "--entity-type", "brokers", "--entity-name", "2"),
        _in_force(cluster, "<default>", sorted(cluster.brokers), lambda: _run_tool(
            *bs, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
            "log.cleaner.min.cleanable.ratio=0.25")),
        _run_tool(*bs, "--describe", "--entity-type", "brokers", "--entity-default"),
        _run_tool(*zk, "--describe", "--entity-type", "brokers", "--entity-default"),
        _run_tool(*zk, "--alter", "--entity-type", "brokers", "--entity-name", "2", "--add-config",
                  "message.max.bytes=5000"),
        _run_tool(*bs, "--alter", "--entity-type", "brokers", "--entity-name", "2", "--add-config", "broker.id=7"),
        _run_tool(*bs, "--alter", "--entity-type", "brokers", "--entity-name", "2", "--delete-config",
                  "log.cleaner.delete.retention.ms"),
        _run_tool(*bs, "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config",
                  "log.cleaner.min.cleanable.ratio"),
    ]
    assert json.loads(cluster.zk.get("/config/topics/golden-c")) == {
        "version": 1, "config": {"retention.ms": "1000", "segment.bytes": "4096"}}
    assert_golden("configs_both_forms.txt", "".join(out))


# ---- KafkaJS, a third client -------------------------------------------------------------------------------

def test_kafkajs_admin_core_operations(cluster):
    import subprocess

    from tests.real_tools import NODE_DIR, require_node_package

    require_node_package("kafkajs")  # `make test` installs it (a skip, failing under CI, without it)
    name = _topic("kafkajs")

    def step(which: str) -> dict:
        done = subprocess.run(["node", str(NODE_DIR / "admin_ops.js"), "--bootstrap", cluster.bootstrap, "--topic",
                               name, "--step", which], capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    assert step("create") == {"created": True}
    assert json.loads(cluster.zk.get(f"/config/topics/{name}"))["config"] == {"retention.ms": "3600000"}
    assert step("grow") == {"partitions": 3}
    assert sorted(json.loads(cluster.zk.get(f"/brokers/topics/{name}"))["partitions"]) == ["0", "1", "2"]
    assert step("configs") == {"retention": "7200000"}
    assert json.loads(cluster.zk.get(f"/config/topics/{name}"))["config"] == {"retention.ms": "7200000"}
    described = step("cluster")
    assert described["brokers"] == [1, 2, 3] and described["controller"] == cluster.zk.controller()
    assert described["clusterId"] == json.loads(cluster.zk.get("/cluster/id"))["id"]
    assert step("delete") == {"deleted": True}
    wait_for(lambda: cluster.zk.stat(f"/brokers/topics/{name}") is None, 10, "the topic's znode gone")


def test_kafkajs_deletes_records_and_moves_a_partition(cluster):
    import subprocess

    from tests.real_tools import NODE_DIR, require_node_package

    require_node_package("kafkajs")
    name = _topic("kafkajs-move")
    admin = cluster.admin()
    assert _result(admin.create_topics([NewTopic(name, 1, -1, replica_assignment=[[1, 2]])],
                                       operation_timeout=TIMEOUT_S), name) is None
    wait_for_leaders(list(cluster.brokers.values()), name, 1, timeout_s=10)
    _produce_to(cluster, name, 0, [(None, b"k%d" % i) for i in range(5)], acks="all")

    def step(which: str, *extra: str) -> dict:
        done = subprocess.run(["node", str(NODE_DIR / "admin_ops.js"), "--bootstrap", cluster.bootstrap, "--topic",
                               name, "--step", which, *extra], capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    assert step("trim", "--offset", "2") == {"trimmed": True}
    assert _log_starts(cluster, name, 0) == {1: 2, 2: 2}
    with cluster.brokers[3].control() as control:
        control.fault("hold_fetchers")  # the move stays in progress while it is listed
        try:
            assert step("move", "--replicas", "2,3") == {"started": True}
            assert step("moving") == {"moving": [{"partition": 0, "replicas": [1, 2, 3], "adding": [3],
                                                  "removing": [1]}]}
        finally:
            control.heal()
    wait_for(lambda: json.loads(cluster.zk.get(f"/brokers/topics/{name}")) == {
        "version": 1, "partitions": {"0": [2, 3]}}, 30, "the move to complete")
    assert step("moving") == {"moving": []}
    assert _log_starts(cluster, name, 0) == {2: 2, 3: 2}  # the new replica starts where its leader's log does


# ---- DeleteGroups ---------------------------------------------------------------------------------------------

def test_delete_group_offsets_then_the_group_confluent_and_kafka_python(cluster):
    admin = cluster.admin()
    name, group = _topic("grouped"), _topic("doomed-group")
    assert _result(admin.create_topics([NewTopic(name, 2, 2)], operation_timeout=TIMEOUT_S), name) is None
    CONFLUENT.commit(cluster.bootstrap, group, name, {0: 5, 1: 7})  # a consumer that committed and closed
    assert CONFLUENT.committed(cluster.bootstrap, group, name, [0, 1]) == {0: 5, 1: 7}
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KpPartition

    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:  # OffsetDelete first: partition 1's offset goes, the group stays
        deleted = kp.delete_group_offsets(group, [KpPartition(name, 1)])
    finally:
        kp.close()
    assert [e.__name__ for e in deleted.values()] == ["NoError"]  # the error classes, per partition
    assert CONFLUENT.committed(cluster.bootstrap, group, name, [0, 1]) == {0: 5, 1: -1001}
    futures = admin.delete_consumer_groups([group], request_timeout=TIMEOUT_S)
    assert futures[group].result(TIMEOUT_S) is None
    listed = admin.list_consumer_groups().result(TIMEOUT_S)
    assert group not in {g.group_id for g in listed.valid}
    assert CONFLUENT.committed(cluster.bootstrap, group, name, [0, 1]) == {0: -1001, 1: -1001}  # none stored
    futures = admin.delete_consumer_groups([group], request_timeout=TIMEOUT_S)
    with pytest.raises(ck.KafkaException) as info:
        futures[group].result(TIMEOUT_S)
    assert info.value.args[0].name() == "GROUP_ID_NOT_FOUND"
    # the same through `zkbroker consumer-groups --delete`
    other = _topic("tool-group")
    CONFLUENT.commit(cluster.bootstrap, other, name, {0: 1})
    bs = ("consumer-groups", "--bootstrap-server", cluster.bootstrap, "--delete", "--group", other)
    assert tool(*bs) == (0, f"Deletion of requested consumer groups ('{other}') was successful.\n", "")
    code, out, err = tool(*bs)
    assert (code, out) == (1, "") and "could not be deleted due to" in err and "GROUP_ID_NOT_FOUND" in err


# ---- DeleteRecords --------------------------------------------------------------------------------------------

def _log_starts(cluster: Cluster, topic: str, partition: int) -> dict[int, int]:
    """Each replica's log start offset, from its broker's lab control socket."""
    out = {}
    for broker_id, broker in cluster.brokers.items():
        with broker.control() as control:
            rows = [p for p in control.state()["partitions"] if (p["topic"], p["partition"]) == (topic, partition)]
        if rows:
            out[broker_id] = rows[0]["log_start"]
    return out


def test_confluent_delete_records_moves_the_log_start_on_the_leader_and_its_followers(cluster):
    from confluent_kafka import TopicPartition

    admin = cluster.admin()
    name = _topic("trimmed")
    assert _result(admin.create_topics([NewTopic(name, 2, 3)], operation_timeout=TIMEOUT_S), name) is None
    wait_for_leaders(list(cluster.brokers.values()), name, 2, timeout_s=10)
    _produce_to(cluster, name, 0, [(None, b"v%d" % i) for i in range(10)], acks="all")
    _produce_to(cluster, name, 1, [(None, b"w%d" % i) for i in range(3)], acks="all")
    futures = admin.delete_records([TopicPartition(name, 0, 4), TopicPartition(name, 1, 99)],
                                   request_timeout=TIMEOUT_S)
    results = {tp.partition: f for tp, f in futures.items()}
    assert results[0].result(TIMEOUT_S).low_watermark == 4  # answered once every in-sync follower has it
    with pytest.raises(ck.KafkaException) as info:
        results[1].result(TIMEOUT_S)
    assert info.value.args[0].name() == "OFFSET_OUT_OF_RANGE"  # past the high watermark
    assert _log_starts(cluster, name, 0) == {1: 4, 2: 4, 3: 4}  # followers learnt it from Fetch
    assert _log_starts(cluster, name, 1) == {1: 0, 2: 0, 3: 0}
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": _topic("g"),
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=TIMEOUT_S)
        assert (low, high) == (4, 10)
    finally:
        consumer.close()
    # -1: up to the high watermark, through `zkbroker delete-records`
    offsets = Path(cluster.timeline.parent / f"{name}.json")
    offsets.write_text(json.dumps({"partitions": [{"topic": name, "partition": 0, "offset": -1},
                                                  {"topic": name, "partition": 7, "offset": 1}], "version": 1}))
    code, out, err = tool("delete-records", "--bootstrap-server", cluster.bootstrap, "--offset-json-file", str(offsets))
    assert (code, err) == (0, "")
    assert out == ("Executing records delete operation\nRecords delete operation completed:\n"
                   f"partition: {name}-0\tlow_watermark: 10\n"
                   f"partition: {name}-7\terror: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
                   "This server does not host this topic-partition.\n")
    assert _log_starts(cluster, name, 0) == {1: 10, 2: 10, 3: 10}
    records = [e for e in cluster.events("admin_request") if e["api"] == "DeleteRecords"]
    assert {(e["resource"], e["low_watermark"]) for e in records} >= {(f"{name}-0", 4), (f"{name}-0", 10)}


def test_kafka_python_deletes_records_and_elects_leaders(cluster):
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KpPartition

    name = _topic("kp-trim")
    admin = cluster.admin()
    assert _result(admin.create_topics([NewTopic(name, 1, 2)], operation_timeout=TIMEOUT_S), name) is None
    wait_for_leaders(list(cluster.brokers.values()), name, 1, timeout_s=10)
    _produce_to(cluster, name, 0, [(None, b"p%d" % i) for i in range(6)], acks="all")
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        tp = KpPartition(name, 0)
        deleted = kp.delete_records({tp: 5})
        assert deleted[tp]["low_watermark"] == 5
        assert set(_log_starts(cluster, name, 0).values()) == {5}
        response = kp.elect_leaders(1, {name: [0]}, raise_errors=False)  # unclean: it has a leader already
        (topic,) = response.replica_election_results
        assert [(p[0], p[1]) for p in topic[1]] == [(0, 84)]  # ELECTION_NOT_NEEDED
    finally:
        kp.close()


def test_delete_records_tool_output_is_kafka_2x(cluster, tmp_path):
    from tests.integration.test_admin_tools_golden import assert_golden

    bs = ("delete-records", "--bootstrap-server", cluster.bootstrap, "--offset-json-file")
    admin = cluster.admin()
    assert _result(admin.create_topics([NewTopic("golden-dr", 1, 2)], operation_timeout=TIMEOUT_S),
                   "golden-dr") is None
    wait_for_leaders(list(cluster.brokers.values()), "golden-dr", 1, timeout_s=10)
    _produce_to(cluster, "golden-dr", 0, [(None, b"x")] * 5, acks="all")
    out = []
    for i, body in enumerate((
            '{"partitions": [{"topic": "golden-dr", "partition": 0, "offset": 3}], "version": 1}',
            '{"partitions": [{"topic": "golden-dr", "partition": 0, "offset": 9}]}',
            '{"partitions": [{"topic": "golden-dr", "partition": 0, "offset": 1},'
            ' {"topic": "golden-dr", "partition": 0, "offset": 2}], "version": 1}',
            '{"partitions": [], "version": 2}',
            '')):
        path = tmp_path / f"offsets-{i}.json"
        path.write_text(body)
        out.append(f"# {body or '(empty)'}\n" + _run_tool(*bs, str(path)).replace(str(path), "F"))
    assert_golden("delete_records.txt", "".join(out))


# ---- AlterPartitionReassignments, ListPartitionReassignments (KIP-455) ------------------------------------------

def test_reassignment_through_the_api_kafka_python_and_reassign_partitions_bootstrap_server(cluster, tmp_path):
    """kafka-python starts a move the new replica cannot finish (its fetchers held): listed with the replicas it
    adds and removes, and the topic znode takes version 2; `--cancel` takes it back; `--execute` starts it again
    and, the fetchers released, it completes (`--verify`), leaving 0.8.2's version 1 znode."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KpPartition

    from tests.integration.test_admin_tools_golden import assert_golden

    name = "golden-ra"
    admin = cluster.admin()
    assert _result(admin.create_topics([NewTopic(name, 1, -1, replica_assignment=[[1, 2]])],
                                       operation_timeout=TIMEOUT_S), name) is None
    wait_for_leaders(list(cluster.brokers.values()), name, 1, timeout_s=10)
    _produce_to(cluster, name, 0, [(None, b"r%d" % i) for i in range(20)], acks="all")
    topic_znode = f"/brokers/topics/{name}"
    moves = tmp_path / "moves.json"
    moves.write_text(json.dumps({"version": 1, "partitions": [{"topic": name, "partition": 0, "replicas": [2, 3]}]}))
    bs = ("reassign-partitions", "--bootstrap-server", cluster.bootstrap)
    out = []
    with cluster.brokers[3].control() as control:
        control.fault("hold_fetchers")
        try:
            kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
            try:
                tp = KpPartition(name, 0)
                assert kp.alter_partition_reassignments({tp: [2, 3]}) == {tp: None}
                assert kp.list_partition_reassignments() == {
                    tp: {"replicas": [1, 2, 3], "adding_replicas": [3], "removing_replicas": [1]}}
            finally:
                kp.close()
            assert json.loads(cluster.zk.get(topic_znode)) == {
                "version": 2, "partitions": {"0": [1, 2, 3]}, "adding_replicas": {"0": [3]},
                "removing_replicas": {"0": [1]}}
            assert cluster.zk.stat("/admin/reassign_partitions") is None  # the API's moves live in the topic znode
            out.append(_run_tool(*bs, "--list"))
            out.append(_run_tool(*bs, "--verify", "--reassignment-json-file", str(moves)))
            out.append(_run_tool(*bs, "--execute", "--reassignment-json-file", str(moves)))
            out.append(_run_tool(*bs, "--cancel", "--reassignment-json-file", str(moves)))
            assert cluster.zk.get(topic_znode) == b'{"version":1,"partitions":{"0":[1,2]}}'
            out.append(_run_tool(*bs, "--list"))
            out.append(_run_tool(*bs, "--cancel", "--reassignment-json-file", str(moves)))
            out.append(_run_tool(*bs, "--execute", "--reassignment-json-file", str(moves)))
        finally:
            control.heal()
    wait_for(lambda: json.loads(cluster.zk.get(topic_znode))["partitions"] == {"0": [2, 3]}, 30,
             "the reassignment to complete")
    assert cluster.zk.get(topic_znode) == b'{"version":1,"partitions":{"0":[2,3]}}'
    wait_for(lambda: "is complete." in _run_tool(*bs, "--verify", "--reassignment-json-file", str(moves)), 10,
             "--verify to say the reassignment completed")
    out.append(_run_tool(*bs, "--verify", "--reassignment-json-file", str(moves)))
    out.append(_run_tool(*bs, "--list"))
    assert_golden("reassign_partitions_bootstrap_server.txt", "".join(out).replace(str(tmp_path), "DIR"))
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": _topic("g"),
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:  # the records moved with the partition (the new leader's HW moves once its follower has fetched)
        wait_for(lambda: consumer.get_watermark_offsets(ck.TopicPartition(name, 0), timeout=TIMEOUT_S) == (0, 20),
                 15, "the moved partition's 20 records below its high watermark")
    finally:
        consumer.close()


def test_consumer_groups_reset_and_delete_offsets_output_is_kafka_2x(cluster):
    from tests.integration.test_admin_tools_golden import assert_golden

    name, group = "golden-cg", "golden-group"
    admin = cluster.admin()
    assert _result(admin.create_topics([NewTopic(name, 2, 1)], operation_timeout=TIMEOUT_S), name) is None
    wait_for_leaders(list(cluster.brokers.values()), name, 2, timeout_s=10)
    _produce_to(cluster, name, 0, [(None, b"a")] * 10)
    _produce_to(cluster, name, 1, [(None, b"b")] * 4)
    CONFLUENT.commit(cluster.bootstrap, group, name, {0: 5, 1: 1})
    bs = ("consumer-groups", "--bootstrap-server", cluster.bootstrap, "--group", group)
    reset = (*bs, "--reset-offsets")
    out = []

    def committed():
        return CONFLUENT.committed(cluster.bootstrap, group, name, [0, 1])

    out.append(_run_tool(*reset, "--topic", name, "--to-earliest"))
    out.append(_run_tool(*reset, "--topic", name, "--to-latest", "--dry-run"))
    assert committed() == {0: 5, 1: 1}  # neither ran
    out.append(_run_tool(*reset, "--topic", f"{name}:0", "--shift-by", "-2", "--execute"))
    assert committed() == {0: 3, 1: 1}
    out.append(_run_tool(*reset, "--all-topics", "--to-offset", "100", "--execute"))
    assert committed() == {0: 10, 1: 4}
    out.append(_run_tool(*reset, "--topic", name, "--to-datetime", "2000-01-01T00:00:00.000", "--execute"))
    assert committed() == {0: 0, 1: 0}
    out.append(_run_tool(*reset, "--topic", name, "--by-duration", "P1D", "--dry-run"))
    out.append(_run_tool(*reset, "--topic", name, "--to-current", "--dry-run"))
    out.append(_run_tool(*reset, "--topic", name, "--shift-by", "1", "--to-latest"))
    out.append(_run_tool(*bs, "--delete-offsets", "--topic", f"{name}:1"))
    assert committed() == {0: 0, 1: -1001}
    out.append(_run_tool(*bs, "--delete-offsets", "--topic", "golden-nope"))
    assert_golden("consumer_groups_offsets.txt", "".join(out))


def test_reset_offsets_refuses_a_group_with_members_and_generate_proposes_live_brokers(cluster, tmp_path):
    name, group = _topic("busy"), _topic("busy-group")
    admin = cluster.admin()
    assert _result(admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=TIMEOUT_S), name) is None
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                            "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    try:
        consumer.subscribe([name])
        wait_for(lambda: consumer.poll(0.2) is None and consumer.assignment(), 30, "the consumer's assignment")
        code, out, err = tool("consumer-groups", "--bootstrap-server", cluster.bootstrap, "--group", group,
                              "--reset-offsets", "--topic", name, "--to-earliest", "--execute")
        assert (code, out) == (1, "")
        assert (f"Assignments can only be reset if the group '{group}' is inactive, but the current state is "
                "Stable.") in err
    finally:
        consumer.close()
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": name}], "version": 1}))
    code, out, err = tool("reassign-partitions", "--bootstrap-server", cluster.bootstrap, "--generate",
                          "--topics-to-move-json-file", str(topics), "--broker-list", "2,3")
    assert (code, err) == (0, "")
    current, proposed = out.split("\n\nProposed partition reassignment configuration\n")
    assert current.startswith("Current partition replica assignment\n")
    (move,) = json.loads(proposed)["partitions"]
    assert move["topic"] == name and move["replicas"][0] in (2, 3) and move["log_dirs"] == ["any"]


# ---- ElectLeaders (last: it restarts a broker) ------------------------------------------------------------------

def test_confluent_elect_leaders_moves_leadership_back_to_the_preferred_replica(cluster):
    from confluent_kafka import ElectionType, TopicPartition

    admin = cluster.admin()
    controller = cluster.zk.controller()
    preferred, other = [i for i in sorted(cluster.brokers) if i != controller][:2]
    name = _topic("elected")
    futures = admin.create_topics([NewTopic(name, 1, -1, replica_assignment=[[preferred, other]])],
                                  operation_timeout=TIMEOUT_S)
    assert _result(futures, name) is None

    def leader_and_isr():  # as ZooKeeper holds them (0.8.2's brokers learn ISR changes only with leader changes)
        state = json.loads(cluster.zk.get(f"/brokers/topics/{name}/partitions/0/state") or b"{}")
        return state.get("leader"), sorted(state.get("isr", []))

    wait_for(lambda: leader_and_isr() == (preferred, sorted([preferred, other])), 15, "both replicas in sync")
    victim = cluster.brokers[preferred]
    assert victim.terminate() == 0  # a controlled shutdown: the leadership moves to the other replica
    victim.start()
    wait_for(lambda: leader_and_isr() == (other, sorted([preferred, other])), 30,
             "the preferred replica back in the ISR, not leading")
    tp = TopicPartition(name, 0)
    results = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(TIMEOUT_S)  # (operation_timeout breaks it)
    assert results == {tp: None}
    assert leader_and_isr()[0] == preferred  # answered once the preferred replica leads
    assert admin.list_topics(name, timeout=10).topics[name].partitions[0].leader == preferred
    wait_for(lambda: cluster.zk.stat("/admin/preferred_replica_election") is None, 10,
             "the controller removed the election's znode")
    again = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(TIMEOUT_S)
    assert again[tp].name() == "ELECTION_NOT_NEEDED"
    unclean = admin.elect_leaders(ElectionType.UNCLEAN, [tp]).result(TIMEOUT_S)
    assert unclean[tp].name() == "ELECTION_NOT_NEEDED"


def _in_sync(described: str, partitions: int) -> bool:
    rows = [line for line in described.splitlines() if "\tPartition: " in line]
    return len(rows) == partitions and all(
        sorted(row.split("Replicas: ")[1].split("\t")[0].split(",")) == sorted(row.split("Isr: ")[1].split(","))
        for row in rows)


def _run_tool(*argv: str) -> str:
    """`$ zkbroker ...`, then what it printed on stdout and stderr and its exit status when not 0."""
    code, out, err = tool(*argv)
    shown = " ".join(a if a != argv[2] else "B" for a in argv)
    return f"$ zkbroker {shown}\n{out}" + (f"[stderr] {err}" if err else "") + (f"[exit {code}]\n" if code else "")


def test_unclean_election_on_request_brings_an_offline_partition_back_through_leader_election_tool(cluster):
    controller = cluster.zk.controller()
    last, other = [i for i in sorted(cluster.brokers) if i != controller][:2]
    name = _topic("unclean")
    admin = cluster.admin()
    futures = admin.create_topics([NewTopic(name, 1, -1, replica_assignment=[[last, other]],
                                            config={"unclean.leader.election.enable": "false"})],
                                  operation_timeout=TIMEOUT_S)
    assert _result(futures, name) is None

    def leader_and_isr():
        state = json.loads(cluster.zk.get(f"/brokers/topics/{name}/partitions/0/state") or b"{}")
        return state.get("leader"), sorted(state.get("isr", []))

    wait_for(lambda: leader_and_isr() == (last, sorted([last, other])), 15, "both replicas in sync")
    assert cluster.brokers[other].terminate() == 0  # leaves the ISR
    wait_for(lambda: leader_and_isr() == (last, [last]), 15, f"broker {last} alone in the ISR")
    assert cluster.brokers[last].terminate() == 0  # the last ISR member goes: the partition is offline
    wait_for(lambda: leader_and_isr() == (-1, [last]), 15, "the partition offline")
    cluster.brokers[other].start()
    wait_for(lambda: other in cluster.zk.registered(), 15, f"broker {other} back")
    try:
        assert leader_and_isr() == (-1, [last])  # unclean election is off for the topic: it stays offline
        code, out, err = tool("leader-election", "--bootstrap-server", cluster.bootstrap, "--election-type",
                              "unclean", "--topic", name, "--partition", "0")
        assert (code, out, err) == (0, f"Successfully completed leader election (UNCLEAN) for partitions {name}-0\n",
                                    "")
        assert leader_and_isr() == (other, [other])
        assert json.loads(cluster.zk.get(f"/config/topics/{name}"))["config"] == {
            "unclean.leader.election.enable": "false"}  # the election did not change the topic's config
        code, out, err = tool("leader-election", "--bootstrap-server", cluster.bootstrap, "--election-type",
                              "unclean", "--topic", name, "--partition", "0")
        assert (code, out) == (0, f"Valid replica already elected for partitions {name}-0\n")
    finally:
        cluster.brokers[last].start()
        wait_for(lambda: set(cluster.zk.registered()) == set(cluster.brokers), 30, "every broker back")


def test_leader_election_tool_output_is_kafka_2x(cluster, tmp_path):
    from tests.integration.test_admin_tools_golden import assert_golden

    admin = cluster.admin()
    assert _result(admin.create_topics([NewTopic("golden-le", 2, 1)], operation_timeout=TIMEOUT_S),
                   "golden-le") is None
    wait_for_leaders(list(cluster.brokers.values()), "golden-le", 2, timeout_s=10)
    listed = tmp_path / "partitions.json"
    listed.write_text('{"partitions": [{"topic": "golden-le", "partition": 1},'
                      ' {"topic": "golden-le", "partition": 0}]}')
    twice = tmp_path / "twice.json"
    twice.write_text('{"partitions": [{"topic": "golden-le", "partition": 1},'
                     ' {"topic": "golden-le", "partition": 1}]}')
    bs = ("leader-election", "--bootstrap-server", cluster.bootstrap)
    out = []
    for argv in (("--election-type", "preferred", "--topic", "golden-le", "--partition", "0"),
                 ("--election-type", "preferred", "--path-to-json-file", str(listed)),
                 ("--election-type", "unclean", "--topic", "golden-le", "--partition", "1"),
                 ("--election-type", "preferred", "--topic", "golden-le", "--partition", "7"),
                 ("--election-type", "preferred", "--path-to-json-file", str(twice)),
                 ("--election-type", "preferred", "--topic", "golden-le"),
                 ("--election-type", "preferred", "--topic", "golden-le", "--partition", "0",
                  "--all-topic-partitions"),
                 ("--election-type", "dirty", "--all-topic-partitions"),
                 ("--topic", "golden-le", "--partition", "0")):
        out.append(_run_tool(*bs, *argv).replace(str(tmp_path), "DIR"))
    assert_golden("leader_election.txt", "".join(out))

"""KRaft brokers (process.roles=broker) on real processes started from the CLI alone, with no ZooKeeper anywhere:
three controllers and three brokers serve confluent-kafka (an AdminClient creates the topic, a producer writes with
acks=all, a subscribe() group reads it back), kafka-python and kcat; the brokers keep serving when the active
controller is killed and register with the new one; a killed broker is fenced after broker.session.timeout.ms, its
leaderships move, and once restarted it starts from its own metadata snapshot and log, catches up, is unfenced
and rejoins the ISR. The tools work through a broker and the ZooKeeper ways refuse; one combined node
(process.roles=broker,controller) serves clients alone."""

from __future__ import annotations

import pytest

from tests.integration.admin_support import tool as tool_run
from tests.integration.harness import wait_for
from tests.integration.kraft_support import leader_of, make_kraft_cluster, stop_all
from tests.integration.test_real_clients import kcat_read_all
from tests.real_tools import require
from zkbroker.protocol.api import ApiKey

pytestmark = pytest.mark.integration

SESSION_MS = 4000  # broker.session.timeout.ms (the controllers fence by it)
HEARTBEAT_MS = 500  # broker.heartbeat.interval.ms
TIMEOUT_S = 90
SNAPSHOT_BYTES = 512  # brokers snapshot their image often, so a restart starts from one


@pytest.fixture
def cluster(tmp_path):
    controllers, brokers = make_kraft_cluster(
        tmp_path, controller_overrides={"broker_session_timeout_ms": SESSION_MS},
        broker_heartbeat_interval_ms=HEARTBEAT_MS, broker_session_timeout_ms=SESSION_MS,
        metadata_log_max_record_bytes_between_snapshots=SNAPSHOT_BYTES)
    try:
        for node in (*controllers, *brokers):
            node.start()
        _started(controllers, brokers)
        yield controllers, brokers
    finally:
        stop_all(brokers)
        stop_all(controllers)


def _started(controllers, brokers) -> None:
    """Every process has logged its start (a loaded machine may take long to start Python processes)."""
    for node, server in [*((c, "ControllerServer") for c in controllers), *((b, "BrokerServer") for b in brokers)]:
        wait_for(lambda n=node, s=server: n.log_lines(rf"\[{s} id={n.id}\] started"), TIMEOUT_S,
                 f"{server} {node.id} to start", interval_s=0.2)


def _bootstrap(brokers) -> str:
    return ",".join(b.bootstrap for b in brokers if b.alive())


def _metadata(broker, topic: str | None = None):
    """(live broker ids, {partition: leader}) from the broker's Metadata v1 answer (nothing from a broker that
    does not listen yet)."""
    try:
        with broker.connection(timeout_s=5.0) as conn:
            response = conn.send(ApiKey.METADATA, 1, {"topics": [topic] if topic else []})
    except OSError:
        return set(), {}
    leaders = {p.partition: p.leader for t in response.topics if t.topic == topic for p in t.partitions}
    return {b.node_id for b in response.brokers}, leaders


def _isr_members(broker, topic: str) -> set[int]:
    with broker.connection(timeout_s=5.0) as conn:
        response = conn.send(ApiKey.METADATA, 1, {"topics": [topic]})
    return {r for t in response.topics for p in t.partitions for r in p.isr}


def _serving(brokers, count: int) -> None:
    wanted = {b.id for b in brokers[:count]}
    wait_for(lambda: _metadata(brokers[0])[0] >= wanted, TIMEOUT_S, f"brokers {sorted(wanted)} unfenced")


def _create_topic(bootstrap: str, topic: str, partitions: int, replication: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, replication)], operation_timeout=30)
    assert futures[topic].result(TIMEOUT_S) is None


def _produce(bootstrap: str, topic: str, values: range) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    failures = []

    def delivered(err, _msg):
        if err is not None:
            failures.append(err)

    for value in values:
        producer.produce(topic, str(value).encode(), key=str(value).encode(), on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    assert failures == []


def _consume(consumer, count: int) -> list[int]:
    seen: list[int] = []

    def more():
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.append(int(msg.value()))
        return len(seen) >= count

    wait_for(more, TIMEOUT_S, f"{count} records", interval_s=0)
    return seen


def test_brokers_serve_confluent_kafka_kafka_python_and_kcat_and_keep_serving_when_the_active_controller_dies(cluster):
    from confluent_kafka import Consumer
    from kafka import KafkaConsumer

    controllers, brokers = cluster
    leader, epoch = leader_of(controllers)
    _serving(brokers, 3)
    with brokers[1].connection() as conn:
        advertised = {k.api_key for k in conn.send(ApiKey.API_VERSIONS, 0, {}).api_keys}
    assert advertised.isdisjoint({ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA,
                                  ApiKey.CONTROLLED_SHUTDOWN})
    bootstrap = _bootstrap(brokers)
    _create_topic(bootstrap, "kraft-orders", 3, 3)
    _produce(bootstrap, "kraft-orders", range(3000))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kraft-group", "auto.offset.reset": "earliest",
                         "enable.auto.commit": True, "auto.commit.interval.ms": 200})
    try:
        consumer.subscribe(["kraft-orders"])
        assert sorted(_consume(consumer, 3000)) == list(range(3000))
        consumer.commit(asynchronous=False)

        old = next(c for c in controllers if c.id == leader)
        old.kill()
        new_leader, _ = leader_of([c for c in controllers if c.alive()], above_epoch=epoch)
        assert new_leader != leader
        _produce(bootstrap, "kraft-orders", range(3000, 4000))  # acks=all: replication, ISR and all
        assert sorted(_consume(consumer, 1000)) == list(range(3000, 4000))
        _create_topic(bootstrap, "kraft-after-failover", 1, 3)  # forwarded to the new active controller
    finally:
        consumer.close()
    reader = KafkaConsumer("kraft-orders", bootstrap_servers=bootstrap.split(","), auto_offset_reset="earliest",
                           consumer_timeout_ms=10_000)
    try:
        values = [int(m.value) for m in reader]
    finally:
        reader.close()
    assert sorted(values) == list(range(4000))
    assert sorted(int(r.value) for r in kcat_read_all(require("kcat"), bootstrap, "kraft-orders")) == list(range(4000))
    for broker in brokers:
        assert broker.alive()
        assert broker.log_lines("Unfenced: serving")


def test_a_killed_broker_is_fenced_after_its_session_its_leaderships_move_and_a_restart_unfences_it(cluster):
    controllers, brokers = cluster
    leader_of(controllers)
    _serving(brokers, 3)
    bootstrap = _bootstrap(brokers)
    _create_topic(bootstrap, "kraft-fenced", 3, 3)
    _produce(bootstrap, "kraft-fenced", range(300))
    victim, witness = brokers[0], brokers[1]
    _, leaders = _metadata(witness, "kraft-fenced")
    assert victim.id in leaders.values()  # every broker leads one partition of three

    victim.kill()

    def fenced_and_moved():
        live, now = _metadata(witness, "kraft-fenced")
        return victim.id not in live and victim.id not in now.values() and -1 not in now.values()

    wait_for(fenced_and_moved, TIMEOUT_S, f"broker {victim.id} fenced and its leaderships moved")
    _produce(_bootstrap(brokers), "kraft-fenced", range(300, 400))

    assert victim.log_lines(r"\.checkpoint written \(")  # its own snapshot, stored (MetadataLog's line)
    victim.start()
    wait_for(lambda: victim.id in _metadata(witness, "kraft-fenced")[0], TIMEOUT_S,
             f"broker {victim.id} unfenced after its restart")
    assert victim.log_lines("Starting from snapshot")  # its own, in its metadata log dir; the log after it
    assert len(victim.log_lines("Registered with the controller")) == 2
    assert len(victim.log_lines("Unfenced: serving")) == 2
    wait_for(lambda: victim.id in _isr_members(witness, "kraft-fenced"), TIMEOUT_S,
             f"broker {victim.id} back in an ISR")


@pytest.fixture
def small_cluster(tmp_path):
    controllers, brokers = make_kraft_cluster(tmp_path, controllers=1, brokers=1)
    try:
        for node in (*controllers, *brokers):
            node.start()
        _started(controllers, brokers)
        yield controllers, brokers
    finally:
        stop_all(brokers)
        stop_all(controllers)


def test_the_tools_work_through_a_kraft_broker_and_the_zookeeper_ways_refuse_in_one_sentence(small_cluster):
    controllers, (broker,) = small_cluster
    leader_of(controllers)
    _serving([broker], 1)
    bs = ("--bootstrap-server", broker.bootstrap)
    assert tool_run("topics", *bs, "--create", "--topic", "kraft-tools", "--partitions", "2", "--replication-factor",
                "1", "--config", "retention.ms=1234") == (0, "Created topic kraft-tools.\n", "")
    wait_for(lambda: set(_metadata(broker, "kraft-tools")[1].values()) == {broker.id}, TIMEOUT_S, "the leaders")
    code, out, _ = tool_run("topics", *bs, "--describe", "--topic", "kraft-tools")
    assert code == 0 and "PartitionCount: 2" in out and "Configs: retention.ms=1234" in out
    assert tool_run("configs", *bs, "--alter", "--entity-type", "topics", "--entity-name", "kraft-tools",
                "--add-config", "retention.ms=999")[0] == 0
    wait_for(lambda: "retention.ms=999 " in tool_run("configs", *bs, "--describe", "--entity-type", "topics",
                                                  "--entity-name", "kraft-tools")[1], TIMEOUT_S, "the new config")
    code, out, err = tool_run("metadata-quorum", *bs, "describe", "--status")
    assert (code, err) == (0, "")
    assert f"LeaderId:               {controllers[0].id}\n" in out and "CurrentObservers:       [1]\n" in out
    code, out, err = tool_run("consumer-groups", *bs, "--list")
    assert (code, err) == (0, "")

    sentence = (f"{broker.bootstrap} is a node of a KRaft cluster, which has no ZooKeeper: use --bootstrap-server "
                f"with one of its brokers instead of --zookeeper.")
    for argv in (("topics", "--zookeeper", broker.bootstrap, "--list"),
                 ("console-consumer", "--zookeeper", broker.bootstrap, "--topic", "kraft-tools"),
                 ("consumer-offset-checker", "--zookeeper", broker.bootstrap, "--group", "g")):
        code, out, err = tool_run(*argv)
        assert (code, out) == (1, "") and err.strip().endswith(sentence), argv
    code, _, err = tool_run("topics", "--zookeeper", f"127.0.0.1:{controllers[0].port}", "--list")
    assert code == 1 and "is a node of a KRaft cluster" in err


def test_a_combined_broker_and_controller_node_serves_clients_alone(tmp_path):
    from confluent_kafka import Consumer

    from tests.integration.kraft_support import make_combined_node

    node = make_combined_node(tmp_path).start()
    try:
        _serving([node], 1)
        _create_topic(node.bootstrap, "kraft-combined", 2, 1)
        _produce(node.bootstrap, "kraft-combined", range(500))
        consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "kraft-combined-group",
                             "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe(["kraft-combined"])
            assert sorted(_consume(consumer, 500)) == list(range(500))
        finally:
            consumer.close()
        code, out, err = tool_run("metadata-quorum", "--bootstrap-server", node.bootstrap, "describe", "--status")
        assert (code, err) == (0, "") and "CurrentVoters:          [1]\n" in out
    finally:
        node.cleanup()
    assert node.log_lines("Unfenced: serving") and node.log_lines(r"\[ControllerServer id=1\] started")

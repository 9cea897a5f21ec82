"""`make demo`: the story of a ZooKeeper-era Kafka cluster, told on a real one.

Each chapter does one thing to a lab cluster (real ZooKeeper, real broker processes) and says in plain
words what happened and why, quoting the znodes and the brokers' own log lines. It ends with the records of
the story ingested into Parquet by `zkbroker spark-ingest`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkbroker import timeline
from zkbroker.lab.cluster import LabCluster
from zkbroker.zk import paths
from zkbroker.zk.znodes import ControllerRegistration, LeaderIsrState, decode_controller_epoch

SESSION_TIMEOUT_MS = 3000
TOPIC = "demo"
ADMIN_TOPIC = "demo-admin"
RECORDS = 1000
COMPARE_TOPIC = "orders"  # chapter 12's, on both designs
COMPARE_PARTITIONS = 4


def _partitions(broker: int, partitions: list[int]) -> str:
    if not partitions:
        return f"Broker {broker} led no partition."
    names = " and ".join(f"p{p}" for p in partitions)
    each = "it" if len(partitions) == 1 else "each"
    return (f"Broker {broker} led {names}: {each} got a new leader from its in-sync replicas, with leader_epoch one "
            "higher and the controller's new epoch.")


def _bootstrap(cluster) -> str:
    return cluster.bootstrap()


def _librdkafka(cluster) -> dict:
    """A confluent-kafka client's bootstrap and, on a secured lab, its admin's TLS and SASL (lab_security.py)."""
    return {"bootstrap.servers": cluster.bootstrap(), **cluster.clients.librdkafka()}


def say(text: str = "") -> None:
    print(textwrap.fill(" ".join(text.split()), width=100) if text else "", flush=True)


def chapter(title: str) -> None:
    print(f"\n== {title} ==", flush=True)


def show(label: str, value: str) -> None:
    print(f"    {label:<22} {value}", flush=True)


class Story:
    def __init__(self, directory: Path) -> None:
        self.lab = LabCluster(directory)
        self.zk: KazooClient | None = None
        self.spark: Future | None = None
        self.quorum = None  # chapter 11's KRaft controllers, while they run
        self.compared: list[LabCluster] = []  # chapter 12's two labs, while they run
        self.records_in = threading.Event()
        self.seed = 7  # the seed of the scenario chapter 8 replays

    def raw(self, path: str) -> bytes | None:
        try:
            return self.zk.get(path)[0]
        except NoNodeError:
            return None

    def get(self, path: str) -> str | None:
        """A znode's text, as the story quotes it."""
        data = self.raw(path)
        return None if data is None else data.decode()

    def controller(self) -> int | None:
        data = self.raw(paths.CONTROLLER)
        return ControllerRegistration.decode(data).broker_id if data else None

    def controller_epoch(self) -> int:
        data = self.raw(paths.CONTROLLER_EPOCH)
        return decode_controller_epoch(data) if data else 0

    def leader(self, partition: int) -> int:
        data = self.raw(paths.partition_state_path(TOPIC, partition))
        return LeaderIsrState.decode(data).leader if data else -1

    def registered(self) -> list[int]:
        try:
            return sorted(int(c) for c in self.zk.get_children(paths.BROKER_IDS))
        except NoNodeError:
            return []

    def wait(self, condition, timeout_s: float) -> float:
        started = time.monotonic()
        while not condition():
            if time.monotonic() - started > timeout_s:
                raise RuntimeError("the cluster did not do what the story expected in time")
            time.sleep(0.02)
        return time.monotonic() - started

    def log_lines(self, broker_id: int, pattern: str) -> list[str]:
        log = Path(self.lab.load().broker(broker_id).config).parent / "server.log"
        return [line for line in log.read_text(errors="replace").splitlines() if re.search(pattern, line)]

    def quote_log(self, broker_id: int, pattern: str, last: int = 1) -> None:
        """Print the broker's latest log lines matching pattern, waiting a little for them to be written."""
        self.wait(lambda: self.log_lines(broker_id, pattern), 10)
        for line in self.log_lines(broker_id, pattern)[-last:]:
            print(f"    broker {broker_id} log: {line}", flush=True)

    def create_topic(self) -> None:
        from zkbroker import admin
        from zkbroker.zk.client import ZkClient

        zk = ZkClient(self.lab.load().zookeeper)
        zk.start()
        try:
            admin.create_topic(zk, TOPIC, 3, 2)
        finally:
            zk.close()

    def admin_api(self, cluster) -> None:
        """Chapter 2b: a topic created over the wire by an unmodified AdminClient, which a ZooKeeper-mode broker
        serves by writing the same znodes as the admin tool and letting the controller act on its watch."""
        from confluent_kafka.admin import AdminClient, NewTopic

        chapter("2b. The same through the Admin API")
        say("""Since Kafka 2.2 the tools people use create topics over the wire instead (CreateTopics, KIP-4).
            Here an unmodified confluent-kafka AdminClient asks for a second topic. The broker it reaches does not
            create anything itself: if it is the controller it writes the very znode the admin tool wrote above,
            then answers once the controller, acting on its watch as before, has elected the leaders.""")
        client = AdminClient(_librdkafka(cluster))
        for future in client.create_topics([NewTopic(ADMIN_TOPIC, 3, 2)], operation_timeout=30).values():
            future.result(60)
        show(paths.topic_path(ADMIN_TOPIC), self.get(paths.topic_path(ADMIN_TOPIC)))
        events = [json.loads(line) for line in self.lab.timeline_file.read_text().splitlines()
                  if '"admin_request"' in line]
        for event in events[-1:]:
            show("timeline", f"{event.get('source')}: admin_request {event.get('api')} {event.get('resource')} -> "
                             f"{event.get('error')}, wrote {', '.join(event.get('znodes') or [])}")
        say("""Same JSON, same controller reaction: the Admin API is the ZooKeeper design seen from the wire
            (docs/admin-api.md).""")

    def wait_state(self, partition: int, avoid_leader: int | None = None) -> str:
        self.wait(lambda: self.leader(partition) not in (-1, avoid_leader), 15)
        return self.get(paths.partition_state_path(TOPIC, partition))

    def produce(self, cluster) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=_bootstrap(cluster), acks="all", linger_ms=5,
                                 request_timeout_ms=10000, **cluster.clients.kafka_python())
        try:
            for i in range(RECORDS):
                producer.send(TOPIC, key=f"key-{i % 50}".encode(), value=f"record {i}".encode())
            producer.flush(30)
        finally:
            producer.close(5)

    def consume(self, cluster) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({**_librdkafka(cluster), "group.id": "demo",
                             "enable.auto.commit": False, "log_level": 0})
        try:
            consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
            counts: dict[int, int] = {}
            deadline = time.monotonic() + 30
            while sum(counts.values()) < RECORDS and time.monotonic() < deadline:
                for message in consumer.consume(500, timeout=1.0):
                    if message.error() is None:
                        counts[message.partition()] = counts.get(message.partition(), 0) + 1
            return counts
        finally:
            consumer.close()

    def owners(self, group: str) -> dict[int, str]:
        try:
            children = self.zk.get_children(paths.consumer_owners_path(group, TOPIC))
        except NoNodeError:
            return {}
        return {int(p): self.get(paths.consumer_owner_path(group, TOPIC, int(p))) or "" for p in children}

    def consumer_group(self, cluster) -> None:
        from consumer.connector import ZookeeperConsumerConnector
        from consumer.stream import ConsumerTimeout

        group = "demo-group"
        chapter("4. A consumer group shares the partitions through ZooKeeper")
        say(f"""Two of our 0.8.2 high-level consumers join group "{group}". Each registers an ephemeral znode
            under /consumers/{group}/ids and watches that directory; on every change each member runs the same
            range assignment over the sorted partitions and sorted consumer threads, and claims its share with
            ephemeral owner znodes. No coordinator: ZooKeeper is the only meeting point.""")
        config = {"zookeeper.connect": cluster.zookeeper, "group.id": group, "auto.offset.reset": "smallest",
                  "auto.commit.enable": "false", "consumer.timeout.ms": 2000}
        first = ZookeeperConsumerConnector({**config, "consumer.id": "a"})
        second = None
        try:
            streams = [first.create_message_streams({TOPIC: 1})[TOPIC][0]]
            second = ZookeeperConsumerConnector({**config, "consumer.id": "b"})
            streams.append(second.create_message_streams({TOPIC: 1})[TOPIC][0])
            self.wait(lambda: sorted(set(self.owners(group).values())) == [f"{group}_a-0", f"{group}_b-0"], 30)
            ids, first_id = paths.consumer_ids_path(group), paths.consumer_id_path(group, f"{group}_a")
            show(ids, ", ".join(sorted(self.zk.get_children(ids))))
            show(first_id, self.get(first_id))
            for partition, owner in sorted(self.owners(group).items()):
                show(f".../owners/{TOPIC}/{partition}", owner)
            counts = [0, 0]

            def drain(i: int) -> None:
                try:
                    for _ in streams[i]:
                        counts[i] += 1
                except ConsumerTimeout:
                    pass

            threads = [threading.Thread(target=drain, args=(i,)) for i in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            first.commit_offsets()
            second.commit_offsets()
            say(f"""Consumer a read {counts[0]} records and consumer b {counts[1]}: each partition went to exactly one
                member. They committed their offsets to ZooKeeper, where 0.8.2 keeps them; the offset checker
                reads them next to each partition's log size:""")
            checker = subprocess.run(
                [sys.executable, "-m", "zkbroker", "consumer-offset-checker", "--zookeeper", cluster.zookeeper,
                 "--group", group], capture_output=True, text=True, timeout=60)
            print(textwrap.indent(checker.stdout.rstrip() or checker.stderr.rstrip(), "    "), flush=True)
            say("Consumer b shuts down: its registration and owner znodes go, and consumer a takes its partitions.")
            second.shutdown()
            second = None
            took = self.wait(lambda: set(self.owners(group).values()) == {f"{group}_a-0"}
                             and len(self.owners(group)) == 3, 30)
            for partition, owner in sorted(self.owners(group).items()):
                show(f".../owners/{TOPIC}/{partition}", owner)
            say(f"""{took:.1f} s later consumer a owned every partition again. As in 0.8.2, the group rebalances on a
                member change or a partition increase, never because a broker died: its fetchers simply follow
                the partition's new leader.""")
        finally:
            if second is not None:
                second.shutdown()
            first.shutdown()

    def coordinator_group(self, cluster) -> None:
        from confluent_kafka import Consumer

        from zkbroker.client.connection import BrokerConnection
        from zkbroker.coordinator.lookup import partition_for
        from zkbroker.protocol.api import ApiKey

        group = "demo-coordinated"
        chapter("4b. Both worlds: a coordinator group on the same topic")
        say(f"""Today's clients do not meet in ZooKeeper: they ask a broker, the group coordinator. Group "{group}"
            belongs to partition abs(hashCode("{group}")) % 50 = {partition_for(group, 50)} of __consumer_offsets,
            and that partition's leader coordinates it. Two unmodified confluent-kafka consumers subscribe().""")
        brokers = {b.id: b for b in cluster.brokers}
        first_broker = cluster.brokers[0]

        def coordinator() -> int | None:
            with BrokerConnection(first_broker.host, first_broker.port, timeout_s=5,
                                  security=cluster.clients.security) as conn:
                answer = conn.send(ApiKey.FIND_COORDINATOR, 0, {"group_id": group})
            return answer.node_id if answer.error_code == 0 else None

        assigned: dict[str, set[int]] = {}
        consumers = {}
        for name in ("x", "y"):
            consumer = Consumer({**_librdkafka(cluster), "group.id": group, "client.id": name,
                                 "auto.offset.reset": "earliest", "heartbeat.interval.ms": 500,
                                 "session.timeout.ms": 6000})
            consumer.subscribe([TOPIC], on_assign=lambda c, ps, n=name: assigned.__setitem__(
                n, {p.partition for p in ps}))
            consumers[name] = consumer
        try:
            def polled_until(done) -> bool:
                for consumer in consumers.values():
                    consumer.poll(0.05)
                return done()

            self.wait(lambda: polled_until(lambda: len(assigned) == 2 and sorted(
                p for ps in assigned.values() for p in ps) == [0, 1, 2]), 60)
            self.wait(lambda: coordinator() is not None, 30)
            chosen = coordinator()
            show("coordinator", f"broker {chosen} ({brokers[chosen].host}:{brokers[chosen].port})")
            for name, partitions in sorted(assigned.items()):
                show(f"consumer {name}", ", ".join(f"p{p}" for p in sorted(partitions)))
            say("""The first to join leads: it got every member's subscription in its JoinGroup answer, computed the
                assignment and sent it back in SyncGroup; the coordinator wrote the group to __consumer_offsets and
                handed each member its part. The coordinator's log says so:""")
            self.quote_log(chosen, r"Stabilized group demo-coordinated")
            say("Consumer y closes: one LeaveGroup to the coordinator, one JoinGroup/SyncGroup round for x.")
            started = time.monotonic()
            consumers.pop("y").close()
            assigned.pop("y")
            self.wait(lambda: polled_until(lambda: assigned.get("x") == {0, 1, 2}), 30)
            self.quote_log(chosen, r"(Preparing to rebalance|Stabilized) group demo-coordinated", last=2)
            say(f"""{time.monotonic() - started:.1f} s later x owned every partition. In
                chapter 4 each member of the ZooKeeper group saw the change through its own watch, re-ran the
                assignment itself and raced the others for owner znodes; here only the coordinator saw it, and the
                members learned of it from their heartbeats. Both groups read the same topic, each with its own
                offsets: chapter 4's in ZooKeeper, this one's in __consumer_offsets.""")
        finally:
            for consumer in consumers.values():
                consumer.close()

    def transaction(self, cluster) -> None:
        from confluent_kafka import Consumer, Producer, TopicPartition

        from zkbroker.coordinator.transaction.log_format import partition_for

        topic, transactional_id = "demo-txn", "demo-copier"
        chapter("9b. Exactly once inside Kafka: a transaction")
        say(f"""Inside Kafka, exactly once means transactions (Kafka 0.11). A producer with transactional.id
            "{transactional_id}" finds its transaction coordinator: the leader of partition
            abs(hashCode("{transactional_id}")) % 50 = {partition_for(transactional_id)} of __transaction_state. It
            commits three records to "{topic}", then aborts three more.""")
        producer = Producer({**_librdkafka(cluster), "transactional.id": transactional_id})
        producer.init_transactions(60)
        for outcome, values in (("commit", [b"kept-0", b"kept-1", b"kept-2"]),
                                ("abort", [b"gone-0", b"gone-1", b"gone-2"])):
            producer.begin_transaction()
            for value in values:
                producer.produce(topic, value=value, partition=0)
            producer.flush(30)
            (producer.commit_transaction if outcome == "commit" else producer.abort_transaction)(60)

        def read(isolation: str, count: int) -> list[bytes]:
            consumer = Consumer({**_librdkafka(cluster), "group.id": f"demo-{isolation}",
                                 "isolation.level": isolation, "enable.auto.commit": False})
            consumer.assign([TopicPartition(topic, 0, 0)])
            seen: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(seen) < count and time.monotonic() < deadline:
                seen += [m.value() for m in consumer.consume(100, timeout=0.5) if m.error() is None]
            consumer.close()
            return seen

        show("read_committed", " ".join(v.decode() for v in read("read_committed", 3)))
        show("read_uncommitted", " ".join(v.decode() for v in read("read_uncommitted", 6)))
        say("""Both transactions wrote their records to the log; each ended with a marker the coordinator had the
            partition's leader append (COMMIT, then ABORT). A read_committed consumer -- librdkafka's default --
            skips the aborted records; a read_uncommitted one sees all six. The coordinator's log:""")
        coordinator = next(b for b in cluster.brokers if self.log_lines(b.id, "initialized transactional id "
                                                                               f"{transactional_id} "))
        self.quote_log(coordinator.id, f"initialized transactional id {transactional_id} ")

    def run(self) -> None:
        self.start_spark()
        chapter("1. A cluster starts")
        say("""Starting a real Apache ZooKeeper and three broker processes on 127.0.0.1. Each broker connects
            to ZooKeeper, registers itself as an *ephemeral* znode under /brokers/ids (it lives exactly as
            long as the broker's ZooKeeper session), and races the others to create /controller.""")
        cluster = self.lab.up(brokers=3, config=[f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}"])
        self.zk = KazooClient(hosts=cluster.zookeeper)
        self.zk.start(timeout=10)
        show("ZooKeeper", cluster.zookeeper)
        for b in cluster.brokers:
            show(paths.broker_path(b.id), self.get(paths.broker_path(b.id)) or "(missing)")
        first = self.controller()
        show(paths.CONTROLLER, self.get(paths.CONTROLLER))
        show(paths.CONTROLLER_EPOCH, self.get(paths.CONTROLLER_EPOCH))
        say(f"""Broker {first} created /controller first, so it is the controller. It bumped /controller_epoch to
            {self.controller_epoch()}; every request a controller sends carries this epoch, so brokers can
            ignore a controller that has been replaced.""")
        self.quote_log(first, r"incremented epoch to")

        chapter("2. A topic")
        say(f"""Creating topic "{TOPIC}" with 3 partitions, each on 2 brokers, the way Kafka 0.8.2's admin tool
            does: it only writes znodes. The controller watches /brokers/topics, picks the first live replica of
            each partition as its leader, writes the partition's state znode, and tells the brokers with
            LeaderAndIsr and UpdateMetadata requests.""")
        self.create_topic()
        show(paths.topic_path(TOPIC), self.get(paths.topic_path(TOPIC)))
        for partition in range(3):
            show(f".../partitions/{partition}/state", self.wait_state(partition))

        self.admin_api(cluster)

        chapter("3. Real Kafka clients")
        say(f"""An unmodified kafka-python producer writes {RECORDS} keyed records with acks=all (the leader answers
            once every in-sync replica has them); an unmodified confluent-kafka (librdkafka) consumer reads them
            back from offset 0.""")
        self.produce(cluster)
        self.records_in.set()
        counts = self.consume(cluster)
        show("records per partition", ", ".join(f"p{p}: {n}" for p, n in sorted(counts.items())))
        say(f"All {sum(counts.values())} records came back, in order within each partition.")

        self.consumer_group(cluster)
        self.coordinator_group(cluster)

        chapter("5. The controller dies")
        say(f"""Killing broker {first} with SIGKILL: no goodbye, its TCP connection simply breaks. ZooKeeper
            keeps its session (and so its ephemeral znodes) until the session timeout,
            {SESSION_TIMEOUT_MS} ms, passes without a heartbeat.""")
        epoch_before = self.controller_epoch()
        for partition in range(3):
            self.wait_state(partition)
        leaders_before = {p: self.leader(p) for p in range(3)}
        self.lab.kill(first)
        took = self.wait(lambda: self.controller() not in (None, first)
                         and self.controller_epoch() > epoch_before, SESSION_TIMEOUT_MS / 1000 + 10)
        second = self.controller()
        show(paths.CONTROLLER, self.get(paths.CONTROLLER))
        show(paths.CONTROLLER_EPOCH, self.get(paths.CONTROLLER_EPOCH))
        say(f"""{took:.1f} s after the kill, ZooKeeper expired broker {first}'s session and deleted /controller
            and /brokers/ids/{first}. The survivors were watching /controller; broker {second} won the new race
            and raised the epoch to {self.controller_epoch()}.""")
        self.quote_log(second, r"incremented epoch to|Currently active brokers", last=2)
        for partition in range(3):
            show(f".../partitions/{partition}/state", self.wait_state(partition, avoid_leader=first))
        moved = [p for p, leader in leaders_before.items() if leader == first]
        say(f"""{_partitions(first, moved)} Where broker {first} was only a follower, the leader drops it from the
            ISR once it has not fetched for replica.lag.time.max.ms (0.8.2's rule).""")
        counts = self.consume(cluster)
        say(f"The consumer still reads all {sum(counts.values())} records: nothing acknowledged was lost.")

        chapter("6. The old controller comes back as an ordinary broker")
        self.lab.start(first)
        show(paths.BROKER_IDS, ", ".join(map(str, self.registered())))
        show(paths.CONTROLLER, self.get(paths.CONTROLLER))
        say(f"""Broker {first} registered again, found /controller taken by broker {second}, and now just
            watches it. There is still exactly one controller.""")
        self.quote_log(second, rf"Broker {first} started")

        chapter("7. A long pause looks like a death")
        paused = next(b for b in (1, 2, 3) if b not in (first, second))
        say(f"""Pausing broker {paused} with SIGSTOP, as a long garbage-collection pause would. The process is
            alive but silent, so its session expires.""")
        self.lab.pause(paused)
        took = self.wait(lambda: paused not in self.registered(), SESSION_TIMEOUT_MS / 1000 + 10)
        show(paths.BROKER_IDS, ", ".join(map(str, self.registered())))
        say(f"""After {took:.1f} s /brokers/ids/{paused} vanished and the controller declared broker {paused}
            failed, although the process never crashed.""")
        self.quote_log(second, rf"Broker {paused} failed")
        say(f"Resuming broker {paused} with SIGCONT.")
        self.lab.resume(paused)
        took = self.wait(lambda: paused in self.registered(), 15)
        show(paths.BROKER_IDS, ", ".join(map(str, self.registered())))
        say(f"""Within {took:.1f} s it learned its session had expired, opened a new one and registered again;
            the controller saw it start.""")
        self.quote_log(paused, r"re-registering broker info")
        self.quote_log(second, rf"Broker {paused} started")

        self.then_and_now(cluster)
        self.ingest(cluster)
        self.transaction(cluster)

        chapter("10. Tearing down")
        self.zk.stop()
        self.zk.close()
        self.zk = None
        self.lab.down()
        say("Every broker and ZooKeeper stopped. Logs stay in " + str(self.lab.dir) + ".")
        self.kraft_quorum()
        self.why_kraft()

    # ---- chapter 11: the design that replaced ZooKeeper ------------------------------------------------------

    def kraft_quorum(self) -> None:
        from zkbroker.lab.kraft_quorum import KRaftQuorum

        chapter("11. Without ZooKeeper: a KRaft quorum")
        say("""Kafka 2.8 began to replace ZooKeeper (KIP-500): a quorum of controllers keeps the cluster's
            metadata in a replicated log, partition 0 of __cluster_metadata, and elects its leader with Raft
            (KIP-595). Three controllers, formatted with one cluster id (`zkbroker storage format`) and started with
            `zkbroker server`, with no ZooKeeper anywhere:""")
        quorum = self.quorum = KRaftQuorum(self.lab.dir / "kraft")
        quorum.start_all()
        leader, epoch = quorum.leader()
        status = subprocess.run([sys.executable, "-m", "zkbroker", "metadata-quorum", "--bootstrap-server",
                                 quorum.bootstrap(), "describe", "--status"], capture_output=True, text=True,
                                timeout=60)
        for line in status.stdout.splitlines():
            print(f"    {line}", flush=True)
        say(f"""Controller {leader} won the vote of epoch {epoch}: it voted for itself and asked the others for
            theirs. A voter gives one vote an epoch, only to a candidate whose log is at least as long as its own, and
            writes it to its quorum-state file before answering. Two votes of three made it leader. Now we kill
            it.""")
        killed_at = time.monotonic()
        quorum.kill(leader)
        new_leader, new_epoch = quorum.leader(above_epoch=epoch)
        took = time.monotonic() - killed_at
        show("new leader", f"controller {new_leader}, epoch {new_epoch}, {took:.1f} s after the kill")
        say(f"""No session had to expire and nobody raced for a znode: the followers' fetches went unanswered for
            controller.quorum.fetch.timeout.ms (2 s), one stood for election in a higher epoch and the other voted
            for it. Its first record of epoch {new_epoch} is a LeaderChange naming it; the metadata log is the same
            on both survivors up to the high watermark. Brokers in KRaft mode would now fetch metadata from
            controller {new_leader}; that part is still to come here (docs/kraft.md).""")
        quorum.stop()
        self.quorum = None

    # ---- chapter 12: the same broker failure on both designs ---------------------------------------------------

    def why_kraft(self) -> None:
        from zkbroker.lab.side_by_side import aligned

        chapter("12. Why ZooKeeper was removed: one broker failure, two designs")
        say(f"""Two labs side by side, each with two brokers and Kafka's default timeouts: one with ZooKeeper (the
            controller is one of the brokers), one with a KRaft quorum of three controllers. The same command
            creates topic "{COMPARE_TOPIC}" on both ({COMPARE_PARTITIONS} partitions, 2 replicas each), then the
            same broker is killed on both at the same moment.""")
        labs = {"zookeeper": LabCluster(self.lab.dir / "zookeeper-vs-kraft" / "zookeeper"),
                "kraft": LabCluster(self.lab.dir / "zookeeper-vs-kraft" / "kraft")}
        self.compared = list(labs.values())
        with ThreadPoolExecutor(2) as pool:
            started = {pool.submit(labs["zookeeper"].up, brokers=2, base_port=0): "zookeeper",
                       pool.submit(labs["kraft"].up, kraft=True, brokers=2): "kraft"}
            clusters = {started[f]: f.result() for f in started}
        for cluster in clusters.values():
            _create_topic(_bootstrap(cluster))
        for lab in labs.values():
            self.wait(lambda lab=lab: len(_leaders(lab)) == COMPARE_PARTITIONS, 60)
        controller = _zookeeper_controller(labs["zookeeper"])
        victim = next(b.id for b in clusters["zookeeper"].brokers if b.id != controller)
        led = {design: sorted(p for p, leader in _leaders(lab).items() if leader == victim)
               for design, lab in labs.items()}
        show("killed", f"broker {victim} on both (ZooKeeper mode's controller is broker {controller}); it led "
                       f"{', '.join(f'{d}: ' + (' '.join(f'p{p}' for p in ps) or 'nothing') for d, ps in led.items())}")
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda lab: lab.kill(victim), labs.values()))
        moved = {design: (lambda lab=lab, ps=ps: all(_leaders(lab).get(p) not in (None, victim) for p in ps))
                 for (design, lab), ps in zip(labs.items(), led.values())}
        self.wait(lambda: all(done() for done in moved.values()), 40)
        views = {design: aligned(timeline.read(lab.timeline_file)) for design, lab in labs.items()}
        print(f"    {'after the kill':<26} {'ZooKeeper lab':>14} {'KRaft lab':>14}", flush=True)
        for label in ("broker declared failed", "leadership moved"):
            cells = [next((f"{m['at'] / 1000:.1f} s" for m in views[d]["milestones"] if m["label"] == label), "-")
                     for d in ("zookeeper", "kraft")]
            print(f"    {label:<26} {cells[0]:>14} {cells[1]:>14}", flush=True)
        say("""The dead broker was noticed by a timeout in both designs, and not sooner in KRaft: ZooKeeper expires
            a session zookeeper.session.timeout.ms (6 s by default) after the last heartbeat it heard, the
            quorum fences a broker broker.session.timeout.ms (9 s) after its last heartbeat; both are counted
            from a heartbeat sent before the kill, so both numbers are a little shorter. What changed is where
            the truth lives and what it costs to act on it. With ZooKeeper the controller writes each
            partition's state znode to ZooKeeper, one write per partition, then sends LeaderAndIsr to every
            broker concerned; with KRaft the controller appends the fencing and every leadership change to its
            own log as one batch, and the brokers, which already follow that log, apply it. A few partitions
            cost the same either way, as the numbers show; at millions the writes, and above all a new
            controller loading everything from ZooKeeper before it can decide anything, take minutes in the
            published figures (KIP-500's reason; bench/kraft.py measures ours). A KRaft controller that takes
            over has the whole log in memory already: `zkbroker lab scenario run controller-failover --mode all`
            kills the controller on both designs, and the dashboard's Side by side tab draws both timelines,
            aligned at the kill.""")
        for lab in labs.values():
            lab.down()
        self.compared = []

    # ---- chapter 8: KAFKA-1211, then and now, through the scenario runner ------------------------------------

    def then_and_now(self, cluster) -> None:
        from zkbroker.lab.runner import run_scenario
        from zkbroker.lab.scenario import find_scenario
        from zkbroker.lab.scenario_cli import format_result

        chapter("8. Then and now: an acknowledged write lost, and kept")
        scenario = find_scenario("kafka-1211")
        say(f"""The failover lab replays ZooKeeper-era failures from a catalogue (`zkbroker lab scenario list`), each
            in its 0.8 form and its fixed form, on labs of their own, and checks what happened. Here is
            {scenario.name}: {scenario.summary}. Partition 0 of topic "t" lives on broker 2 (the leader, B) and broker
            1 (A). m1 and m2 are acknowledged with acks=all once A has them, but A learns the new high watermark
            only from its next fetch; A restarts before that, B dies, and A must lead. The lab holds A's fetchers
            (a fault point) so the steps happen in this order every time, as they can by chance in production.
            The two modes differ in one switch, replication.truncation: high-watermark (0.8) or leader-epoch
            (KIP-101). The steps of the 0.8 run:""")
        directory = self.lab.dir / scenario.name

        def narrate(line: str) -> None:
            if line.startswith(f"[{scenario.name} 0.8] ") and "/" in line.split("] ", 1)[1].split(" ", 1)[0]:
                print("    " + line.split("] ", 1)[1], flush=True)

        result = run_scenario(scenario, "both", seed=self.seed, directory=directory, narrate=narrate)
        print(format_result(result), flush=True)
        say("""The checker read every replica and compared them with what the producer was told: in 0.8 mode m2,
            acknowledged at offset 1, is gone, and the timeline says which event lost it. A few lines of each
            run's timeline (`zkbroker lab timeline --dir DIR`):""")
        for mode in ("0.8", "fixed"):
            for line in _timeline_lines(directory / mode):
                print(f"    {mode:>5}  {line}", flush=True)
        say("""With 0.8's rule A truncated its log to its own high watermark when it restarted, threw away m2, and
            then became leader: a write acknowledged with acks=-1 is gone (KAFKA-1211). With leader epochs A asked
            B where its epoch ended (OffsetsForLeaderEpoch) instead, kept m2, and nothing acknowledged was lost.
            `zkbroker lab scenario run kafka-1211` replays it; docs/scenarios.md lists the others.""")

    def start_spark(self) -> None:
        """Start Spark in the background while the story goes on (the JVM's output goes to spark.log), and warm
        it up, once the topic has records, with a read of it that keeps no row: chapter 7 then waits less."""
        self.spark = ThreadPoolExecutor(1, thread_name_prefix="spark-start").submit(self._warm_spark)

    def _warm_spark(self):
        from consumer.spark.session import spark_session

        spark = spark_session("local[2]", self.lab.dir / "spark.log")
        if self.records_in.wait(300):
            try:
                (spark.read.format("zkkafka").option("zookeeper.connect", self.lab.load().zookeeper)
                 .option("subscribe", TOPIC).load().filter("offset < 0")
                 .write.mode("overwrite").parquet(str(self.lab.dir / "spark-warm-up")))
            except Exception as e:  # only a warm-up (it may run while a chapter kills brokers): the ingest is real
                (self.lab.dir / "spark-warm-up.error").write_text(f"{e}\n")
        return spark

    def ingest(self, cluster) -> None:
        from consumer.spark.ingest import IngestConfig, run_ingest

        chapter("9. Into Spark, exactly once")
        output = self.lab.dir / "parquet"
        say("""`zkbroker spark-ingest` joins consumer group "demo-spark" as a 0.8.2 high-level consumer would: it
            registers under /consumers/demo-spark/ids, takes part in the range rebalance and owns each partition
            it is given through an ephemeral owner znode. For each one it reads from the group's committed
            offset (the group has none yet, so from the start) to the high watermark, with the zkkafka PySpark
            data source; Spark writes Parquet, the offset ranges go into a manifest published by rename (the
            commit point), and only then are the offsets committed to ZooKeeper.""")
        spark = self.spark.result(timeout=180)
        config = IngestConfig(zookeeper=cluster.zookeeper, group="demo-spark", output=output, topic=TOPIC)
        result = run_ingest(config, spark=spark)
        print(f"    {result.summary()}", flush=True)
        show("_zkkafka/1.json", ", ".join(f"p{p}: [{start}, {end})" for _, p, start, end in
                                          sorted(json.loads((output / "_zkkafka" / "1.json").read_text())["ranges"],
                                                 key=lambda r: r[1])))
        for partition in range(3):
            show(paths.consumer_offset_path("demo-spark", TOPIC, partition),
                 self.get(paths.consumer_offset_path("demo-spark", TOPIC, partition)) or "(none)")
        counts = spark.read.parquet(str(output)).groupBy("partition").count().orderBy("partition").collect()
        show("Spark, per partition", ", ".join(f"p{row['partition']}: {row['count']}" for row in counts))
        again = run_ingest(config, spark=spark)
        say(f"""The {sum(row['count'] for row in counts)} records produced and consumed earlier are in Parquet,
            each once. A second run of the job finds the group's offsets at the high watermarks and ingests
            {again.records} records; a run killed anywhere in between would have finished the committed batch from
            its manifest, or thrown away the uncommitted one, before reading on.""")

    def close(self) -> None:
        if self.quorum is not None:
            self.quorum.stop()
        for lab in self.compared:
            if lab.cluster_file.exists():
                lab.down()
        if self.spark is not None:
            try:
                self.spark.result(timeout=180).stop()
            except Exception:
                pass
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()
        if self.lab.cluster_file.exists():
            self.lab.down()


def _create_topic(bootstrap: str) -> None:
    """The same command on either design: CreateTopics through any broker."""
    subprocess.run([sys.executable, "-m", "zkbroker", "topics", "--bootstrap-server", bootstrap, "--create",
                    "--topic", COMPARE_TOPIC, "--partitions", str(COMPARE_PARTITIONS), "--replication-factor", "2"],
                   check=True, capture_output=True, timeout=90)


def _leaders(lab: LabCluster) -> dict[int, int | None]:
    """Each partition of the compared topic and its leader, as the controller last decided it (the timeline's
    leader_changed events: ZooKeeper mode's state znode writes, KRaft's committed partition records)."""
    leaders: dict[int, int | None] = {}
    for e in timeline.read(lab.timeline_file):
        if e.get("kind") == "leader_changed" and e.get("topic") == COMPARE_TOPIC:
            leaders[e["partition"]] = e["leader"] if isinstance(e.get("leader"), int) and e["leader"] >= 0 else None
    return leaders


def _zookeeper_controller(lab: LabCluster) -> int | None:
    elected = [e for e in timeline.read(lab.timeline_file) if e.get("kind") == "controller_elected"]
    return elected[-1]["broker"] if elected else None


def _timeline_lines(directory: Path) -> list[str]:
    """The events of a scenario run that tell its story: leader changes and truncations of t-0."""
    from zkbroker import timeline
    from zkbroker.lab.narration import format_line

    events = [e for e in timeline.read(timeline.path_in(directory))
              if e.get("kind") in ("truncated", "leader_changed") and e.get("topic") == "t"]
    return [format_line(e) for e in events[-3:]]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    only_why_kraft = args == ["--chapter", "12"]  # the last chapter alone (two labs, about half a minute)
    if args and not only_why_kraft:
        print("usage: python -m zkbroker.lab.demo [--chapter 12]", file=sys.stderr)
        return 2
    directory = Path(tempfile.mkdtemp(prefix="zkbroker-demo-"))
    say("zkbroker demo: ZooKeeper-era Kafka (0.8.2 design), with real processes.")
    story = Story(directory)
    try:
        if only_why_kraft:
            story.why_kraft()
            return 0
        story.run()
    except Exception as e:
        print(f"\nThe demo stopped: {e}", file=sys.stderr)
        return 1
    finally:
        story.close()
    say("\nThat is the story so far: registration, controller election, topics, the Admin API, real clients, "
        "consumer groups both ways, failover, how 0.8 lost an acknowledged write and how leader epochs keep it, "
        "exactly-once ingestion into Spark and transactions, all through ZooKeeper; and, beside it, the quorum of "
        "controllers that replaced ZooKeeper, and the same broker failure on both designs.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

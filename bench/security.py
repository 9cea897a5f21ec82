"""The cost of security (issue 28): one broker with PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners side by
side, measured in one run.

1. Produce and fetch throughput with confluent-kafka (librdkafka) over each listener: N records of 1 KiB, produced
   with acks=1 and read back with assign() from offset 0. Reference: the PLAINTEXT figures of the same run (the
   listener costs nothing more than its TLS and SASL).
2. Authentications per second: new connections that authenticate and ask Metadata, one after another, over
   SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256) and SASL_SSL (SCRAM-SHA-256). Reference: PLAINTEXT connections.
3. ACL propagation: from a CreateAcls answer to the broker's cache holding the ACL (its log line).
4. Hostile input: 1,000 failed SCRAM-SHA-256 attempts (a wrong proof) from 20 connections, and meanwhile another
   client's produce latency (one record at a time, acks=1): its p99 against its baseline measured just before.
   The attackers run in a process of their own (`--attack`), so that their threads do not hold this process's
   GIL while the victim's delivery reports wait for it, and send a random proof instead of deriving one with
   PBKDF2 (the broker's work is the same: it cannot tell until it checks the proof): the figure is the broker's
   cost, not the attacker's.
5. A user's producer_byte_rate (1 MB/s by default): librdkafka flooding for 30 s. The broker's own measure of the
   user's rate (its windowed Rate, read every 0.5 s from the broker's `state` on the lab control socket: what
   Kafka's quota_test reads from the broker's byte-rate metric) against the quota, its maximum as Kafka's test
   takes it (which allows 1.05x); beside it the rate acknowledged to the client over the run, which swings
   with the phase of the run against the windows (see BENCHMARKS.md).

Everything runs on 127.0.0.1 with a ZooKeeper of its own, stopped at the end. The machine is shared: say so when
reporting figures.

Usage: python bench/security.py [--quick] [--only hostile|quota]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kazoo.client import KazooClient  # noqa: E402

from zkbroker.lab.ports import free_port  # noqa: E402
from zkbroker.lab.tls import make_certificates  # noqa: E402
from zkbroker.lab.zookeeper import ZooKeeperServer  # noqa: E402
from zkbroker.security.scram import make_credential  # noqa: E402
from zkbroker.zk.znodes import EntityConfig  # noqa: E402

LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
USER, PASSWORD = "alice", "alice-secret"


def start_broker(workdir: Path, zk_connect: str, certs) -> tuple[subprocess.Popen, dict[str, int]]:
    ports = {name: free_port() for name in LISTENERS}
    listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items())
    props = {"broker.id": 1, "log.dirs": workdir / "data", "zookeeper.connect": zk_connect,
             "listeners": listeners, "advertised.listeners": listeners, "ssl.keystore.location": certs.broker,
             "ssl.truststore.location": certs.ca, "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
             "sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                 f'user_{USER}="{PASSWORD}" user_bob="bob-secret";',
             "authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer",
             "super.users": f"User:{USER};User:ANONYMOUS", "controlled.shutdown.enable": "false"}
    config = workdir / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    log = open(workdir / "server.log", "wb")  # noqa: SIM115 (the broker writes it until the end)
    # the lab control socket: the broker's `state` reports its quota measures (zkbroker/control_protocol.py)
    env = {**os.environ, "ZKBROKER_LAB_CONTROL": str(workdir / "control.sock")}
    proc = subprocess.Popen([sys.executable, "-m", "zkbroker", "server", str(config)], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True, env=env)
    deadline = time.monotonic() + 60
    while b"started" not in (workdir / "server.log").read_bytes():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError("the broker did not start: see " + str(workdir / "server.log"))
        time.sleep(0.1)
    return proc, ports


def client_config(listener: str, port: int, certs, mechanism: str = "SCRAM-SHA-256") -> dict:
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": listener}
    if "SSL" in listener:
        conf["ssl.ca.location"] = str(certs.ca)
    if "SASL" in listener:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": USER, "sasl.password": PASSWORD})
    return conf


def throughput(conf: dict, topic: str, n: int) -> tuple[float, float]:
    """(produce MB/s, fetch MB/s) for n records of 1 KiB."""
    import confluent_kafka as ck

    value = os.urandom(1024)
    producer = ck.Producer({**conf, "linger.ms": 5, "batch.num.messages": 10000, "acks": 1})
    producer.list_topics(topic, timeout=20)
    start = time.monotonic()
    for _ in range(n):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    produce_s = time.monotonic() - start
    consumer = ck.Consumer({**conf, "group.id": "bench", "enable.auto.commit": False,
                            "fetch.max.bytes": 52428800})
    consumer.assign([ck.TopicPartition(topic, 0, 0)])
    read, start = 0, time.monotonic()
    while read < n:
        batch = consumer.consume(10000, 5.0)
        read += sum(1 for m in batch if m.error() is None)
        if time.monotonic() - start > 300:
            raise RuntimeError(f"read {read} of {n}")
    fetch_s = time.monotonic() - start
    consumer.close()
    mb = n * 1024 / 1e6
    return mb / produce_s, mb / fetch_s


def authentications_per_second(conf: dict, count: int) -> float:
    import confluent_kafka as ck

    start = time.monotonic()
    for _ in range(count):
        producer = ck.Producer(conf)
        producer.list_topics(timeout=20)
        del producer
    return count / (time.monotonic() - start)


def acl_propagation(ports, certs, log_path: Path, rounds: int) -> float:
    """Median seconds from a CreateAcls answer to the broker's cache holding the ACL (its `Processing ACL change`
    log line: the ACL is in force from then on). Same machine, one wall clock."""
    from datetime import datetime

    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType
    from confluent_kafka.admin import ResourceType as CkResourceType

    admin = AdminClient(client_config("SASL_PLAINTEXT", ports["SASL_PLAINTEXT"], certs, "PLAIN"))
    times = []
    for i in range(rounds):
        topic = f"acl-{i}"
        binding = AclBinding(CkResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:bob", "*",
                             AclOperation.WRITE, AclPermissionType.ALLOW)
        list(admin.create_acls([binding]).values())[0].result(30)
        answered = time.time()
        marker = f"Processing ACL change for Topic:LITERAL:{topic}:"
        deadline = time.monotonic() + 30
        while True:
            lines = [line for line in log_path.read_text().splitlines() if marker in line]
            if lines:
                stamp = datetime.strptime(lines[0][1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                times.append(max(stamp - answered, 0.0))
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the ACL on {topic} never reached the broker's cache")
            time.sleep(0.01)
    times.sort()
    return times[len(times) // 2]


def produce_latencies(conf: dict, topic: str, seconds: float) -> list[float]:
    """One record at a time, acks=1: each one's time from produce to its delivery report."""
    import confluent_kafka as ck

    producer = ck.Producer({**conf, "linger.ms": 0, "acks": 1})
    producer.list_topics(topic, timeout=20)
    latencies: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sent = time.monotonic()
        producer.produce(topic, b"p" * 100, on_delivery=lambda err, msg, sent=sent: latencies.append(
            time.monotonic() - sent))
        producer.flush(10)
    return latencies


def failed_scram_attempts(port: int, attempts: int, connections: int) -> tuple[int, float]:
    """`attempts` SCRAM-SHA-256 exchanges with a wrong proof over `connections` threads; (refused, seconds). Run
    in the attackers' own process (`--attack`)."""
    import base64
    import threading

    from zkbroker.client.connection import BrokerConnection
    from zkbroker.client.security import AuthenticationError
    from zkbroker.protocol.api import ApiKey

    refused = [0] * connections

    def one_attempt() -> bool:
        """SaslHandshake, client-first, then a client-final whose proof is random bytes; True if refused."""
        with BrokerConnection("127.0.0.1", port, "attacker", 10.0) as conn:
            conn.send(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})
            nonce = base64.b64encode(os.urandom(18)).decode()
            first = conn.send(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": f"n,,n={USER},r={nonce}".encode()})
            server_nonce = dict(f.split("=", 1) for f in first.auth_bytes.decode().split(","))["r"]
            proof = base64.b64encode(os.urandom(32)).decode()
            final = conn.send(ApiKey.SASL_AUTHENTICATE, 1,
                              {"auth_bytes": f"c=biws,r={server_nonce},p={proof}".encode()})
            return final.error_code != 0

    def attack(i: int) -> None:
        for _ in range(attempts // connections):
            try:
                refused[i] += one_attempt()
            except (AuthenticationError, OSError, KeyError, ValueError):
                pass

    start = time.monotonic()
    threads = [threading.Thread(target=attack, args=(i,)) for i in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(refused), time.monotonic() - start


def cpu_seconds(pid: int) -> float:
    """A process's CPU time so far (user and system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def quota(ports, certs, zk: KazooClient, rate: int, seconds: float, control: Path, client_id: str,
          client_overrides: dict) -> tuple[float, float, float]:
    """For a client of the user flooding at its producer_byte_rate (a quota on the user and that client id, so
    that each run has its own measure): (the broker's measured rate, its maximum over the run; its mean; the
    rate acknowledged to the client over the run)."""
    import confluent_kafka as ck

    from zkbroker.lab.control_client import ControlClient

    path = f"/config/users/{USER}/clients/{client_id}"
    zk.create(path, EntityConfig({"producer_byte_rate": str(rate)}).encode(), makepath=True)
    zk.create("/config/changes/config_change_", b'{"version":2,"entity_path":"users/%s/clients/%s"}' % (
        USER.encode(), client_id.encode()), sequence=True)
    time.sleep(1.0)
    acked: list[float] = []
    producer = ck.Producer({**client_config("SASL_PLAINTEXT", ports["SASL_PLAINTEXT"], certs, "PLAIN"),
                            "client.id": client_id, "linger.ms": 5, "queue.buffering.max.kbytes": 1024,
                            **client_overrides})
    value = b"q" * 10_000
    measured: list[float] = []
    start = next_read = time.monotonic()
    with ControlClient(control) as broker:
        while time.monotonic() - start < seconds:
            try:
                producer.produce("metered", value, on_delivery=lambda err, msg: acked.append(time.monotonic()))
            except BufferError:
                pass
            producer.poll(0.005)
            if time.monotonic() >= next_read:
                next_read += 0.5
                measured += [row["rate"] for row in broker.state()["quotas"]
                             if row["quota"] == "producer_byte_rate" and row["client_id"] == client_id]
    end = time.monotonic()
    producer.flush(30)
    acked_rate = sum(1 for t in acked if t <= end) * len(value) / (end - start)
    return max(measured), sum(measured) / len(measured), acked_rate


def attack_main(port: int, attempts: int, connections: int) -> int:
    refused, took = failed_scram_attempts(port, attempts, connections)
    print(f"{refused} {took} {time.process_time()}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer records, a 10 s quota run")
    parser.add_argument("--quota", type=int, default=1_000_000, help="producer_byte_rate in bytes/s")
    parser.add_argument("--only", choices=("hostile", "quota"), help="only this part (after the broker starts)")
    parser.add_argument("--attack", nargs=3, type=int, metavar=("PORT", "ATTEMPTS", "CONNECTIONS"),
                        help=argparse.SUPPRESS)  # the attackers' own process
    args = parser.parse_args()
    if args.attack:
        return attack_main(*args.attack)
    n = 20_000 if args.quick else 200_000
    workdir = Path(tempfile.mkdtemp(prefix="zkbroker-bench-security-"))
    zookeeper = ZooKeeperServer(tick_time_ms=200, data_dir=workdir / "zookeeper")
    proc = None
    try:
        zookeeper.start()
        certs = make_certificates(workdir / "tls")
        zk = KazooClient(zookeeper.connect_string)
        zk.start(timeout=30)
        zk.ensure_path("/config/users")
        zk.create(f"/config/users/{USER}", EntityConfig({m: str(make_credential(m, PASSWORD)) for m in (
            "SCRAM-SHA-256", "SCRAM-SHA-512")}).encode())
        proc, ports = start_broker(workdir, zookeeper.connect_string, certs)
        import confluent_kafka as ck
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient(client_config("PLAINTEXT", ports["PLAINTEXT"], certs))
        for topic in [f"t-{name.lower()}" for name in LISTENERS] + ["metered"]:
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        version = ck.version() if isinstance(ck.version(), str) else ck.version()[0]
        print(f"bench/security.py: {n} records of 1 KiB per listener; confluent-kafka {version} "
              f"(librdkafka {ck.libversion()[0]})")
        if args.only is None:
            print(f"{'listener':<16}{'produce MB/s':>14}{'fetch MB/s':>12}")
            for name in LISTENERS:
                produce, fetch = throughput(client_config(name, ports[name], certs), f"t-{name.lower()}", n)
                print(f"{name:<16}{produce:>14.1f}{fetch:>12.1f}")
            count = 30 if args.quick else 100
            print(f"authentications per second ({count} connections, each then asks Metadata):")
            for name, mechanism in (("PLAINTEXT", ""), ("SASL_PLAINTEXT", "PLAIN"),
                                    ("SASL_PLAINTEXT", "SCRAM-SHA-256"), ("SASL_SSL", "SCRAM-SHA-256")):
                rate = authentications_per_second(client_config(name, ports[name], certs, mechanism), count)
                print(f"  {name:<16}{mechanism or '(none)':<16}{rate:>8.1f}/s")
            median = acl_propagation(ports, certs, workdir / "server.log", 3 if args.quick else 10)
            print(f"ACL in the broker's cache after the CreateAcls answer (median): {median * 1000:.0f} ms")
        if args.only in (None, "hostile"):
            victim = client_config("SASL_PLAINTEXT", ports["SASL_PLAINTEXT"], certs, "PLAIN")
            baseline = produce_latencies(victim, "t-plaintext", 5 if args.quick else 10)
            attempts = 200 if args.quick else 1000
            broker_cpu = cpu_seconds(proc.pid)
            attackers = subprocess.Popen([sys.executable, __file__, "--attack", str(ports["SASL_PLAINTEXT"]),
                                          str(attempts), "20"], stdout=subprocess.PIPE, text=True)
            during: list[float] = []
            while attackers.poll() is None:
                during += produce_latencies(victim, "t-plaintext", 1.0)
            refused, took, attacker_cpu = attackers.communicate(timeout=60)[0].split()
            broker_cpu = cpu_seconds(proc.pid) - broker_cpu
            print(f"{refused} of {attempts} failed SCRAM attempts from 20 connections refused in {float(took):.1f} s; "
                  f"another client's produce p99 {p99(during) * 1000:.1f} ms ({len(during)} records) against its "
                  f"baseline {p99(baseline) * 1000:.1f} ms in the same run ({p99(during) / p99(baseline):.2f}x; "
                  f"target 2x); CPU: the broker {broker_cpu:.1f} s (the victim's requests included), the attackers "
                  f"{float(attacker_cpu):.1f} s")
        if args.only in (None, "quota"):
            seconds = 10 if args.quick else 30
            # librdkafka's own batching (batch.size 1 MB: a request of up to 1 MB after each mute), then the Java
            # producer's batch.size of 16 KiB, which Kafka's quota_test runs with
            for client_id, overrides in (("flood-1mb-batches", {}), ("flood-16k-batches", {"batch.size": 16384})):
                peak, mean, acked = quota(ports, certs, zk, args.quota, seconds, workdir / "control.sock", client_id,
                                          overrides)
                print(f"producer_byte_rate {args.quota} B/s, librdkafka ({client_id}) flooding for {seconds} s: the "
                      f"broker's measured rate at most {peak / args.quota:.3f}x (Kafka's quota test allows 1.05x), "
                      f"mean {mean / args.quota:.3f}x; acknowledged to the client over the run "
                      f"{acked / args.quota:.3f}x")
        zk.stop()
        return 0
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        zookeeper.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""Unmodified kafka-python, confluent-kafka and kcat against real zkbroker processes (issue 3's acceptance).

Topics are created the real way: `zkbroker.admin.create_topic` writes the znodes and the controller elects
the leaders. Each round trip sends 100,000 keyed records in four batches of 25,000 (uncompressed, gzip,
snappy, lz4), reads them back with assign() from offset 0, and checks every record byte for byte, in send
order within its partition, at the offset the producer was acknowledged with. The fault tests talk to the
broker through zkbroker's own BrokerConnection where a client would never send what we need (a flipped CRC
byte, a frame of garbage).
"""

from __future__ import annotations

import base64
import json
import random
import re
import socket
import struct
import subprocess
import threading
import time
import uuid

import pytest

from tests.integration.clients import PYTHON_CLIENTS, ZOOKEEPER_OFFSETS_CLIENT, ClientConfig, Received
from tests.integration.harness import Broker, create_topic, list_offset, wait_for, wait_for_leaders, wait_for_retention
from tests.real_tools import require
from zkbroker.protocol.message_set import build_message_set, iter_entries, iter_messages

pytestmark = pytest.mark.integration

N_RECORDS = 100_000
CODECS = ("none", "gzip", "snappy", "lz4")
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}
EARLIEST, LATEST = -2, -1

# Kafka error codes the broker must answer.
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
NOT_LEADER_FOR_PARTITION = 6
MESSAGE_TOO_LARGE = 10


# ---- records and checks --------------------------------------------------------------------------------------


def keyed_records(n: int, seed: int, text: bool = False) -> list[tuple[bytes, bytes | None]]:
    """n records with unique keys; values are binary (or, for kcat's line format, base64 text), of varied
    length, compressible enough that every codec's batches stay compressed. Python clients also get a few
    null and empty values, which must come back as null and empty."""
    rng = random.Random(seed)
    out: list[tuple[bytes, bytes | None]] = []
    for i in range(n):
        noise = rng.randbytes(rng.randrange(0, 48))
        filler = (b"zkbroker-%d|" % i) * rng.randrange(0, 8)
        if text:
            value = b"v%06d-" % i + base64.b64encode(noise) + filler
        elif i % 10007 == 5:
            value = None
        elif i % 10009 == 6:
            value = b""
        else:
            value = struct.pack(">I", i) + noise + filler
        out.append((b"key-%06d" % i, value))
    return out


def assert_read_back(sent: list[tuple[bytes, bytes | None]], received: list[Received],
                     acked: list[tuple[int, int]] | None = None) -> None:
    """Every sent record came back exactly once, byte for byte; within each partition the records arrive at
    offsets 0, 1, 2, ... in the order they were sent; and each sits where its acknowledgement said."""
    index = {key: i for i, (key, _) in enumerate(sent)}
    seen: set[int] = set()
    last_index: dict[int, int] = {}
    next_offset: dict[int, int] = {}
    problems: list[str] = []
    for r in received:
        i = index.get(r.key)
        if i is None:
            problems.append(f"unknown key {r.key!r} at {r.partition}/{r.offset}")
            continue
        if i in seen:
            problems.append(f"record {i} read twice (again at {r.partition}/{r.offset})")
        seen.add(i)
        if r.value != sent[i][1]:
            problems.append(f"record {i} at {r.partition}/{r.offset}: value {r.value!r:.60} != {sent[i][1]!r:.60}")
        expected = next_offset.get(r.partition, 0)
        if r.offset != expected:
            problems.append(f"partition {r.partition}: offset {r.offset} where {expected} was next")
        next_offset[r.partition] = r.offset + 1
        if i < last_index.get(r.partition, -1):
            problems.append(f"partition {r.partition}: record {i} after record {last_index[r.partition]}")
        last_index[r.partition] = i
        if acked is not None and acked[i] != (r.partition, r.offset):
            problems.append(f"record {i} acknowledged at {acked[i]} but read at {(r.partition, r.offset)}")
        if len(problems) > 5:
            break
    missing = len(sent) - len(seen)
    assert not problems and not missing, f"{missing} records missing; {problems[:6]}"


def codecs_in_log(broker: Broker, topic: str, partitions: int) -> set[str]:
    """The compression codecs of the message sets stored in the partition logs (shallow entries)."""
    names = {v: k for k, v in CODEC_IDS.items()}
    found = set()
    for p in range(partitions):
        for segment in broker.segment_files(topic, p):
            found |= {names[e.attributes & 7] for e in iter_entries(segment.read_bytes())}
    return found


def new_topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def kcat_read_all(kcat: str, bootstrap: str, topic: str) -> list[Received]:
    """Every record of every partition, read with kcat: -o beginning on every partition is kcat's assign()
    from offset 0; -e stops at the end (the high watermark) of each."""
    done = subprocess.run([kcat, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
                           "-f", "%p\t%o\t%k\t%s\n"], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    received = []
    for line in done.stdout.splitlines():
        p, o, k, v = line.split(b"\t")
        received.append(Received(int(p), int(o), k, v))
    return received


def round_trip(client: ClientConfig, broker: Broker, topic: str, records) -> None:
    quarter = len(records) // len(CODECS)
    acked: list[tuple[int, int]] = []
    started = time.monotonic()
    for n, codec in enumerate(CODECS):
        batch = records[n * quarter:(n + 1) * quarter] if n < len(CODECS) - 1 else records[n * quarter:]
        acked += client.produce(broker.bootstrap, topic, batch, compression=codec, timeout_s=90)
    produced = time.monotonic()
    received = client.consume(broker.bootstrap, topic, {0: 0, 1: 0, 2: 0}, len(records), timeout_s=90)
    done = time.monotonic()
    print(f"{client}: produced {len(records)} records in {produced - started:.1f} s, "
          f"read them back in {done - produced:.1f} s")
    assert_read_back(records, received, acked)
    assert codecs_in_log(broker, topic, 3) == set(CODECS)


# ---- real clients: 100,000 keyed records each -----------------------------------------------------------------


@pytest.mark.timeout(240)
@pytest.mark.parametrize("client", PYTHON_CLIENTS, ids=str)
def test_client_round_trips_100k_keyed_records_with_every_codec_byte_for_byte(client, brokers, zk_connect):
    (broker,) = brokers(1)
    topic = new_topic()
    create_topic(zk_connect, topic, 3, 1, [broker])
    round_trip(client, broker, topic, keyed_records(N_RECORDS, seed=1))


@pytest.mark.timeout(120)
def test_kcat_round_trips_100k_keyed_records_with_every_codec_byte_for_byte(brokers, zk_connect):
    kcat = require("kcat")
    (broker,) = brokers(1)
    topic = new_topic()
    create_topic(zk_connect, topic, 3, 1, [broker])
    records = keyed_records(N_RECORDS, seed=7, text=True)
    quarter = N_RECORDS // len(CODECS)
    for n, codec in enumerate(CODECS):
        lines = b"".join(k + b"\t" + v + b"\n" for k, v in records[n * quarter:(n + 1) * quarter])
        done = subprocess.run([kcat, "-P", "-b", broker.bootstrap, "-t", topic, "-K", "\t", "-z", codec,
                               "-X", "acks=1", "-X", "linger.ms=5"],
                              input=lines, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert_read_back(records, kcat_read_all(kcat, broker.bootstrap, topic))
    assert codecs_in_log(broker, topic, 3) == set(CODECS)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("client", PYTHON_CLIENTS, ids=str)
def test_producing_to_an_unknown_topic_auto_creates_it_and_every_record_arrives(client, brokers, zk):
    (broker,) = brokers(1, num_partitions=3)
    wait_for(lambda: zk.registered() == {1}, 15, "broker 1 to register")
    topic = new_topic("auto")
    records = keyed_records(1_000, seed=5)
    acked = client.produce(broker.bootstrap, topic, records, timeout_s=30)  # waits out LEADER_NOT_AVAILABLE
    assert json.loads(zk.get(f"/brokers/topics/{topic}")) == {"version": 1, "partitions": {
        "0": [1], "1": [1], "2": [1]}}
    received = client.consume(broker.bootstrap, topic, {0: 0, 1: 0, 2: 0}, len(records), timeout_s=30)
    assert_read_back(records, received, acked)


# ---- consumer offsets: v0 in ZooKeeper, v1 and later in __consumer_offsets (0.8.2's rule) ---------------------


@pytest.mark.timeout(90)
@pytest.mark.parametrize("client", [*PYTHON_CLIENTS, ZOOKEEPER_OFFSETS_CLIENT], ids=str)
def test_client_commits_land_where_their_version_says_and_a_new_consumer_resumes_from_them(client, brokers,
                                                                                            zk_connect, zk):
    (broker,) = brokers(1)
    topic = new_topic()
    create_topic(zk_connect, topic, 3, 1, [broker])
    records = keyed_records(300, seed=3)
    acked = client.produce(broker.bootstrap, topic, records, timeout_s=30)
    ends = {p: 1 + max(o for q, o in acked if q == p) for p in range(3)}
    assert all(end >= 10 for end in ends.values()), ends
    commits = {p: end // 2 + p for p, end in ends.items()}
    group = f"group-{uuid.uuid4().hex[:6]}"

    client.commit(broker.bootstrap, group, topic, commits)

    in_zookeeper = client is ZOOKEEPER_OFFSETS_CLIENT  # OffsetCommit v0; the others send v1 or v2
    for p, offset in commits.items():  # 0.8.2's layout: the decimal string of the next offset to read
        assert zk.get(f"/consumers/{group}/offsets/{topic}/{p}") == (str(offset).encode() if in_zookeeper else None)
    assert client.committed(broker.bootstrap, group, topic, [0, 1, 2]) == commits
    # A new consumer of the group, assigned without an offset, starts where the group committed (with
    # auto.offset.reset=latest, so a lost commit would show as nothing read rather than a lucky start at 0).
    received = client.consume(broker.bootstrap, topic, {p: None for p in range(3)},
                              sum(ends[p] - commits[p] for p in range(3)), timeout_s=30, group=group,
                              reset="latest")
    firsts = {}
    for r in received:
        firsts.setdefault(r.partition, r.offset)
    assert firsts == commits


def test_commits_from_both_python_clients_share_the_offsets_topic_and_v0_keeps_zookeeper_apart(
        brokers, zk_connect, zk):
    """A group committed by kafka-python (OffsetCommit v2) is read back by confluent-kafka legacy
    (OffsetFetch v1) and the other way round: one store for v1 and later, `__consumer_offsets`. A v0 commit of
    the same group goes to ZooKeeper and is read back by v0 only, as with 0.8.2's two storages."""
    (broker,) = brokers(1)
    topic = new_topic()
    create_topic(zk_connect, topic, 1, 1, [broker])
    kafka_python, _, confluent, confluent_legacy = PYTHON_CLIENTS
    group = f"group-{uuid.uuid4().hex[:6]}"
    kafka_python.commit(broker.bootstrap, group, topic, {0: 42})
    assert confluent_legacy.committed(broker.bootstrap, group, topic, [0]) == {0: 42}
    confluent.commit(broker.bootstrap, group, topic, {0: 7})
    assert kafka_python.committed(broker.bootstrap, group, topic, [0]) == {0: 7}
    assert zk.get(f"/consumers/{group}/offsets/{topic}/0") is None
    ZOOKEEPER_OFFSETS_CLIENT.commit(broker.bootstrap, group, topic, {0: 99})
    assert zk.get(f"/consumers/{group}/offsets/{topic}/0") == b"99"
    assert ZOOKEEPER_OFFSETS_CLIENT.committed(broker.bootstrap, group, topic, [0]) == {0: 99}
    assert confluent.committed(broker.bootstrap, group, topic, [0]) == {0: 7}


# ---- crash and recovery ---------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_sigkill_during_produce_stream_recovers_every_acknowledged_record_and_continues_without_gaps(
        brokers, zk_connect):
    from confluent_kafka import Producer

    (broker,) = brokers(1)
    topic = new_topic()
    create_topic(zk_connect, topic, 1, 1, [broker])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 2,
                         "message.timeout.ms": 3000, "reconnect.backoff.max.ms": 100})
    acked: dict[int, bytes] = {}

    def delivered(err, msg):
        if err is None:
            acked[msg.offset()] = msg.value()

    deadline = time.monotonic() + 60
    killed_at = None
    i = 0
    while time.monotonic() < deadline and (killed_at is None or i < killed_at + 5_000):
        try:
            producer.produce(topic, value=b"stream-%d-" % i + bytes(range(i % 90)),
                             key=b"%d" % i, on_delivery=delivered)
            i += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
        if killed_at is None and len(acked) >= 20_000:
            broker.kill()  # SIGKILL in the middle of the stream: requests in flight, more queued behind them
            killed_at = i
    assert killed_at is not None, f"only {len(acked)} records acknowledged before the deadline"
    producer.flush(10)  # the rest time out against the dead broker; they were never acknowledged
    acked_before = dict(acked)
    assert len(acked_before) < i, "every record was acknowledged: the kill did not interrupt the stream"

    # A crash in the middle of a write leaves a torn entry at the end of the active segment. SIGKILL after
    # write() returned cannot tear the page cache, so we leave the torn tail the crash could have left.
    # (SIGKILL can also cut a write() short, so the kill may have torn an entry itself: then recovery cuts
    # there, before our tail.)
    active = broker.segment_files(topic, 0)[-1]
    killed_size = active.stat().st_size
    with open(active, "ab") as f:
        f.write(struct.pack(">qi", 10**9, 500) + b"torn" * 20)
    log_mark = len(broker.log())

    broker.start()
    wait_for_leaders([broker], topic, 1, 30)
    after = broker.log()[log_mark:]
    assert "Recovering unflushed segment" in after, after[-3000:]
    cut = re.search(r"Found invalid messages in log segment \S+ at byte offset (\d+)", after)
    assert cut is not None and int(cut.group(1)) <= killed_size, after[-3000:]
    assert active.stat().st_size == int(cut.group(1))  # truncated there

    error, end = list_offset(broker, topic, 0, LATEST)
    assert error == 0 and end >= max(acked_before) + 1
    received = PYTHON_CLIENTS[2].consume(broker.bootstrap, topic, {0: 0}, end, timeout_s=30)
    assert [r.offset for r in received[:end]] == list(range(end))  # no gap, nothing torn left behind
    by_offset = {r.offset: r.value for r in received}
    wrong = [o for o, v in acked_before.items() if by_offset.get(o) != v]
    assert not wrong, f"{len(wrong)} acknowledged records lost or changed, first at offsets {sorted(wrong)[:5]}"

    more = keyed_records(100, seed=12)
    acked_after = PYTHON_CLIENTS[2].produce(broker.bootstrap, topic, more, timeout_s=30)
    assert [o for _, o in acked_after] == list(range(end, end + 100))


# ---- error codes and the clients' reactions ----------------------------------------------------------------


def produce_raw(broker: Broker, topic: str, partition: int, message_set: bytes, version: int = 2,
                conn=None) -> tuple[int, int]:
    """(error code, base offset) of a hand-built Produce (acks=1) through zkbroker's BrokerConnection;
    version 2 is what both clients send by default, 0 what their legacy configurations send."""
    body = {"acks": 1, "timeout_ms": 10000,
            "topics": [{"topic": topic, "partitions": [{"partition": partition, "records": message_set}]}]}
    if conn is None:
        with broker.connection() as conn:
            response = conn.send(0, version, body)
    else:
        response = conn.send(0, version, body)
    row = response.topics[0].partitions[0]
    return row.error_code, row.base_offset


def fetch_raw(broker: Broker, topic: str, partition: int, offset: int) -> tuple[int, int, bytes]:
    """(error code, high watermark, message set) of a consumer's Fetch v0."""
    with broker.connection() as conn:
        response = conn.send(1, 0, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [
            {"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                             "max_bytes": 1024 * 1024}]}]})
    row = response.topics[0].partitions[0]
    return row.error_code, row.high_watermark, bytes(row.records or b"")


@pytest.mark.timeout(120)
def test_fetch_beyond_log_end_answers_offset_out_of_range_and_every_client_resets(brokers, zk_connect):
    (broker,) = brokers(1)
    topic = new_topic()
    create_topic(zk_connect, topic, 1, 1, [broker])
    records = [(b"k%d" % i, b"value-%d" % i) for i in range(10)]
    assert produce_raw(broker, topic, 0, build_message_set(records)) == (0, 0)

    assert fetch_raw(broker, topic, 0, 1000)[0] == OFFSET_OUT_OF_RANGE
    assert fetch_raw(broker, topic, 0, 11)[0] == OFFSET_OUT_OF_RANGE
    assert fetch_raw(broker, topic, 0, 10)[:2] == (0, 10)  # the log end itself is a valid (empty) position

    for client in PYTHON_CLIENTS:  # auto.offset.reset=earliest: back to offset 0
        received = client.consume(broker.bootstrap, topic, {0: 1000}, 10, timeout_s=30)
        assert [(r.offset, r.key, r.value) for r in received[:10]] == [
            (i, k, v) for i, (k, v) in enumerate(records)], client


@pytest.mark.timeout(60)
def test_produce_to_a_follower_answers_not_leader_for_partition(brokers, zk_connect, zk):
    b1, b2 = brokers(1, 2)
    wait_for(lambda: zk.registered() == {1, 2}, 15, "both brokers to register")
    topic = new_topic()
    leaders = create_topic(zk_connect, topic, 2, 2, [b1, b2])
    by_id = {1: b1, 2: b2}
    message_set = build_message_set([(b"k", b"v")])
    for partition, leader in leaders.items():
        follower = by_id[3 - leader]
        # The follower learns of the partition from its own LeaderAndIsr, which may come a moment later.
        answers = [produce_raw(follower, topic, partition, message_set)[0]]
        deadline = time.monotonic() + 10
        while answers[-1] != NOT_LEADER_FOR_PARTITION and time.monotonic() < deadline:
            time.sleep(0.05)
            answers.append(produce_raw(follower, topic, partition, message_set)[0])
        assert answers[-1] == NOT_LEADER_FOR_PARTITION, f"broker {follower.id} answered {set(answers)}"
        assert fetch_raw(follower, topic, partition, 0)[0] == NOT_LEADER_FOR_PARTITION
        assert produce_raw(by_id[leader], topic, partition, message_set) == (0, 0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("magic", "codec"), [(0, 0), (1, 0), (0, 1), (1, 1)],
                         ids=["magic0", "magic1", "magic0-gzip", "magic1-gzip"])
def test_corrupted_crc_answers_corrupt_message_and_writes_nothing(magic, codec, brokers, zk_connect):
    (broker,) = brokers(1)
    topic = new_topic()
    create_topic(zk_connect, topic, 1, 1, [broker])
    with broker.connection() as conn:
        version = 2 if magic else 0  # as the clients: magic 1 in Produce v2, magic 0 in v0 (legacy)
        good = build_message_set([(b"k%d" % i, b"good-%d" % i) for i in range(5)], magic=magic)
        assert produce_raw(broker, topic, 0, good, version=version, conn=conn) == (0, 0)
        size_before = sum(f.stat().st_size for f in broker.segment_files(topic, 0))

        bad = bytearray(build_message_set([(b"a", b"first is fine"), (b"b", b"second is fine"),
                                           (b"c", b"the last byte of this value flips")], magic=magic,
                                          codec=codec))
        bad[-1] ^= 0x01  # the last byte of the last value (or of the wrapper's compressed value), under its CRC
        error, _ = produce_raw(broker, topic, 0, bytes(bad), version=version, conn=conn)
        assert error == CORRUPT_MESSAGE

        # Nothing was written and no offset was used: the next good set lands at offset 5, on the same
        # connection (an error code, not a protocol violation, so the connection stays open).
        assert sum(f.stat().st_size for f in broker.segment_files(topic, 0)) == size_before
        assert list_offset(broker, topic, 0, LATEST) == (0, 5)
        assert produce_raw(broker, topic, 0, good, version=version, conn=conn) == (0, 5)
    error, hw, data = fetch_raw(broker, topic, 0, 0)
    assert (error, hw) == (0, 10)
    assert [m.value for m in iter_messages(data)] == [b"good-%d" % i for i in range(5)] * 2


@pytest.mark.timeout(60)
def test_message_over_message_max_bytes_answers_message_too_large(brokers, zk_connect):
    from confluent_kafka import KafkaError, Producer
    from kafka import KafkaProducer
    from kafka.errors import MessageSizeTooLargeError

    (broker,) = brokers(1, message_max_bytes=10_000)
    topic = new_topic()
    create_topic(zk_connect, topic, 1, 1, [broker])
    # message.max.bytes bounds the log entry: 12 bytes of offset and size, then a magic-0 message of 14
    # bytes plus its value (null key): a 9,974-byte value fills it exactly.
    assert produce_raw(broker, topic, 0, build_message_set([(None, b"x" * 9_974)])) == (0, 0)
    assert produce_raw(broker, topic, 0, build_message_set([(None, b"x" * 9_975)]))[0] == MESSAGE_TOO_LARGE
    assert list_offset(broker, topic, 0, LATEST) == (0, 1)

    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "message.timeout.ms": 10000})
    producer.produce(topic, value=b"y" * 20_000, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(15) == 0
    assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]

    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, retries=0, max_block_ms=10000,
                       request_timeout_ms=10000)
    try:
        future = kp.send(topic, value=b"z" * 20_000)
        with pytest.raises(MessageSizeTooLargeError):
            future.get(timeout=15)
    finally:
        kp.close(timeout=5)
    assert list_offset(broker, topic, 0, LATEST) == (0, 1)


class BackgroundProducer:
    """A confluent-kafka producer that keeps producing on its own thread until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                                  "message.timeout.ms": 10000})
        self.topic = topic
        self.acked = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked += 1
        else:
            self.errors.append(str(err))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, key=b"bg-%d" % i, value=b"background %d" % i,
                                      on_delivery=self._delivered)
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.001)

    def __enter__(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.flush(15)

    def wait_for_more(self, timeout_s: float = 10.0) -> None:
        start = self.acked
        wait_for(lambda: self.acked >= start + 100, timeout_s, "the background producer to keep producing")


def closed_by_broker(sock: socket.socket, timeout_s: float = 10.0) -> bool:
    """True when the broker closes the connection (EOF or reset) within the timeout, sending nothing."""
    sock.settimeout(timeout_s)
    try:
        return sock.recv(4096) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def header(api_key: int, api_version: int, correlation_id: int = 1, client_id: bytes = b"evil") -> bytes:
    return struct.pack(">hhih", api_key, api_version, correlation_id, len(client_id)) + client_id


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


BAD_FRAMES = {
    # bytes that are not Kafka at all: "GET " read as a size is 1.2 GB, far over socket.request.max.bytes
    "http-request": b"GET / HTTP/1.1\r\nHost: broker\r\n\r\n",
    "garbage-body": frame(header(3, 0) + b"\x7f\xff\xff\xff" + bytes(range(64))),  # Metadata, 2^31-1 topics
    "truncated-header": frame(b"\x00\x03\x00"),
    "truncated-produce": frame(header(0, 0) + struct.pack(">hii", 1, 1000, 1) + b"\x00\x05top"),
    "oversized": struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 1024,
    "negative-size": struct.pack(">i", -5) + b"\x00" * 16,
}


@pytest.mark.timeout(90)
@pytest.mark.parametrize("bad", list(BAD_FRAMES), ids=str)
def test_bad_frame_closes_only_its_connection_while_others_keep_producing(bad, brokers, zk_connect):
    (broker,) = brokers(1, socket_request_max_bytes=1024 * 1024)
    topic = new_topic()
    create_topic(zk_connect, topic, 1, 1, [broker])
    with broker.connection() as bystander, BackgroundProducer(broker.bootstrap, topic) as background:
        background.wait_for_more()
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            sock.sendall(BAD_FRAMES[bad])
            assert closed_by_broker(sock), f"the broker kept the connection open after {bad}"
        background.wait_for_more()
        assert bystander.send(3, 0, {"topics": [topic]}).topics[0].error_code == 0
    assert not background.errors, background.errors[:3]
    assert broker.alive()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("api_key", "api_version"), [(99, 0), (-1, 0), (0, 99)],
                         ids=["unknown-key-99", "negative-key", "produce-v99"])
def test_unknown_api_key_closes_that_connection_only(api_key, api_version, brokers, zk_connect):
    (broker,) = brokers(1)
    topic = new_topic()
    create_topic(zk_connect, topic, 1, 1, [broker])
    with broker.connection() as bystander, BackgroundProducer(broker.bootstrap, topic) as background:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            sock.sendall(frame(header(api_key, api_version) + b"\x00" * 16))
            assert closed_by_broker(sock)
        background.wait_for_more()
        assert bystander.send(3, 0, {"topics": [topic]}).topics[0].error_code == 0
    assert not background.errors, background.errors[:3]


# ---- retention and roll -------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_retention_deletes_old_segments_moves_log_start_and_consumers_from_it_recover(brokers, zk_connect):
    segment_bytes, retention_bytes = 50_000, 120_000
    (broker,) = brokers(1, log_segment_bytes=segment_bytes, log_retention_bytes=retention_bytes,
                        log_retention_check_interval_ms=200)
    topic = new_topic()
    create_topic(zk_connect, topic, 1, 1, [broker])
    records = keyed_records(5_000, seed=21)  # about 450 KB on disk: nine segments of 50 KB
    # Sets of 50 records: a producer's 1 MB batch would be refused whole, larger than a segment
    # (RECORD_LIST_TOO_LARGE, as 0.8.2's MessageSetSizeTooLargeException).
    with broker.connection() as conn:
        for first in range(0, len(records), 50):
            message_set = build_message_set(records[first:first + 50], magic=1)
            assert produce_raw(broker, topic, 0, message_set, conn=conn) == (0, first)

    start = wait_for_retention(broker, topic, 0, retention_bytes)
    segments = broker.segment_files(topic, 0)
    assert len(segments) >= 2, segments  # rolled on size; the active segment is never deleted
    assert all(len(f.stem) == 20 and f.stem.isdigit() for f in segments)
    assert all(f.stat().st_size <= segment_bytes for f in segments)
    assert int(segments[0].stem) == start
    # deleted with their segments (renamed .deleted just after the .log file)
    wait_for(lambda: [f.stem for f in sorted(broker.partition_dir(topic, 0).glob("*.index"))]
             == [f.stem for f in segments], 5, "the deleted segments' indexes to go with them")

    assert fetch_raw(broker, topic, 0, 0)[0] == OFFSET_OUT_OF_RANGE
    for client in PYTHON_CLIENTS:  # from offset 0, gone: OFFSET_OUT_OF_RANGE, reset to the new earliest
        received = client.consume(broker.bootstrap, topic, {0: 0}, 5_000 - start, timeout_s=30)
        assert received[0].offset == start, client
        assert_read_back(records[start:], [r._replace(offset=r.offset - start) for r in received])


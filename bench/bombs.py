"""Decompression bombs against one broker: its peak resident memory, and a well-behaved producer's throughput
beside them, printed beside their targets.

8 client threads each send, in a loop for a minute, a Produce v0 (acks=1) of one gzip magic-0 wrapper of
~390 KB that inflates to one 400 MB message -- the bomb of issue 15 -- while a confluent-kafka producer
(100-byte values, acks=1) writes to another topic. Each bomb must be answered MESSAGE_TOO_LARGE (the broker
stops inflating at its bound, 16 x message.max.bytes), and the broker's peak RSS (VmHWM, /proc) must stay
<= 200 MB. The producer's throughput is measured alone first, then beside the bombs.

Everything runs on 127.0.0.1: a ZooKeeper of its own and a one-broker lab cluster, stopped at the end.

Usage: python bench/bombs.py [--seconds 60] [--clients 8]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.bombs import gzip_bomb  # noqa: E402
from zkbroker import admin  # noqa: E402
from zkbroker.client.connection import BrokerConnection  # noqa: E402
from zkbroker.lab.cluster import LabCluster  # noqa: E402
from zkbroker.lab.zookeeper import ZooKeeperServer  # noqa: E402
from zkbroker.protocol.compression import CODEC_GZIP  # noqa: E402
from zkbroker.protocol.errors import ErrorCode  # noqa: E402
from zkbroker.protocol.message_set import encode_message  # noqa: E402
from zkbroker.zk.client import ZkClient  # noqa: E402

RSS_TARGET_MB = 200
BOMB_VALUE_BYTES = 400 * 1024 * 1024
VALUE = b"v" * 100


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for process {pid}")


def create_topic(cluster, topic: str) -> None:
    zk = ZkClient(cluster.zookeeper, name="bench-admin")
    zk.start()
    try:
        admin.create_topic(zk, topic, 1, 1)
    finally:
        zk.close()


def bomb_entry() -> bytes:
    wrapper = encode_message(None, gzip_bomb(BOMB_VALUE_BYTES), attributes=CODEC_GZIP)
    return (0).to_bytes(8, "big") + len(wrapper).to_bytes(4, "big") + wrapper


class Bomber(threading.Thread):
    """Sends the bomb in a loop until told to stop; counts the answers by error code."""

    def __init__(self, broker, topic: str, records: bytes, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.broker, self.topic, self.records, self.stop_event = broker, topic, records, stop
        self.answers: dict[int, int] = {}
        self.failure: str | None = None

    def run(self) -> None:
        body = {"acks": 1, "timeout_ms": 10000, "topics": [
            {"topic": self.topic, "partitions": [{"partition": 0, "records": self.records}]}]}
        try:
            with BrokerConnection(self.broker.host, self.broker.port, timeout_s=60) as conn:
                while not self.stop_event.is_set():
                    row = conn.send(0, 0, body).topics[0].partitions[0]
                    self.answers[row.error_code] = self.answers.get(row.error_code, 0) + 1
        except Exception as e:  # reported beside the figures: a bomber that dies is a finding
            self.failure = f"{type(e).__name__}: {e}"


def produce_for(bootstrap: str, topic: str, seconds: float) -> float:
    """Records per second a confluent-kafka producer gets acknowledged over `seconds`."""
    from confluent_kafka import Producer

    acked = [0]

    def delivered(err, msg) -> None:
        if err is None:
            acked[0] += 1

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 200_000, "message.timeout.ms": 30_000})
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(30)
    return acked[0] / (time.monotonic() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the bombs fly (default 60)")
    parser.add_argument("--clients", type=int, default=8, help="bombing clients (default 8)")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="zkbroker-bench-bombs-"))
    zookeeper = ZooKeeperServer(tick_time_ms=200, data_dir=workdir / "zookeeper")
    lab = LabCluster(workdir / "lab")
    try:
        zookeeper.start()
        cluster = lab.up(brokers=1, zookeeper=zookeeper.connect_string)
        broker = cluster.brokers[0]
        bootstrap = f"{broker.host}:{broker.port}"
        for topic in ("bombs", "steady"):
            create_topic(cluster, topic)
        time.sleep(2)  # leaders elected
        records = bomb_entry()
        alone = produce_for(bootstrap, "steady", min(args.seconds, 15.0))
        rss_before_kb = status_kb(broker.pid, "VmRSS")

        stop = threading.Event()
        bombers = [Bomber(broker, "bombs", records, stop) for _ in range(args.clients)]
        peak_sampled = [0]

        def sample() -> None:
            while not stop.is_set():
                peak_sampled[0] = max(peak_sampled[0], status_kb(broker.pid, "VmRSS"))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        for bomber in bombers:
            bomber.start()
        beside = produce_for(bootstrap, "steady", args.seconds)
        stop.set()
        for bomber in bombers:
            bomber.join(70)
        sampler.join(5)
        peak_kb = status_kb(broker.pid, "VmHWM")

        answers: dict[int, int] = {}
        for bomber in bombers:
            for code, n in bomber.answers.items():
                answers[code] = answers.get(code, 0) + n
        refused = answers.get(ErrorCode.MESSAGE_TOO_LARGE, 0)
        print(f"bombs: {len(records):,} bytes on the wire each, inflating to {BOMB_VALUE_BYTES:,} bytes; "
              f"{args.clients} clients for {args.seconds:.0f} s")
        print(f"  bombs sent {sum(answers.values()):,}, refused MESSAGE_TOO_LARGE {refused:,}, other answers "
              f"{ {code: n for code, n in answers.items() if code != ErrorCode.MESSAGE_TOO_LARGE} }")
        for bomber in bombers:
            if bomber.failure:
                print(f"  a bombing client failed: {bomber.failure}")
        print(f"  broker peak RSS (VmHWM) {peak_kb / 1024:.0f} MB (sampled VmRSS peak "
              f"{peak_sampled[0] / 1024:.0f} MB, {rss_before_kb / 1024:.0f} MB before the bombs); "
              f"target <= {RSS_TARGET_MB} MB: {'met' if peak_kb / 1024 <= RSS_TARGET_MB else 'MISSED'}")
        print(f"  well-behaved producer (confluent-kafka, 100-byte values, acks=1): {beside:,.0f} records/s "
              f"beside the bombs, {alone:,.0f} records/s alone ({beside / alone:.0%})")
        print(f"  broker still serving: {broker.pid} alive, log of 'bombs' empty: "
              f"{_end_offset(broker, 'bombs') == 0}")
        return 0
    finally:
        try:
            lab.down()
        finally:
            zookeeper.stop()
            shutil.rmtree(workdir, ignore_errors=True)


def _end_offset(broker, topic: str) -> int:
    with BrokerConnection(broker.host, broker.port, timeout_s=10) as conn:
        response = conn.send(2, 0, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "timestamp": -1, "max_num_offsets": 1}]}]})
    return response.topics[0].partitions[0].offsets[0]


if __name__ == "__main__":
    sys.exit(main())

"""Driving a lab as a user does: `zkbroker lab ...` commands in subprocesses, cluster.json, and real clients
(confluent-kafka, acks=all) that say which records were acknowledged."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.clients import PYTHON_CLIENTS, Received


def lab(*args: str, timeout_s: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zkbroker", "lab", *args], capture_output=True, text=True,
                          timeout=timeout_s)


def ok(*args: str) -> str:
    result = lab(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def status(directory) -> dict:
    return json.loads(ok("status", "--dir", str(directory), "--json"))


def cluster_json(directory: Path) -> dict:
    return json.loads((directory / "cluster.json").read_text())


def bootstrap(directory: Path) -> str:
    return ",".join(f"{b['host']}:{b['port']}" for b in cluster_json(directory)["brokers"])


def partitions(status_: dict, topic: str) -> dict[int, tuple[int | None, int | None, list[int]]]:
    """{partition: (leader, leader epoch, ISR)} of one topic in a `lab status --json`."""
    (entry,) = [t for t in status_["topics"] if t["topic"] == topic]
    return {p["partition"]: (p["leader"], p["leader_epoch"], p["isr"]) for p in entry["partitions"]}


def produce_all(bootstrap_servers: str, topic: str, values: list[bytes], timeout_s: float = 30.0,
                message_timeout_ms: int = 20000) -> tuple[list[bytes], list[str]]:
    """Send values with acks=all; returns (the acknowledged values in the order given, the others' errors)."""
    from confluent_kafka import Producer

    acked: list[bytes] = []
    errors: list[str] = []

    def delivered(error, message) -> None:
        if error is None:
            acked.append(message.value())
        else:
            errors.append(str(error))

    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": message_timeout_ms})
    for value in values:
        producer.produce(topic, value, on_delivery=delivered)
    deadline = time.monotonic() + timeout_s
    while len(acked) + len(errors) < len(values) and time.monotonic() < deadline:
        producer.poll(0.1)
    producer.flush(max(0.0, deadline - time.monotonic()))
    order = {value: i for i, value in enumerate(values)}
    return sorted(acked, key=order.__getitem__), errors


def read_all(bootstrap_servers: str, topic: str, partition_count: int, count: int) -> list[Received]:
    """A consumer's read of `count` records from offset 0 of every partition (up to each HW)."""
    confluent = next(c for c in PYTHON_CLIENTS if c.id == "confluent-kafka")
    return confluent.consume(bootstrap_servers, topic, {p: 0 for p in range(partition_count)}, count)

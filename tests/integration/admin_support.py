"""Helpers for the controller and admin-tool scenarios: the `zkbroker` tools run in-process, `--describe` parsed,
a started three-broker cluster, and raw produce/fetch through zkbroker's own BrokerConnection."""

from __future__ import annotations

import contextlib
import io
import json
import re

from tests.integration.harness import Broker, ZkView, wait_for
from zkbroker.cli import main
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.message_set import build_message_set, iter_messages

_ROW = re.compile(r"\tTopic: (\S+)\tPartition: (\d+)\tLeader: (\S+)\tReplicas: ([\d,]*)\tIsr: ([\d,]*)")


def tool(*argv: str) -> tuple[int, str, str]:
    """Run a `zkbroker` subcommand in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _ids(text: str) -> tuple[int, ...]:
    return tuple(int(i) for i in text.split(",") if i)


def describe(zk_connect: str, topic: str) -> dict[int, tuple[int | None, tuple[int, ...], tuple[int, ...]]]:
    """{partition: (leader or None, replicas, ISR)} as `zkbroker topics --describe` prints them."""
    code, out, err = tool("topics", "--zookeeper", zk_connect, "--describe", "--topic", topic)
    if code != 0:
        return {}
    rows = {}
    for line in out.splitlines():
        m = _ROW.fullmatch(line)
        if m and m.group(1) == topic:
            leader = None if m.group(3) == "none" else int(m.group(3))
            rows[int(m.group(2))] = (leader, _ids(m.group(4)), _ids(m.group(5)))
    return rows


def wait_described(zk_connect: str, topic: str, condition, timeout_s: float, what: str):
    """Poll --describe until condition(rows) holds; returns the rows."""
    return wait_for(lambda: (rows := describe(zk_connect, topic)) and condition(rows) and rows, timeout_s, what,
                    interval_s=0.1)


def state(zk: ZkView, topic: str, partition: int) -> dict | None:
    data = zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
    return json.loads(data) if data else None


def start_cluster(brokers, zk: ZkView, ids=(1, 2, 3), **overrides) -> dict[int, Broker]:
    """Start the brokers and wait until all are registered and the controller has finished its failover."""
    made = {b.id: b for b in brokers(*ids, **overrides)}
    wait_for(lambda: zk.registered() == set(ids) and zk.controller(), 20, "the brokers and a controller")
    controller = zk.controller()
    wait_for(lambda: made[controller].log_lines("is ready to serve as the new controller"), 10,
             "the controller's failover")
    return made


def produce(broker: Broker, topic: str, partition: int, values: list[bytes], acks: int = -1) -> int:
    """Append values (acks=-1 by default); returns the error code."""
    with broker.connection() as conn:
        response = conn.send(ApiKey.PRODUCE, 0, {"acks": acks, "timeout_ms": 5000, "topics": [
            {"topic": topic, "partitions": [{"partition": partition,
                                              "records": build_message_set([(None, v) for v in values])}]}]})
    return response.topics[0].partitions[0].error_code


def fetch_values(broker: Broker, topic: str, partition: int) -> tuple[int, list[bytes]]:
    """(error code, values from offset 0 up to the HW) of a consumer's Fetch v0."""
    try:
        with broker.connection() as conn:
            response = conn.send(ApiKey.FETCH, 0, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [
                {"topic": topic, "partitions": [{"partition": partition, "fetch_offset": 0,
                                                  "max_bytes": 1024 * 1024}]}]})
    except OSError:
        return -1, []
    row = response.topics[0].partitions[0]
    return row.error_code, [bytes(m.value) for m in iter_messages(bytes(row.records or b""))]

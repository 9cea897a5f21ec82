"""Real broker processes for integration tests: configs, start/stop/signals, logs and ZooKeeper reads."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkbroker.client.connection import BrokerConnection
from zkbroker.lab.ports import free_port  # noqa: F401 (the tests take it from here)
from zkbroker.lab.processes import process_state, stop_process

SESSION_TIMEOUT_MS = 2000  # the test ZooKeeper runs with tickTime 200, so 0.4-60 s sessions are allowed
CONTROLLED_SHUTDOWN_BACKOFF_MS = 200


def wait_for(condition: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.02):
    """Poll until condition() is truthy; fail the test naming `what` after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


class Broker:
    """One `zkbroker server` process with its own server.properties, log file and data dir; with `control`, it
    opens the lab control interface at DIR/control.sock, as a lab's broker does (zkbroker/control_protocol.py)."""

    def __init__(self, root: Path, broker_id: int, zk_connect: str, dir_name: str | None = None,
                 control: bool = False, **overrides: object) -> None:
        self.id = broker_id
        self.dir = root / (dir_name or f"broker-{broker_id}")
        self.control_path = self.dir / "control.sock" if control else None
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = int(overrides.pop("port", 0) or free_port())
        props = {"broker.id": broker_id, "port": self.port, "host.name": "127.0.0.1",
                 "advertised.host.name": "127.0.0.1", "log.dirs": self.dir / "data",
                 "zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
                 # A controlled shutdown that cannot move leadership (the last broker of a test) retries quickly.
                 "controlled.shutdown.retry.backoff.ms": CONTROLLED_SHUTDOWN_BACKOFF_MS}
        # log_retention_ms=... as a keyword; a key given with its dots keeps its underscores (listener.name.sasl_ssl...)
        props.update({k if "." in k else k.replace("_", "."): v for k, v in overrides.items()})
        self.host = str(props["host.name"])  # where the broker listens (a loopback alias in cross-host tests)
        self.config = self.dir / "server.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log_path = self.dir / "server.log"
        self.proc: subprocess.Popen | None = None

    def start(self, *extra_args: str, verbose: bool = False, faults: list[dict] = ()) -> Broker:
        """Start the broker process; verbose=True logs at DEBUG. `faults` (fault requests, as
        zkbroker.control_protocol.fault_request makes them) are in force from its first instant (needs `control`)."""
        from zkbroker import control_protocol as control

        flags = ["--verbose"] if verbose else []
        env = {k: v for k, v in os.environ.items() if k not in (control.ENV_VAR, control.FAULTS_ENV_VAR)}
        if self.control_path is not None:
            env[control.ENV_VAR] = str(self.control_path)
            if faults:
                env[control.FAULTS_ENV_VAR] = json.dumps(list(faults))
        else:
            assert not faults, "fault points need a broker with control=True"
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "zkbroker", *flags, "server", str(self.config),
                                          *extra_args],
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, env=env)
        return self

    def control(self, timeout_s: float = 5.0):
        """A client of this broker's lab control socket (waiting for the socket to appear after a start)."""
        from zkbroker.control_protocol import ControlError
        from zkbroker.lab.control_client import ControlClient

        assert self.control_path is not None, "this broker was made without control=True"
        client = ControlClient(self.control_path, timeout_s, name=f"broker {self.id}'s control socket")

        def answers() -> bool:
            try:
                client.faults()
            except ControlError:
                return False
            return True

        wait_for(answers, 15, f"broker {self.id}'s control socket to answer", interval_s=0.05)
        return client

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and process_state(self.proc.pid) != "dead"

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.proc.wait(5)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def terminate(self, timeout_s: float = 15.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        self.signal(signal.SIGTERM)
        return self.proc.wait(timeout_s)

    def wait_exit(self, timeout_s: float) -> int:
        return self.proc.wait(timeout_s)

    def cleanup(self) -> None:
        if self.proc is not None and self.alive():
            stop_process(self.proc.pid, timeout_s=5.0)
            self.proc.wait(5)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_lines(self, pattern: str) -> list[str]:
        return [line for line in self.log().splitlines() if re.search(pattern, line)]

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def connection(self, timeout_s: float = 10.0) -> BrokerConnection:
        """A raw protocol connection (zkbroker's own BlockingChannel) to this broker."""
        return BrokerConnection(self.host, self.port, client_id="test", timeout_s=timeout_s).connect()

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.dir / "data" / f"{topic}-{partition}"

    def segment_files(self, topic: str, partition: int) -> list[Path]:
        return sorted(self.partition_dir(topic, partition).glob("*.log"))


# ---- topics, through the real path: znodes written by zkbroker.admin, leaders elected by the controller --


def create_topic(zk_connect: str, topic: str, partitions: int, replication_factor: int,
                 serving: list[Broker], timeout_s: float = 30.0,
                 config: dict[str, str] | None = None) -> dict[int, int]:
    """Create a topic as `zkbroker topics --create` does (admin.create_topic through a ZkClient, with `config`
    as its overrides), then wait until the controller has elected a leader for every partition and that leader
    serves it. The brokers in `serving` are awaited in /brokers/ids first, since replicas are assigned over the
    registered brokers.

    Returns {partition: leader id}."""
    from zkbroker import admin
    from zkbroker.zk.client import ZkClient

    # Only this helper's own session: a long one, so a machine that stalls for a few seconds (the suite runs side
    # by side) cannot expire it in the middle of a create; the brokers keep their short sessions.
    zk = ZkClient(zk_connect, session_timeout_ms=15_000, name="test-admin")
    zk.start()
    try:
        wanted = {b.id for b in serving}
        wait_for(lambda: wanted <= set(admin.live_broker_ids(zk)), timeout_s, f"brokers {sorted(wanted)} to register")
        admin.create_topic(zk, topic, partitions, replication_factor, config)
    finally:
        zk.close()
    return wait_for_leaders(serving, topic, partitions, timeout_s)


def metadata_leaders(broker: Broker, topic: str) -> dict[int, int]:
    """{partition: leader} from the broker's Metadata v0 answer (leaders -1 while not elected)."""
    try:
        with broker.connection(timeout_s=5.0) as conn:
            response = conn.send(3, 0, {"topics": [topic]})
    except OSError:
        return {}
    topics = [t for t in response.topics if t.topic == topic]
    if not topics or topics[0].error_code not in (0, 9):
        return {}
    return {p.partition: p.leader for p in topics[0].partitions}


def wait_until_serving(broker: Broker, timeout_s: float = 60.0) -> None:
    """Wait until the broker's Metadata answer lists it and names a controller among the brokers listed: what an
    admin client needs from its first look (it sends its requests to that controller, and when the answer
    names none it asks only once more). "started" in the log comes earlier: the broker learns its own
    registration and the controller from ZooKeeper watches a moment after it logs it."""

    def serving() -> bool:
        try:
            with broker.connection(timeout_s=5.0) as conn:
                answer = conn.send(3, 1, {"topics": []})
        except OSError:  # not listening yet
            return False
        listed = {b.node_id for b in answer.brokers}
        return broker.id in listed and answer.controller_id in listed

    wait_for(serving, timeout_s, f"broker {broker.id} to list itself and a controller", interval_s=0.05)


def wait_for_leaders(serving: list[Broker], topic: str, partitions: int, timeout_s: float = 30.0,
                     expect: dict[int, int] | None = None) -> dict[int, int]:
    """Wait until every broker in `serving` reports a leader for each partition and each leader answers
    ListOffsets for it (so it has applied LeaderAndIsr, not only UpdateMetadata). After a leadership move, pass
    the leaders ZooKeeper now records as `expect`: the controller writes the state znode before it tells the
    brokers, so for a moment they all still agree on the old leader, which still answers as one."""
    by_id = {b.id: b for b in serving}
    last: list[dict[int, int]] = []

    def ready() -> dict[int, int] | None:
        views = [metadata_leaders(b, topic) for b in serving]
        last[:] = views
        if any(len(v) != partitions or any(leader < 0 for leader in v.values()) for v in views):
            return None
        if any(v != views[0] for v in views):
            return None
        if expect is not None and views[0] != expect:
            return None
        for partition, leader in views[0].items():
            if leader in by_id and list_offset(by_id[leader], topic, partition, -1)[0] != 0:
                return None
        return views[0]

    try:
        return wait_for(ready, timeout_s, f"leaders of all {partitions} partitions of {topic}"
                        + ("" if expect is None else f" to be {expect}"), interval_s=0.05)
    except AssertionError as e:
        raise AssertionError(f"{e}; the brokers last reported {last}") from None


def list_offset(broker: Broker, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
    """(error code, offset) of ListOffsets v0: timestamp -1 latest (the HW for consumers), -2 earliest."""
    try:
        with broker.connection(timeout_s=5.0) as conn:
            response = conn.send(2, 0, {"replica_id": -1, "topics": [
                {"topic": topic, "partitions": [{"partition": partition, "timestamp": timestamp,
                                                 "max_num_offsets": 1}]}]})
    except OSError:
        return -1, -1
    row = response.topics[0].partitions[0]
    return row.error_code, (row.offsets[0] if row.offsets else -1)


def wait_for_retention(broker: Broker, topic: str, partition: int, retention_bytes: int,
                       timeout_s: float = 30.0) -> int:
    """Wait until size retention has deleted segments of a log written well past retention_bytes and no longer
    written to, and has finished; return the earliest offset. Finished is retention's own rule: without its
    oldest segment the log would fall below retention_bytes, and the earliest offset is that segment's base.
    A first pass may run while the producer still writes, so the first earliest offset above 0 is not yet the
    last; and the broker's thread may delete a segment between our listing and a stat()."""

    def settled() -> int | None:
        try:
            files = broker.segment_files(topic, partition)
            sizes = [f.stat().st_size for f in files]
        except FileNotFoundError:
            return None
        error, earliest = list_offset(broker, topic, partition, -2)
        if error or not files or sum(sizes) - sizes[0] >= retention_bytes or int(files[0].stem) != earliest:
            return None
        return earliest or None  # 0: retention has not run yet

    return wait_for(settled, timeout_s,
                    f"retention to finish deleting the oldest segments of [{topic},{partition}]")


class ZkView:
    """A test's own kazoo client on the cluster's chroot, for reading what the brokers wrote."""

    def __init__(self, connect: str) -> None:
        self.client = KazooClient(hosts=connect, timeout=10.0)
        self.client.start(timeout=10.0)

    def close(self) -> None:
        self.client.stop()
        self.client.close()

    def get(self, path: str) -> bytes | None:
        try:
            return self.client.get(path)[0]
        except NoNodeError:
            return None

    def stat(self, path: str):
        return self.client.exists(path)

    def children(self, path: str) -> list[str]:
        try:
            return sorted(self.client.get_children(path))
        except NoNodeError:
            return []

    def registered(self) -> set[int]:
        return {int(c) for c in self.children("/brokers/ids")}

    def controller(self) -> int | None:
        import json
        data = self.get("/controller")
        return json.loads(data)["brokerid"] if data else None

    def epoch(self) -> int | None:
        data = self.get("/controller_epoch")
        return int(data) if data else None

"""The ZooKeeper high-level consumer as separate consumer processes against real brokers: ownership through the
owner znodes, reassignment when a member dies or leaves, wildcards picking up new topics, partition increases,
and recovery from a ZooKeeper connection loss in the middle of a rebalance."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
from kazoo.exceptions import ConnectionLoss

from tests.integration.consumers import (
    FAST_CONSUMER,
    ROOT,
    ConsumerProcess,
    ZkProxy,
    members,
    owner_sessions,
    owners,
    read_values,
    registration,
    wait_settled,
)
from tests.integration.harness import create_topic, wait_for
from zkbroker import admin
from zkbroker.client.producer import Producer
from zkbroker.zk.client import ZkClient

pytestmark = pytest.mark.integration


@pytest.fixture
def processes():
    made: list = []
    yield made
    for p in made:
        p.cleanup()


def test_three_consumers_own_each_of_12_partitions_once_and_take_over_from_a_killed_or_closed_one(
        tmp_path, zk, zk_connect, brokers, processes):
    serving = brokers(1, 2)
    create_topic(zk_connect, "orders", 12, 1, serving)
    for i in range(3):
        processes.append(ConsumerProcess(tmp_path, "at_least_once", zk_connect, "billing", "orders", f"c{i}",
                                         tmp_path / f"c{i}.txt"))
    owned = wait_settled(zk, "billing", "orders", 12, expected_members=3)
    ids = members(zk, "billing")
    assert sorted({thread.rsplit("-", 1)[0] for thread in owned.values()}) == ids
    reg = registration(zk, "billing", ids[0])
    assert (reg["version"], reg["subscription"], reg["pattern"]) == (1, {"orders": 1}, "static")
    # range: members sorted as strings, four consecutive partitions each
    assert [owned[p] for p in range(12)] == [f"{m}-0" for m in ids for _ in range(4)]

    killed = processes[0]
    killed.kill()  # its session (1 s) has to expire before its znodes go
    owned = wait_settled(zk, "billing", "orders", 12, expected_members=2, timeout_s=20)
    assert len(set(owned.values())) == 2

    assert processes[1].terminate() == 0
    # A clean close deletes its znodes at once: gone when the process has exited, with no session timeout to wait
    # for (checked directly, not by timing the rebalance that follows, which a loaded machine slows down).
    assert len(members(zk, "billing")) == 1
    owned = wait_settled(zk, "billing", "orders", 12, expected_members=1, timeout_s=20)
    assert len(set(owned.values())) == 1


def test_a_whitelist_consumer_picks_up_a_new_matching_topic(tmp_path, zk, zk_connect, brokers):
    (broker,) = brokers(1)
    create_topic(zk_connect, "wl-a", 2, 1, [broker])
    out = open(tmp_path / "out.txt", "wb")
    err = open(tmp_path / "err.txt", "wb")
    consumer = subprocess.Popen(
        [sys.executable, "-m", "zkbroker", "console-consumer", "--zookeeper", zk_connect, "--whitelist",
         "wl-.*", "--group", "wl", "--from-beginning", "--max-messages", "4", "--consumer.config",
         str(_consumer_config(tmp_path))], stdout=out, stderr=err, cwd=ROOT)
    try:
        with Producer({"bootstrap.servers": broker.bootstrap, "acks": 1}) as producer:
            producer.send("wl-a", b"a1").get(10)
            producer.send("wl-a", b"a2").get(10)
            wait_for(lambda: len(owners(zk, "wl", "wl-a")) == 2, 20, "the whitelist consumer to own wl-a")
            reg = registration(zk, "wl", members(zk, "wl")[0])
            assert (reg["subscription"], reg["pattern"]) == ({"wl-.*": 1}, "white_list")
            create_topic(zk_connect, "wl-b", 1, 1, [broker])
            create_topic(zk_connect, "other", 1, 1, [broker])
            wait_for(lambda: owners(zk, "wl", "wl-b"), 20, "the new topic wl-b to be owned")
            assert not owners(zk, "wl", "other")
            producer.send("wl-b", b"b1").get(10)
            producer.send("other", b"x").get(10)
            producer.send("wl-b", b"b2").get(10)
        assert consumer.wait(30) == 0
    finally:
        consumer.kill()
        out.close()
        err.close()
    assert sorted((tmp_path / "out.txt").read_bytes().split()) == [b"a1", b"a2", b"b1", b"b2"]
    assert (tmp_path / "err.txt").read_text().strip().endswith("Consumed 4 messages")


def _consumer_config(tmp_path):
    path = tmp_path / "consumer.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in FAST_CONSUMER.items() if k != "auto.offset.reset"))
    return path


def test_a_partition_increase_triggers_a_rebalance(tmp_path, zk, zk_connect, brokers, processes):
    serving = brokers(1)
    create_topic(zk_connect, "grow", 2, 1, serving)
    for i in range(2):
        processes.append(ConsumerProcess(tmp_path, "at_least_once", zk_connect, "g", "grow", f"c{i}",
                                         tmp_path / f"c{i}.txt"))
    wait_settled(zk, "g", "grow", 2, expected_members=2)
    zkc = ZkClient(zk_connect, name="test")
    zkc.start()
    try:
        admin.add_partitions(zkc, "grow", 6)
    finally:
        zkc.close()
    owned = wait_settled(zk, "g", "grow", 6, expected_members=2, timeout_s=20)
    assert sorted(list(owned.values()).count(t) for t in set(owned.values())) == [3, 3]
    # and the new partitions are fetched: a record sent to each comes out of one of the consumers
    with Producer({"bootstrap.servers": serving[0].bootstrap, "acks": 1}) as producer:
        for p in range(6):
            producer.send("grow", f"p{p}".encode(), partition=p).get(10)
    wait_for(lambda: sorted(read_values(tmp_path / "c0.txt") + read_values(tmp_path / "c1.txt"))
             == [f"p{p}" for p in range(6)], 20, "every partition's record to be consumed")


def test_zookeeper_connection_loss_during_a_rebalance_leaves_no_stale_owner(
        tmp_path, zk, zk_connect, zookeeper, brokers, processes):
    """Consumer A reaches ZooKeeper through a proxy. A rebalance starts (B joins) and A is cut off: first for
    less than its session timeout (it keeps its session and finishes), then for longer (its session expires, B
    takes everything, and A comes back with a new session, registers again and rebalances). Each time the
    group ends with every partition owned once, by live sessions only, and both consume."""
    (broker,) = brokers(1)
    create_topic(zk_connect, "lossy", 4, 1, [broker])
    proxy = ZkProxy(zookeeper.connect_string)
    chroot = zk_connect[zk_connect.index("/"):]
    try:
        # 6 s: the short cut below (0.8 s, after up to one ping interval of silence, then a reconnect with
        # backoff) must stay well inside the session on a loaded machine; with 2 s it had a few 100 ms to spare.
        a = ConsumerProcess(tmp_path, "at_least_once", proxy.address + chroot, "g", "lossy", "a",
                            tmp_path / "a.txt", zookeeper_session_timeout_ms=6000)
        processes.append(a)
        wait_settled(zk, "g", "lossy", 4, expected_members=1)
        (a_id,) = members(zk, "g")

        b = ConsumerProcess(tmp_path, "at_least_once", zk_connect, "g", "lossy", "b", tmp_path / "b.txt")
        processes.append(b)
        wait_for(lambda: len(members(zk, "g")) == 2, 20, "B to register")
        proxy.cut()  # A is rebalancing now (or about to): a short loss, inside its 6 s session
        time.sleep(0.8)
        proxy.heal()
        owned = wait_settled(zk, "g", "lossy", 4, expected_members=2, timeout_s=30)
        assert a_id in members(zk, "g")
        _assert_live_owners(zk, "g", "lossy", owned)

        c = ConsumerProcess(tmp_path, "at_least_once", zk_connect, "g", "lossy", "c", tmp_path / "c.txt")
        processes.append(c)
        wait_for(lambda: len(members(zk, "g")) == 3, 20, "C to register")
        proxy.cut()  # and now a long loss: A's session expires while the group rebalances
        wait_for(lambda: a_id not in members(zk, "g"), 20, "A's session to expire")
        owned = wait_settled(zk, "g", "lossy", 4, expected_members=2, timeout_s=30)
        assert all(not thread.startswith(a_id) for thread in owned.values())
        proxy.heal()
        owned = wait_settled(zk, "g", "lossy", 4, expected_members=3, timeout_s=30)
        _assert_live_owners(zk, "g", "lossy", owned)
        assert "ZK expired; release old broker partition ownership; re-register consumer" in a.log()

        with Producer({"bootstrap.servers": broker.bootstrap, "acks": 1}) as producer:
            for p in range(4):
                producer.send("lossy", f"after-{p}".encode(), partition=p).get(10)
        wait_for(lambda: sorted(v for f in ("a", "b", "c") for v in read_values(tmp_path / f"{f}.txt")
                                if v.startswith("after-")) == [f"after-{p}" for p in range(4)], 20,
                 "every partition to be consumed after the recovery")
    finally:
        proxy.close()


def test_an_owner_znode_whose_delete_was_lost_is_released_once_reconnected(zk, zk_connect, zookeeper, brokers):
    """A consumer's release whose deletes get no answer (the connection dropped; its session lives on) leaves
    its owner znodes behind. Forgotten, they would block those partitions for every other member as long as
    the session lives; the connector remembers them and its next rebalance deletes the ones its session holds.
    The lost answers are forced by calling the release while A's connection swallows its requests, then
    cutting it."""
    from consumer.connector import ZookeeperConsumerConnector

    (broker,) = brokers(1)
    create_topic(zk_connect, "stuck", 4, 1, [broker])
    proxy = ZkProxy(zookeeper.connect_string)
    chroot = zk_connect[zk_connect.index("/"):]
    settings = FAST_CONSUMER | {"group.id": "g", "auto.commit.enable": False}
    a = ZookeeperConsumerConnector(settings | {"zookeeper.connect": proxy.address + chroot,
                                               "zookeeper.session.timeout.ms": 6000})
    b = None
    try:
        a.create_message_streams({"stuck": 1})
        assert len(a.owned_partitions()) == 4
        with a._rebalance_lock:  # the watcher thread stays out of the way
            proxy.blackhole()
            release = ThreadResult(a._release_ownership)
            time.sleep(0.3)  # the deletes are sent, and swallowed
            proxy.cut()
            assert isinstance(release.error(10), ConnectionLoss)
        assert sorted(owners(zk, "g", "stuck")) == [0, 1, 2, 3]  # still there: the deletes never arrived
        proxy.heal()
        b = ZookeeperConsumerConnector(settings | {"zookeeper.connect": zk_connect, "consumer.id": "b"})
        b.create_message_streams({"stuck": 1})  # raises if A's znodes block B past its retries
        owned = wait_settled(zk, "g", "stuck", 4, expected_members=2, timeout_s=30)
        assert sum(thread.startswith("g_b-") for thread in owned.values()) == 2  # taken over from A
        _assert_live_owners(zk, "g", "stuck", owned)
    finally:
        for connector in (b, a):
            if connector is not None:
                connector.shutdown()
        proxy.close()


class ThreadResult:
    """Run fn on a thread; error() waits for it and returns what it raised (None if nothing)."""

    def __init__(self, fn) -> None:
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn) -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            self._error = e

    def error(self, timeout_s: float) -> BaseException | None:
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"still running after {timeout_s} s"
        return self._error


def _assert_live_owners(zk, group: str, topic: str, owned: dict[int, str]) -> None:
    """Each owner znode belongs to the live session of the member its thread id names."""
    sessions = owner_sessions(zk, group, topic)
    for partition, thread in owned.items():
        member = thread.rsplit("-", 1)[0]
        stat = zk.stat(f"/consumers/{group}/ids/{member}")
        assert stat is not None, f"partition {partition} owned by {thread}, which is not registered"
        assert sessions[partition] == stat.ephemeralOwner, f"partition {partition}: owner from an old session"


def test_owner_znodes_hold_thread_ids_and_offsets_are_next_offsets(tmp_path, zk, zk_connect, brokers, processes):
    (broker,) = brokers(1)
    create_topic(zk_connect, "layout", 1, 1, [broker])
    with Producer({"bootstrap.servers": broker.bootstrap, "acks": 1}) as producer:
        for i in range(5):
            producer.send("layout", f"m{i}".encode()).get(10)
    consumer = ConsumerProcess(tmp_path, "at_least_once", zk_connect, "lay", "layout", "c", tmp_path / "c.txt",
                               consumer_id="fixed")
    processes.append(consumer)
    wait_for(lambda: len(read_values(tmp_path / "c.txt")) == 5, 20, "five messages")
    assert members(zk, "lay") == ["lay_fixed"]
    assert zk.get("/consumers/lay/owners/layout/0") == b"lay_fixed-0"
    wait_for(lambda: zk.get("/consumers/lay/offsets/layout/0") == b"5", 10, "the offset 5 (the next to consume)")
    stat = zk.stat("/consumers/lay/offsets/layout/0")
    assert stat.ephemeralOwner == 0  # offsets are persistent, owners and ids ephemeral
    assert zk.stat("/consumers/lay/owners/layout/0").ephemeralOwner != 0
    assert json.loads(zk.get("/consumers/lay/ids/lay_fixed"))["pattern"] == "static"


@pytest.mark.parametrize("owned_only", [False, True])
def test_offsets_commit_owned_only_skips_a_partition_taken_over(zk, zk_connect, brokers, owned_only):
    """0.8.2 commits whatever it holds, so a consumer that lost a partition without knowing it (its session
    expired during a pause and another member took over) rewinds the new owner's offset. With
    offsets.commit.owned.only the commit checks the owner znode's session in the same transaction."""
    from consumer.connector import ZookeeperConsumerConnector
    from consumer.stream import ConsumerTimeout

    (broker,) = brokers(1)
    create_topic(zk_connect, "owned", 2, 1, [broker])
    with Producer({"bootstrap.servers": broker.bootstrap, "acks": 1}) as producer:
        for p in (0, 1):
            for _ in range(3):
                producer.send("owned", b"v", partition=p).get(10)
    connector = ZookeeperConsumerConnector(FAST_CONSUMER | {
        "zookeeper.connect": zk_connect, "group.id": "own", "auto.commit.enable": False,
        "consumer.timeout.ms": 500, "offsets.commit.owned.only": owned_only})
    try:
        stream = connector.create_message_streams({"owned": 1})["owned"][0]
        got = 0
        with pytest.raises(ConsumerTimeout):
            for _ in stream:
                got += 1
        assert got == 6
        # Another member takes partition 0 over and moves its offset on (as after our session expired).
        zk.client.delete("/consumers/own/owners/owned/0")
        zk.client.create("/consumers/own/owners/owned/0", b"own_other-0", ephemeral=True)
        zk.client.create("/consumers/own/offsets/owned/0", b"100", makepath=True)
        connector.commit_offsets()
        assert zk.get("/consumers/own/offsets/owned/1") == b"3"
        assert zk.get("/consumers/own/offsets/owned/0") == (b"100" if owned_only else b"3")
    finally:
        connector.shutdown()

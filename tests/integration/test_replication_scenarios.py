"""The ZooKeeper-era replication failures of reference §8, reproduced on real brokers — and fixed.

S1 (KAFKA-1211) and S2 (divergent logs) run in both `replication.truncation` modes: `high-watermark` loses
or diverges as Kafka 0.8 did, `leader-epoch` (KIP-101) does not. S3 is unclean leader election, S4 the
Jepsen ISR-shrink case. The lab control interface's fault point hold_fetchers keeps one broker's fetchers
from fetching so that steps happen in the order the scenario needs ("kill B before A re-fetches").
"""

from __future__ import annotations

import glob
import json
import os
import struct
import time

import pytest

from tests.integration.harness import SESSION_TIMEOUT_MS, wait_for
from zkbroker import admin
from zkbroker.client.connection import BrokerConnection
from zkbroker.control_protocol import fault_request
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.message_set import build_message_set, iter_messages
from zkbroker.zk.client import ZkClient

pytestmark = pytest.mark.integration

TOPIC = "scenario"
SESSION_S = SESSION_TIMEOUT_MS / 1000


HOLD_FETCHERS = fault_request("hold_fetchers")


def release_fetchers(broker) -> None:
    with broker.control() as control:
        control.fault("release_fetchers")


@pytest.fixture
def admin_zk(zk_connect, zk):
    client = ZkClient(zk_connect)
    client.start()
    yield client
    client.close()


def state(zk) -> dict:
    data = zk.get(f"/brokers/topics/{TOPIC}/partitions/0/state")
    return json.loads(data) if data else {}


def wait_state(zk, predicate, what: str, timeout_s: float = SESSION_S + 10) -> dict:
    return wait_for(lambda: (s := state(zk)) and predicate(s) and s, timeout_s, what)


def produce(broker, values: list[bytes], acks: int = -1) -> tuple[int, int]:
    """Produce v0 with magic-0 messages; like a client, retry while the broker has not yet heard that it leads."""
    records = build_message_set([(None, v) for v in values], magic=0)
    deadline = time.monotonic() + 10
    while True:
        with BrokerConnection("127.0.0.1", broker.port, timeout_s=15) as conn:
            response = conn.send(ApiKey.PRODUCE, 0, {"acks": acks, "timeout_ms": 5000, "topics": [
                {"topic": TOPIC, "partitions": [{"partition": 0, "records": records}]}]})
        entry = response.topics[0].partitions[0]
        not_yet = entry.error_code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_FOR_PARTITION)
        if not not_yet or time.monotonic() > deadline:
            return entry.error_code, entry.base_offset
        time.sleep(0.05)


def consume(broker) -> list[bytes]:
    """What a consumer can read from the leader: everything below the high watermark."""
    deadline = time.monotonic() + 10
    while True:
        with BrokerConnection("127.0.0.1", broker.port, timeout_s=15) as conn:
            response = conn.send(ApiKey.FETCH, 0, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [
                {"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": 0, "max_bytes": 1 << 20}]}]})
        entry = response.topics[0].partitions[0]
        if entry.error_code == ErrorCode.NONE:
            return [m.value for m in iter_messages(bytes(entry.records or b""))]
        assert time.monotonic() < deadline, f"fetch kept failing with error {entry.error_code}"
        time.sleep(0.05)


def log_messages(broker) -> dict[int, bytes]:
    """offset -> value, read straight from the broker's segment files."""
    out = {}
    for path in sorted(glob.glob(str(broker.dir / "data" / f"{TOPIC}-0" / "*.log"))):
        with open(path, "rb") as f:
            out.update((m.offset, m.value) for m in iter_messages(f.read()))
    return out


def cut_log_after(broker, keep: int) -> None:
    """Simulate a crash that lost the log's tail: keep the first `keep` messages, drop the clean-shutdown marker."""
    (path,) = glob.glob(str(broker.dir / "data" / f"{TOPIC}-0" / "*.log"))
    with open(path, "rb") as f:
        data = f.read()
    position = 0
    for _ in range(keep):
        _, size = struct.unpack_from(">qi", data, position)
        position += 12 + size
    os.truncate(path, position)
    os.remove(broker.dir / "data" / ".kafka_cleanshutdown")


def one_partition(admin_zk, replicas: tuple[int, ...], **config: str) -> None:
    admin.write_topic(admin_zk, TOPIC, {0: replicas}, dict(config))


# ---- S1: KAFKA-1211 -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode, lost", [("high-watermark", True), ("leader-epoch", False)])
def test_s1_acknowledged_write_lost_on_fast_failover_only_in_high_watermark_mode(
        brokers, zk, admin_zk, mode, lost):
    # A = broker 1 follows B = broker 2. A long follower long-poll keeps A from learning the new HW in time.
    a, b = brokers(1, 2, control=True, replication_truncation=mode, replica_fetch_wait_max_ms=5000)
    wait_for(lambda: zk.registered() == {1, 2}, 15, "both brokers")
    one_partition(admin_zk, (2, 1))
    wait_state(zk, lambda s: s["leader"] == 2 and s["isr"] == [2, 1], "B leading with A in the ISR")

    assert produce(b, [b"m1"]) == (ErrorCode.NONE, 0)
    wait_for(lambda: log_messages(a) == {0: b"m1"}, 10, "A to replicate m1")
    # m2 is acknowledged once A has fetched it; A learns HW=2 only with its next fetch answer, which B holds
    # back for up to 5 s because nothing new arrives.
    assert produce(b, [b"m2"]) == (ErrorCode.NONE, 1)
    assert log_messages(a) == {0: b"m1", 1: b"m2"}

    # Restart A, whose fetchers are held from its first instant: it truncates as its mode says, and does not
    # re-fetch.
    assert a.terminate() == 0
    a.start(faults=[HOLD_FETCHERS])
    wait_for(lambda: a.log_lines("became follower of broker 2"), 15, "A to follow B again")
    wait_for(lambda: a.log_lines(r"Truncating log \[scenario,0\] to offset 1") if mode == "high-watermark"
             else True, 10, "A's truncation")
    b.kill()
    wait_state(zk, lambda s: s["leader"] == 1, "A to lead")
    release_fetchers(a)

    readable = wait_for(lambda: consume(a) if len(consume(a)) >= 1 else None, 10, "A to serve reads")
    if lost:
        assert readable == [b"m1"]  # m2 was acknowledged with acks=-1, and is gone
        assert produce(a, [b"m3"]) == (ErrorCode.NONE, 1)  # offset 1 is reused
    else:
        assert readable == [b"m1", b"m2"]
        assert produce(a, [b"m3"]) == (ErrorCode.NONE, 2)


# ---- S2: divergent logs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode, diverge", [("high-watermark", True), ("leader-epoch", False)])
def test_s2_replicas_diverge_after_a_crash_only_in_high_watermark_mode(brokers, zk, admin_zk, mode, diverge):
    # Broker 1 starts first, so it is the controller and handles broker 2's stop (with a leader epoch bump).
    (first,) = brokers(1, replication_truncation=mode)
    wait_for(lambda: zk.controller() == 1, 15, "broker 1 to be the controller")
    (second,) = brokers(2, replication_truncation=mode)
    wait_for(lambda: zk.registered() == {1, 2}, 15, "both brokers")
    one_partition(admin_zk, (1, 2))
    wait_state(zk, lambda s: s["leader"] == 1 and s["isr"] == [1, 2], "broker 1 leading, both in sync")
    for i in range(10):
        assert produce(first, [b"small-%d" % i])[0] == ErrorCode.NONE
    wait_for(lambda: len(log_messages(second)) == 10, 10, "broker 2 to replicate all 10")

    assert second.terminate() == 0
    wait_state(zk, lambda s: s["isr"] == [1], "broker 2 out of the ISR")
    assert first.terminate() == 0
    cut_log_after(first, keep=5)

    first.start()
    wait_for(lambda: zk.registered() == {1}, 15, "broker 1 back")
    wait_for(lambda: first.log_lines("became leader for partition \\[scenario,0\\]"), 15, "broker 1 to lead")
    assert len(log_messages(first)) == 5  # recovery kept what survived the "crash"
    for i in range(10):
        assert produce(first, [b"BIG-MESSAGE-%d" % i])[0] == ErrorCode.NONE
    second.start()
    wait_for(lambda: max(log_messages(second), default=-1) == 14, 20, "broker 2 to catch up to offset 14")

    leader, follower = log_messages(first), log_messages(second)
    assert sorted(leader) == sorted(follower) == list(range(15))
    differing = [o for o in range(15) if leader[o] != follower[o]]
    if diverge:
        # Same offsets, different messages, forever: broker 2 kept what lay below its (possibly one fetch
        # stale) high watermark, which the leader had lost in the crash.
        assert differing and set(differing) <= {5, 6, 7, 8, 9}
    else:
        assert differing == []


# ---- S3: unclean leader election ---------------------------------------------------------------------------


@pytest.mark.parametrize("unclean", [True, False])
def test_s3_unclean_election_loses_acknowledged_data_and_clean_mode_waits(brokers, zk, admin_zk, unclean):
    # A starts first and is the controller; C is killed while A and B stay in sync.
    (a,) = brokers(1)
    wait_for(lambda: zk.controller() == 1, 15, "A to be the controller")
    b, c = brokers(2, 3, control=True)
    wait_for(lambda: zk.registered() == {1, 2, 3}, 15, "three brokers")
    one_partition(admin_zk, (1, 2, 3), **{"unclean.leader.election.enable": str(unclean).lower()})
    wait_state(zk, lambda s: s["leader"] == 1 and sorted(s["isr"]) == [1, 2, 3], "all three in sync")

    c.kill()
    wait_state(zk, lambda s: sorted(s["isr"]) == [1, 2], "C out of the ISR")
    for i in range(5):
        assert produce(a, [b"acked-%d" % i]) == (ErrorCode.NONE, i)
    a.kill()
    wait_state(zk, lambda s: s["leader"] == 2 and s["isr"] == [2], "B leading alone")
    c.start(faults=[HOLD_FETCHERS])  # C returns but does not catch up: it stays out of the ISR
    wait_for(lambda: zk.registered() == {2, 3}, 15, "C back")
    b.kill()
    wait_for(lambda: zk.controller() == 3 and zk.registered() == {3}, SESSION_S + 10, "C alone, as controller")
    release_fetchers(c)

    if unclean:
        wait_state(zk, lambda s: s["leader"] == 3 and s["isr"] == [3], "C elected uncleanly")
        # The controller logs the unclean election once its state write is answered: after the znode changed.
        wait_for(lambda: c.log_lines("There's potential data loss"), 10, "the unclean election warning")
        assert consume(c) == []  # five acknowledged writes are gone
        a.start()
        b.start()
        # Each truncates on becoming C's follower: to its checkpointed high watermark (SIGKILL may have left
        # it behind), and to C's log end when fetching beyond it ("reset its fetch offset").
        wait_for(lambda: log_messages(a) == {} and log_messages(b) == {}, 20, "the data gone everywhere")
        assert all(w.log_lines("Truncating log") for w in (a, b))
    else:
        wait_for(lambda: c.log_lines("unclean leader election is disabled"), 10, "the refusal logged")
        offline = state(zk)
        assert offline["leader"] != 3 and offline["isr"] == [2]  # offline; the ISR keeps its last member, B
        b.start()
        wait_for(lambda: zk.registered() == {2, 3}, 15, "B back")
        wait_state(zk, lambda s: s["leader"] == 2 and s["leader_epoch"] > offline["leader_epoch"],
                   "B, the last in-sync replica, to lead again")
        wait_for(lambda: consume(b) == [b"acked-%d" % i for i in range(5)], 10, "every acknowledged write")


# ---- S4: Jepsen, the lone leader ---------------------------------------------------------------------------


def own_isr(broker) -> list[int] | None:
    """The ISR of [scenario,0] as the broker itself holds it (its lab control socket's `state`)."""
    with broker.control() as control:
        return next((p["isr"] for p in control.state()["partitions"] if (p["topic"], p["partition"]) == (TOPIC, 0)),
                    None)


@pytest.mark.parametrize("min_isr, refused", [(2, True), (1, False)])
def test_s4_lone_leader_refuses_writes_with_min_insync_replicas(brokers, zk, admin_zk, min_isr, refused):
    leader, follower = brokers(1, 2, control=True, replica_lag_time_max_ms=1000, replica_fetch_wait_max_ms=200)
    wait_for(lambda: zk.registered() == {1, 2}, 15, "both brokers")
    one_partition(admin_zk, (1, 2), **{"min.insync.replicas": str(min_isr)})
    wait_state(zk, lambda s: s["leader"] == 1 and s["isr"] == [1, 2], "both in sync")
    assert produce(leader, [b"before"])[0] == ErrorCode.NONE

    with follower.control() as control:  # the follower stops fetching (it keeps its ZooKeeper session)
        control.fault("hold_fetchers")
    wait_state(zk, lambda s: s["isr"] == [1], "the leader to shrink the ISR to itself", timeout_s=10)
    # ZooKeeper has the new ISR a moment before the leader adopts it (on its write's answer); a produce in between
    # is appended and then refused with NOT_ENOUGH_REPLICAS_AFTER_APPEND.
    wait_for(lambda: own_isr(leader) == [1], 5, "the leader to adopt the ISR it wrote")
    error, _ = produce(leader, [b"during"])
    if refused:
        assert error == ErrorCode.NOT_ENOUGH_REPLICAS
        assert consume(leader) == [b"before"]  # nothing was appended
    else:
        assert error == ErrorCode.NONE  # acknowledged by a lone leader: one crash away from loss
    release_fetchers(follower)
    wait_state(zk, lambda s: s["isr"] == [1, 2], "the follower to rejoin", timeout_s=10)
    assert produce(leader, [b"after"])[0] == ErrorCode.NONE
    wait_for(lambda: list(log_messages(follower).values())[-1:] == [b"after"], 10, "the follower to catch up")


def test_kip_16s_rule_still_drops_a_follower_that_stops_fetching_after_replica_lag_time_max_ms(brokers, zk, admin_zk):
    """replica.lag.rule=caught-up-time (KIP-16) drops the message count, not the time: a follower whose fetchers
    stop is no longer caught up, leaves the ISR once that is older than replica.lag.time.max.ms, and rejoins."""
    leader, follower = brokers(1, 2, control=True, replica_lag_rule="caught-up-time", replica_lag_time_max_ms=1000,
                               replica_fetch_wait_max_ms=200)
    wait_for(lambda: zk.registered() == {1, 2}, 15, "both brokers")
    one_partition(admin_zk, (1, 2))
    wait_state(zk, lambda s: s["leader"] == 1 and s["isr"] == [1, 2], "both in sync")
    assert produce(leader, [b"before"])[0] == ErrorCode.NONE
    with follower.control() as control:
        control.fault("hold_fetchers")
    wait_state(zk, lambda s: s["isr"] == [1], "the leader to shrink the ISR to itself", timeout_s=10)
    assert leader.log_lines(r"Replica 2 of partition \[scenario,0\] is out of sync: not caught up to the log end")
    release_fetchers(follower)
    wait_state(zk, lambda s: s["isr"] == [1, 2], "the follower to rejoin", timeout_s=10)


# ---- The ISR as an operator sees it ------------------------------------------------------------------------


def test_isr_shrink_and_expand_are_visible_in_topics_describe(brokers, zk, zk_connect, admin_zk):
    from tests.integration.admin_support import describe

    # A session long enough to outlast the pause: the leader, not the controller, drops the follower.
    leader, follower = brokers(1, 2, zookeeper_session_timeout_ms=10000, replica_lag_time_max_ms=1500)
    wait_for(lambda: zk.registered() == {1, 2}, 15, "both brokers")
    one_partition(admin_zk, (1, 2))
    wait_for(lambda: describe(zk_connect, TOPIC).get(0) == (1, (1, 2), (1, 2)), 15, "describe: Isr: 1,2")
    follower.pause()
    try:
        wait_for(lambda: describe(zk_connect, TOPIC).get(0) == (1, (1, 2), (1,)), 10,
                 "describe: the paused follower dropped from the ISR")
        assert zk.registered() == {1, 2}  # its session is alive: only the ISR says it fell behind
    finally:
        follower.resume()
    wait_for(lambda: describe(zk_connect, TOPIC).get(0) == (1, (1, 2), (1, 2)), 10,
             "describe: the follower back in the ISR")
    assert leader.log_lines(r"Shrinking ISR for partition \[scenario,0\] from 1,2 to 1")
    assert leader.log_lines(r"Expanding ISR for partition \[scenario,0\] from 1 to 1,2")

"""Moving leadership on purpose (issue 4, items 6 and 7): the preferred replica election tool, the automatic
leader rebalance, and controlled shutdown on SIGTERM."""

from __future__ import annotations

import threading
import time

import pytest

from tests.integration.admin_support import produce, start_cluster, state, tool, wait_described
from tests.integration.harness import SESSION_TIMEOUT_MS, wait_for, wait_for_leaders

pytestmark = pytest.mark.integration

SESSION_S = SESSION_TIMEOUT_MS / 1000


def _lose_and_regain_preferred_leadership(cluster, zk, zk_connect, topic: str) -> tuple[int, int]:
    """A topic whose preferred leader (a non-controller broker) is killed and comes back into the ISR as a
    follower. Returns (preferred, acting leader)."""
    controller = zk.controller()
    preferred, other = [b for b in sorted(cluster) if b != controller]
    assert tool("topics", "--zookeeper", zk_connect, "--create", "--topic", topic, "--replica-assignment",
                f"{preferred}:{other}")[0] == 0
    wait_described(zk_connect, topic, lambda rows: rows[0][2] == (preferred, other), 15, "in sync")
    cluster[preferred].kill()
    # Session expiry, then the controller's work: generous on a loaded machine.
    wait_for(lambda: state(zk, topic, 0)["leader"] == other, SESSION_S + 15, "the other replica to lead")
    cluster[preferred].start()
    wait_for(lambda: preferred in state(zk, topic, 0)["isr"], SESSION_S + 15, "the preferred replica back in sync")
    return preferred, other


def test_preferred_replica_election_returns_leadership_after_the_broker_comes_back(brokers, zk, zk_connect):
    cluster = start_cluster(brokers, zk, auto_leader_rebalance_enable="false")
    preferred, other = _lose_and_regain_preferred_leadership(cluster, zk, zk_connect, "pe")
    time.sleep(0.5)
    assert state(zk, "pe", 0)["leader"] == other  # nothing moves it back by itself

    code, out, err = tool("preferred-replica-election", "--zookeeper", zk_connect)
    assert (code, out, err) == (0, "Successfully started preferred replica election for partitions Set([pe,0])\n", "")
    wait_for(lambda: state(zk, "pe", 0)["leader"] == preferred, 10, "leadership back on the preferred replica")
    wait_for(lambda: zk.stat("/admin/preferred_replica_election") is None, 5, "the admin node deleted")
    wait_for_leaders([cluster[preferred], cluster[other]], "pe", 1, timeout_s=10, expect={0: preferred})
    assert produce(cluster[preferred], "pe", 0, [b"to the preferred leader"]) == 0


def test_auto_leader_rebalance_returns_leadership_by_itself(brokers, zk, zk_connect):
    cluster = start_cluster(brokers, zk, leader_imbalance_check_interval_seconds=1)
    preferred, _ = _lose_and_regain_preferred_leadership(cluster, zk, zk_connect, "ar")
    # A check each second, then a preferred election by the controller: generous on a loaded machine.
    wait_for(lambda: state(zk, "ar", 0)["leader"] == preferred, 15, "the rebalance to move leadership back")
    controller = cluster[zk.controller()]
    assert controller.log_lines(r"Leader imbalance found for brokers .*\[ar,0\]")
    assert zk.stat("/admin/preferred_replica_election") is None


def test_controlled_shutdown_moves_every_leadership_away_before_the_broker_exits(brokers, zk, zk_connect):
    cluster = start_cluster(brokers, zk, auto_leader_rebalance_enable="false")
    controller = zk.controller()
    victim = next(b for b in sorted(cluster) if b != controller)
    others = sorted(set(cluster) - {victim})
    # Half the partitions led by the victim, half followed by it, spread over the two other brokers.
    assignment = ",".join(f"{victim}:{others[p // 2 % 2]}" if p % 2 == 0 else f"{others[p // 2 % 2]}:{victim}"
                          for p in range(6))
    assert tool("topics", "--zookeeper", zk_connect, "--create", "--topic", "cs", "--replica-assignment",
                assignment)[0] == 0
    wait_described(zk_connect, "cs", lambda rows: len(rows) == 6 and all(set(r[2]) == set(r[1])
                                                                          for r in rows.values()), 15, "cs in sync")
    wait_for_leaders(list(cluster.values()), "cs", 6, timeout_s=10)

    seen: list[dict[int, int]] = []  # the leaders, sampled while the broker shuts down
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            seen.append({p: state(zk, "cs", p)["leader"] for p in range(6)})
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        assert cluster[victim].terminate(timeout_s=15) == 0
    finally:
        stop.set()
        sampler.join(5)
    assert cluster[victim].log_lines("Controlled shutdown succeeded")
    assert not any(leader == -1 for sample in seen for leader in sample.values()), \
        "a partition was without a leader during the controlled shutdown"
    # Leadership had moved while the broker was still registered: ZooKeeper's own order says so. The last
    # change of /brokers/ids' children is the victim's registration going away (pzxid); every `state` znode
    # was last written before it (mzxid) -- a leadership still held then would have been moved after it.
    # (A controlled shutdown takes milliseconds: too short for sampling to show the order.)
    deregistered = zk.stat("/brokers/ids").pzxid
    assert cluster[victim].id not in zk.registered()
    for p in range(6):
        assert zk.stat(f"/brokers/topics/cs/partitions/{p}/state").mzxid < deregistered, p
    for p in range(6):
        s = state(zk, "cs", p)
        assert s["leader"] in others and victim not in s["isr"]
    wait_for_leaders([cluster[b] for b in others], "cs", 6, timeout_s=10)


def test_controlled_shutdown_retries_then_gives_up_when_no_other_replica_is_in_sync(brokers, zk, zk_connect):
    cluster = start_cluster(brokers, zk, auto_leader_rebalance_enable="false", controlled_shutdown_max_retries=2)
    controller = zk.controller()
    victim, other = [b for b in sorted(cluster) if b != controller]
    assert tool("topics", "--zookeeper", zk_connect, "--create", "--topic", "cr", "--replica-assignment",
                f"{victim}:{other}")[0] == 0
    wait_described(zk_connect, "cr", lambda rows: rows[0][2] == (victim, other), 15, "in sync")
    cluster[other].kill()
    # Session expiry, then the controller's work: generous on a loaded machine.
    wait_for(lambda: state(zk, "cr", 0)["isr"] == [victim], SESSION_S + 15, "the ISR down to the victim")
    assert cluster[victim].terminate(timeout_s=15) == 0
    log = cluster[victim]
    assert len(log.log_lines(r"Remaining partitions to move: \[cr,0\]")) == 2
    assert len(log.log_lines("Retrying controlled shutdown after the previous attempt failed")) == 1
    assert log.log_lines("Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed")
    assert cluster[controller].log_lines(r"No other replicas in ISR .* besides shutting down brokers")

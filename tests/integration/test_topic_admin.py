"""`zkbroker topics` against real brokers: create / describe / alter / delete round trips, and deletion's retry
when a dead replica's broker returns (issue 4, items 1-3)."""

from __future__ import annotations

import time

import pytest

from tests.integration.admin_support import describe, start_cluster, tool, wait_described
from tests.integration.harness import SESSION_TIMEOUT_MS, wait_for, wait_for_leaders

pytestmark = pytest.mark.integration

SESSION_S = SESSION_TIMEOUT_MS / 1000


def _online(n: int):
    """Every one of n partitions led by its preferred replica with the whole assignment in sync."""
    return lambda rows: len(rows) == n and all(r[0] == r[1][0] and set(r[2]) == set(r[1]) for r in rows.values())


def test_create_describe_alter_and_delete_round_trip_with_deletion_enabled(brokers, zk, zk_connect):
    cluster = start_cluster(brokers, zk, delete_topic_enable="true")
    serving = list(cluster.values())
    zkc = ("topics", "--zookeeper", zk_connect)

    assert tool(*zkc, "--create", "--topic", "rt", "--partitions", "3", "--replication-factor", "2") == (
        0, 'Created topic "rt".\n', "")
    wait_described(zk_connect, "rt", _online(3), 10, "three partitions online")
    wait_for_leaders(serving, "rt", 3, timeout_s=10)

    code, out, err = tool(*zkc, "--alter", "--topic", "rt", "--partitions", "5")
    assert (code, err) == (0, "") and out.endswith("Adding partitions succeeded!\n")
    rows = wait_described(zk_connect, "rt", _online(5), 10, "five partitions online")
    wait_for_leaders(serving, "rt", 5, timeout_s=10)

    version = zk.stat("/brokers/topics/rt").version
    code, _, err = tool(*zkc, "--alter", "--topic", "rt", "--partitions", "4")
    assert code == 1 and err == "zkbroker topics: The number of partitions for a topic can only be increased.\n"
    assert zk.stat("/brokers/topics/rt").version == version and describe(zk_connect, "rt") == rows

    assert tool(*zkc, "--delete", "--topic", "rt") == (0, "Topic rt is marked for deletion.\nNote: This will have "
                                                          "no impact if delete.topic.enable is not set to true.\n", "")
    wait_for(lambda: all(zk.stat(p) is None for p in ("/brokers/topics/rt", "/config/topics/rt",
                                                       "/admin/delete_topics/rt")), 10, "every znode of rt removed")
    wait_for(lambda: not any(b.partition_dir("rt", p).exists() for b in serving for p in range(5)), 10,
             "every log of rt removed from disk")
    assert tool(*zkc, "--list") == (0, "", "")


def test_deletion_waits_for_a_dead_replica_and_completes_when_its_broker_returns(brokers, zk, zk_connect):
    cluster = start_cluster(brokers, zk, delete_topic_enable="true")
    controller = zk.controller()
    victim, other = [b for b in sorted(cluster) if b != controller][:2]
    assert tool("topics", "--zookeeper", zk_connect, "--create", "--topic", "dt",
                "--replica-assignment", f"{other}:{victim}")[0] == 0
    wait_described(zk_connect, "dt", _online(1), 10, "dt online")
    cluster[victim].kill()
    wait_described(zk_connect, "dt", lambda rows: rows[0][2] == (other,), SESSION_S + 15,
                   "the victim out of the ISR")  # session expiry, then the controller's work: generous

    assert tool("topics", "--zookeeper", zk_connect, "--delete", "--topic", "dt")[0] == 0
    wait_for(lambda: not cluster[other].partition_dir("dt", 0).exists(), 10, "the live replica deleted")
    # The controller says so only once it has the live replica's StopReplica answer, after the directory went:
    # wait for its line (a fixed sleep could lose that race on a loaded machine), then check that nothing was deleted.
    wait_for(lambda: cluster[controller].log_lines("Not retrying deletion of topic dt at this time since it is "
                                                   "marked ineligible for deletion"), 10,
             "the controller to hold the deletion back")
    assert zk.stat("/brokers/topics/dt") is not None  # the dead replica holds the deletion back

    assert cluster[victim].partition_dir("dt", 0).exists()
    cluster[victim].start()
    wait_for(lambda: zk.stat("/brokers/topics/dt") is None and zk.stat("/admin/delete_topics/dt") is None,
             SESSION_S + 15, "the deletion to complete once the broker is back")
    wait_for(lambda: not cluster[victim].partition_dir("dt", 0).exists(), 10, "the returning replica deleted")
    # The controller logs its line after deleting the znodes: on a loaded machine a moment later.
    wait_for(lambda: cluster[controller].log_lines("Deletion of topic dt successfully completed"), 10,
             "the controller to say the deletion completed")


def test_with_deletion_disabled_a_deleted_topic_stays_marked_for_deletion(brokers, zk, zk_connect):
    (broker,) = start_cluster(brokers, zk, ids=(1,)).values()
    zkc = ("topics", "--zookeeper", zk_connect)
    assert tool(*zkc, "--create", "--topic", "kept", "--partitions", "1", "--replication-factor", "1")[0] == 0
    wait_for_leaders([broker], "kept", 1, timeout_s=10)
    assert tool(*zkc, "--delete", "--topic", "kept")[1] == ("Topic kept is marked for deletion.\nNote: This will "
                                                            "have no impact if delete.topic.enable is not set to "
                                                            "true.\n")
    time.sleep(1)
    assert tool(*zkc, "--list") == (0, "kept - marked for deletion\n", "")
    assert zk.stat("/brokers/topics/kept") is not None and broker.partition_dir("kept", 0).exists()
    assert wait_for_leaders([broker], "kept", 1, timeout_s=5) == {0: 1}

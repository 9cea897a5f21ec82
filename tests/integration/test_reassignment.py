"""`zkbroker reassign-partitions` against real brokers (issue 4, item 8): replicas move, the data follows, the
old replicas are deleted; a malformed `/admin/reassign_partitions` is logged and removed."""

from __future__ import annotations

import json

import pytest

from tests.integration.admin_support import fetch_values, produce, start_cluster, state, tool, wait_described
from tests.integration.harness import wait_for, wait_for_leaders

pytestmark = pytest.mark.integration


def test_reassignment_moves_replicas_and_the_data_follows(brokers, zk, zk_connect, tmp_path):
    cluster = start_cluster(brokers, zk, auto_leader_rebalance_enable="false")
    assert tool("topics", "--zookeeper", zk_connect, "--create", "--topic", "ra", "--replica-assignment",
                "1,2")[0] == 0
    wait_for_leaders(list(cluster.values()), "ra", 2, timeout_s=10)
    values = {p: [b"ra-%d-%03d" % (p, i) for i in range(200)] for p in (0, 1)}
    for p, leader in ((0, 1), (1, 2)):
        assert produce(cluster[leader], "ra", p, values[p]) == 0

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "ra", "partition": 0, "replicas": [2, 3]},
                                                             {"topic": "ra", "partition": 1, "replicas": [3]}]}))
    code, out, err = tool("reassign-partitions", "--zookeeper", zk_connect, "--execute",
                          "--reassignment-json-file", str(plan))
    assert (code, err) == (0, "") and "Successfully started reassignment of partitions" in out

    def verified():
        return tool("reassign-partitions", "--zookeeper", zk_connect, "--verify", "--reassignment-json-file",
                    str(plan))[1]
    wait_for(lambda: verified().count("completed successfully") == 2, 20, "both reassignments to complete")
    assert zk.stat("/admin/reassign_partitions") is None
    rows = wait_described(zk_connect, "ra", lambda rows: set(rows[0][2]) == {2, 3} and rows[1][2] == (3,), 10,
                          "the new ISRs")
    assert (rows[0][0], rows[0][1], rows[1][:2]) == (2, (2, 3), (3, (3,)))
    assert json.loads(zk.get("/brokers/topics/ra"))["partitions"] == {"0": [2, 3], "1": [3]}

    # The data followed: the new leaders serve every message, every new replica holds the whole log ...
    wait_for_leaders(list(cluster.values()), "ra", 2, timeout_s=10, expect={0: 2, 1: 3})
    assert fetch_values(cluster[2], "ra", 0) == (0, values[0])
    assert fetch_values(cluster[3], "ra", 1) == (0, values[1])
    size = sum(f.stat().st_size for f in cluster[2].segment_files("ra", 0))
    wait_for(lambda: sum(f.stat().st_size for f in cluster[3].segment_files("ra", 0)) == size, 10,
             "the follower's copy of [ra,0]")
    # ... and the old replicas are gone from disk.
    wait_for(lambda: not cluster[1].partition_dir("ra", 0).exists() and not cluster[2].partition_dir("ra", 1).exists(),
             10, "the old replicas deleted")
    assert state(zk, "ra", 0)["leader_epoch"] >= 2
    assert produce(cluster[2], "ra", 0, [b"after the move"]) == 0


def test_malformed_reassignment_data_is_logged_and_removed_and_the_controller_keeps_working(brokers, zk,
                                                                                             zk_connect):
    (broker,) = start_cluster(brokers, zk, ids=(1,)).values()
    zk.client.create("/admin/reassign_partitions", b'{"version":1,"partitions":[{"topic":"x"', makepath=True)
    wait_for(lambda: zk.stat("/admin/reassign_partitions") is None, 10, "the unreadable node removed")
    assert broker.log_lines(r"ERROR \[Controller 1\]: Ignoring unreadable /admin/reassign_partitions and deleting "
                            r"it: .* is not JSON")
    assert tool("topics", "--zookeeper", zk_connect, "--create", "--topic", "ok", "--partitions", "1",
                "--replication-factor", "1")[0] == 0
    wait_for_leaders([broker], "ok", 1, timeout_s=10)

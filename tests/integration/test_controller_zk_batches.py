"""The controller's batched ZooKeeper access against a real server: many-node reads (multiRead, and the pipelined
reads older servers get) and fenced multi() batches whose failing operations are reported node by node while
the rest of each batch is committed."""

from __future__ import annotations

import pytest
from kazoo.exceptions import NodeExistsError, NoNodeError

from controller.election import ControllerMovedError
from controller.zk_writes import BATCH_OPS, FencedWriter
from zkbroker.zk import paths
from zkbroker.zk.client import MULTI_READ_CHUNK, ZkClient

pytestmark = pytest.mark.integration


@pytest.fixture
def client(zk_connect):
    zk = ZkClient(zk_connect, session_timeout_ms=3000, name="test")
    zk.start()
    zk.ensure_path("/n")
    zk.kazoo.create(paths.CONTROLLER_EPOCH, b"1")
    yield zk
    zk.close()


def test_many_node_reads_answer_in_order_with_missing_nodes_as_none_by_both_paths(client):
    count = MULTI_READ_CHUNK + 7  # more than one multiRead request
    tx = client.kazoo.transaction()
    for i in range(count):
        tx.create(f"/n/{i}", b"v%d" % i)
    tx.commit()
    client.kazoo.set("/n/3", b"again")
    wanted = [f"/n/{i}" for i in range(count)] + ["/n/missing", "/n/0"]
    multi = client.get_many(wanted)
    assert client._multi_read_support  # the lab's ZooKeeper (3.8) answers multiRead
    client._multi_read_support = False
    pipelined = client.get_many(wanted)
    for found in (multi, pipelined):
        assert [data for data, _ in found] == [b"v0", b"v1", b"v2", b"again"] + [b"v%d" % i for i in range(4, count)] \
            + [None, b"v0"]
        assert found[3][1].version == 1 and found[4][1].version == 0 and found[-2][1] is None
    assert client.get_many([]) == []


def test_a_stale_version_fails_only_its_own_node_and_the_rest_of_the_batch_is_committed(client):
    count = BATCH_OPS + 10  # two multi() batches
    tx = client.kazoo.transaction()
    for i in range(count):
        tx.create(f"/n/{i}", b"0")
    tx.commit()
    client.kazoo.set("/n/5", b"moved on")  # version 1: a write expecting 0 must fail
    client.kazoo.set(f"/n/{BATCH_OPS + 3}", b"moved on")
    client.kazoo.delete("/n/7")
    writer = FencedWriter(client, client.kazoo.exists(paths.CONTROLLER_EPOCH).version)
    versions = writer.set_many([(f"/n/{i}", b"1", 0) for i in range(count)])
    assert [i for i, v in enumerate(versions) if v is None] == [5, 7, BATCH_OPS + 3]
    assert all(v == 1 for i, v in enumerate(versions) if i not in (5, 7, BATCH_OPS + 3))
    assert client.kazoo.get("/n/5")[0] == b"moved on" and client.kazoo.get("/n/6")[0] == b"1"
    assert writer.writes == count - 3


def test_creates_report_an_existing_node_alone_and_create_the_others_with_their_parents(client):
    client.kazoo.create("/n/b/state", b"old", makepath=True)
    writer = FencedWriter(client, client.kazoo.exists(paths.CONTROLLER_EPOCH).version)
    results = writer.create_many([("/n/a/state", b"a", ["/n/a"]), ("/n/b/state", b"b", ["/n/b"]),
                                  ("/n/c/state", b"c", ["/n/c"]), ("/n/none/x/state", b"d", [])])
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], NodeExistsError) and isinstance(results[3], NoNodeError)
    assert client.kazoo.get("/n/c/state")[0] == b"c" and client.kazoo.get("/n/b/state")[0] == b"old"


def test_batches_of_a_replaced_controller_change_nothing(client):
    tx = client.kazoo.transaction()
    for i in range(10):
        tx.create(f"/n/{i}", b"0")
    tx.commit()
    writer = FencedWriter(client, client.kazoo.exists(paths.CONTROLLER_EPOCH).version)
    client.kazoo.set(paths.CONTROLLER_EPOCH, b"2")  # another controller took over
    with pytest.raises(ControllerMovedError):
        writer.set_many([(f"/n/{i}", b"1", 0) for i in range(10)])
    with pytest.raises(ControllerMovedError):
        writer.create_many([("/n/new", b"x", [])])
    assert all(client.kazoo.get(f"/n/{i}")[0] == b"0" for i in range(10))
    assert client.kazoo.exists("/n/new") is None

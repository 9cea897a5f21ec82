"""Leader and controller failover with real brokers (issue 4, items 4 and 5): new leaders come from the ISR,
unclean election on and off as 0.8.2, brokers ignore older controller epochs, and a replaced controller cannot
write to ZooKeeper."""

from __future__ import annotations

import json
import time

import pytest

from controller.election import ControllerMovedError
from controller.zk_writes import FencedWriter
from tests.integration.admin_support import describe, produce, start_cluster, state, tool, wait_described
from tests.integration.harness import SESSION_TIMEOUT_MS, wait_for, wait_for_leaders
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode
from zkbroker.zk.client import ZkClient

pytestmark = pytest.mark.integration

SESSION_S = SESSION_TIMEOUT_MS / 1000


def test_every_partition_of_a_killed_leader_gets_a_new_leader_from_its_isr(brokers, zk, zk_connect):
    cluster = start_cluster(brokers, zk, auto_leader_rebalance_enable="false")
    controller = zk.controller()
    victim = next(b for b in sorted(cluster) if b != controller)
    others = sorted(set(cluster) - {victim})
    # Four partitions over all three brokers, two of them led by the victim.
    assignment = f"{victim}:{others[0]}:{others[1]},{others[0]}:{victim}:{others[1]}," \
                 f"{victim}:{others[1]}:{others[0]},{others[1]}:{others[0]}:{victim}"
    assert tool("topics", "--zookeeper", zk_connect, "--create", "--topic", "kl", "--replica-assignment",
                assignment)[0] == 0
    before = wait_described(zk_connect, "kl", lambda rows: len(rows) == 4 and all(len(r[2]) == 3
                                                                                  for r in rows.values()),
                            15, "every replica in sync")
    assert [p for p, r in before.items() if r[0] == victim] == [0, 2]
    survivors = [cluster[b] for b in others]
    wait_for_leaders(survivors, "kl", 4, timeout_s=10)
    assert produce(survivors[0], "kl", 1, [b"before"]) == 0

    cluster[victim].kill()
    # Session expiry, then the controller's work: generous on a loaded machine (this proves behaviour, not speed).
    after = wait_described(zk_connect, "kl", lambda rows: all(r[0] != victim and victim not in r[2]
                                                              for r in rows.values()),
                           SESSION_S + 15, "new leaders from the ISR")
    for partition, (leader, replicas, isr) in after.items():
        assert leader in before[partition][2] and leader == next(r for r in replicas if r in isr)
    assert after[1][0] == before[1][0]  # partitions the victim followed keep their leader
    wait_for_leaders(survivors, "kl", 4, timeout_s=10, expect={p: r[0] for p, r in after.items()})
    for partition in range(4):  # producing goes on, to the new leaders
        leader = cluster[after[partition][0]]
        assert produce(leader, "kl", partition, [b"after"]) == 0


def test_unclean_election_on_elects_an_out_of_sync_replica_and_off_keeps_the_partition_offline(brokers, zk,
                                                                                               zk_connect):
    cluster = start_cluster(brokers, zk, auto_leader_rebalance_enable="false")
    controller = zk.controller()
    first, second = [b for b in sorted(cluster) if b != controller]
    zkc = ("topics", "--zookeeper", zk_connect, "--create", "--replica-assignment", f"{first}:{second}")
    assert tool(*zkc, "--topic", "dirty")[0] == 0  # 0.8.2's default: unclean election on
    assert tool(*zkc, "--topic", "clean", "--config", "unclean.leader.election.enable=false")[0] == 0
    for topic in ("dirty", "clean"):
        wait_described(zk_connect, topic, lambda rows: rows[0][2] == (first, second), 15, f"{topic} in sync")

    cluster[second].kill()  # the follower drops out of the ISR ...
    for topic in ("dirty", "clean"):
        # Session expiry, then the controller's work: generous on a loaded machine.
        wait_described(zk_connect, topic, lambda rows: rows[0][2] == (first,), SESSION_S + 15, "ISR shrunk")
    cluster[first].kill()  # ... then the last ISR member dies
    wait_for(lambda: state(zk, "dirty", 0)["leader"] == -1 and state(zk, "clean", 0)["leader"] == -1,
             SESSION_S + 15, "both partitions without a leader")
    assert state(zk, "clean", 0)["isr"] == [first]  # kept, so that only it may lead again

    cluster[second].start()
    wait_for(lambda: state(zk, "dirty", 0)["leader"] == second, SESSION_S + 15, "the out-of-sync replica to lead")
    assert state(zk, "dirty", 0)["isr"] == [second]
    wait_for(lambda: cluster[controller].log_lines(rf"No broker in ISR is alive for \[dirty,0\]. Elect leader "
                                                   rf"{second} from live brokers .*There's potential data loss."),
             5, "the unclean election warning")
    time.sleep(1)
    assert (state(zk, "clean", 0)["leader"], state(zk, "clean", 0)["isr"]) == (-1, [first])
    assert describe(zk_connect, "clean")[0][0] == -1

    cluster[first].start()
    wait_for(lambda: state(zk, "clean", 0)["leader"] == first, SESSION_S + 15, "the last ISR member to lead again")


def _send(broker, api_key: int, body: dict):
    with broker.connection() as conn:
        return conn.send(api_key, 0, body)


def test_brokers_ignore_requests_from_an_older_controller_epoch(brokers, zk, zk_connect):
    cluster = start_cluster(brokers, zk, ids=(1, 2), auto_leader_rebalance_enable="false")
    old = zk.controller()
    survivor = cluster[next(b for b in cluster if b != old)]
    assert tool("topics", "--zookeeper", zk_connect, "--create", "--topic", "ep", "--replica-assignment",
                str(survivor.id))[0] == 0
    wait_for_leaders([survivor], "ep", 1, timeout_s=10)
    cluster[old].kill()
    # Session expiry, then a whole failover: generous on a loaded machine.
    wait_for(lambda: zk.epoch() == 2 and survivor.log_lines("ready to serve as the new controller with epoch 2"),
             SESSION_S + 15, "the survivor to become controller with epoch 2")
    # The survivor's broker side learns epoch 2 only from a request of the new controller (sent to itself too).
    wait_for(lambda: survivor.log_lines(r"from controller \d+ epoch 2"), 10,
             "the survivor to receive a request of epoch 2")
    s = state(zk, "ep", 0)
    stale = {"controller_id": old, "controller_epoch": 1}
    partition_state = {"topic": "ep", "partition": 0, "controller_epoch": 1, "leader": old,
                       "leader_epoch": s["leader_epoch"] + 5, "isr": [old], "zk_version": 9, "replicas": [old]}
    response = _send(survivor, ApiKey.LEADER_AND_ISR, {**stale, "partition_states": [partition_state],
                                                       "live_leaders": []})
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    response = _send(survivor, ApiKey.UPDATE_METADATA, {**stale, "partition_states": [partition_state],
                                                        "live_brokers": []})
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    response = _send(survivor, ApiKey.STOP_REPLICA, {**stale, "delete_partitions": True,
                                                     "partitions": [{"topic": "ep", "partition": 0}]})
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert survivor.partition_dir("ep", 0).exists()
    assert wait_for_leaders([survivor], "ep", 1, timeout_s=5) == {0: survivor.id}
    assert produce(survivor, "ep", 0, [b"still served"]) == 0


def test_fenced_writer_of_a_replaced_controller_writes_nothing(zk, zk_connect):
    """Every controller write is a multi() checking /controller_epoch's version (beyond 0.8.2, as Kafka 2.1)."""
    zk.client.create("/controller_epoch", b"1")
    zk.client.create("/brokers/topics/t/partitions/0/state", b"{}", makepath=True)
    client = ZkClient(zk_connect, SESSION_TIMEOUT_MS, name="fence-test")
    client.start()
    try:
        writer = FencedWriter(client, epoch_zk_version=0)
        # A zkVersion mismatch of the node itself is a plain "no" (0.8.2's conditional update), not a fence.
        assert writer.set("/brokers/topics/t/partitions/0/state", b"{}", expected_version=5) is None
        assert writer.set("/brokers/topics/t/partitions/0/state", b'{"a":1}', expected_version=0) == 1
        zk.client.set("/controller_epoch", b"2")  # another controller took over
        before = {p: zk.stat(p).version for p in ("/brokers/topics/t", "/brokers/topics/t/partitions/0/state")}
        for attempt in (lambda: writer.set("/brokers/topics/t/partitions/0/state", b"{}", 1),
                        lambda: writer.create("/brokers/topics/t/partitions/1", b""),
                        lambda: writer.delete("/brokers/topics/t/partitions/0/state"),
                        lambda: writer.upsert("/admin/reassign_partitions", b"{}"),
                        lambda: writer.delete_recursive(["/brokers/topics/t"])):
            with pytest.raises(ControllerMovedError):
                attempt()
        assert {p: zk.stat(p).version for p in before} == before
        assert zk.stat("/brokers/topics/t/partitions/1") is None and zk.stat("/admin/reassign_partitions") is None
    finally:
        client.close()


def test_paused_controller_changes_nothing_in_zookeeper_after_it_resumes(brokers, zk, zk_connect):
    cluster = start_cluster(brokers, zk, auto_leader_rebalance_enable="false")
    old = zk.controller()
    others = sorted(set(cluster) - {old})
    assert tool("topics", "--zookeeper", zk_connect, "--create", "--topic", "zz", "--replica-assignment",
                f"{old}:{others[0]},{others[0]}:{others[1]},{others[1]}:{old}")[0] == 0
    wait_described(zk_connect, "zz", lambda rows: len(rows) == 3 and all(len(r[2]) == 2 for r in rows.values()), 15,
                   "zz in sync")
    # The ISRs above are the controller's first write: it logs its decisions ("Controller N epoch 1 changed
    # partition ...") and sends LeaderAndIsr only after it. Wait for every broker to serve the leaders, so that no
    # decision of epoch 1 is still being logged when the pause lands (the check of late epoch-1 lines below).
    wait_for_leaders(list(cluster.values()), "zz", 3)
    cluster[old].pause()
    try:
        new = wait_for(lambda: (c := zk.controller()) not in (None, old) and c, SESSION_S + 10, "a new controller")
        wait_for(lambda: cluster[new].log_lines("ready to serve as the new controller with epoch 2"), 10,
                 "the new controller's failover")
        wait_for(lambda: all(state(zk, "zz", p)["leader"] != old for p in range(3)), 10, "new leaders")
        watched = ["/controller_epoch", "/brokers/topics/zz", "/config/topics/zz"]
        before = {p: zk.stat(p).mzxid for p in watched}
        states_before = {p: zk.stat(f"/brokers/topics/zz/partitions/{p}/state").mzxid for p in range(3)}
    finally:
        cluster[old].resume()
    # It may first try to confirm its session for up to the session timeout + 2 s (controller.py): generous.
    wait_for(lambda: cluster[old].log_lines(rf"Broker {old} resigned as the controller"), 20, "the zombie to resign")
    wait_for(lambda: zk.registered() == set(cluster), SESSION_S + 10, "the old controller back as a broker")
    time.sleep(1)
    assert {p: zk.stat(p).mzxid for p in watched} == before
    assert zk.epoch() == 2 and zk.controller() == new
    for p in range(3):  # a state written since the resume carries the new controller's epoch
        changed = zk.stat(f"/brokers/topics/zz/partitions/{p}/state").mzxid != states_before[p]
        assert not changed or state(zk, "zz", p)["controller_epoch"] == 2
    epoch_2_began = cluster[new].log_lines("incremented epoch to 2")[0][:25]
    assert not [line for line in cluster[old].log_lines(rf"Controller {old} epoch 1 ") if line[:25] > epoch_2_began]
    assert json.loads(zk.get("/brokers/topics/zz"))["partitions"] == {"0": [old, others[0]],
                                                                      "1": [others[0], others[1]],
                                                                      "2": [others[1], old]}


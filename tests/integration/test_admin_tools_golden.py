"""Every output format of the admin tools against golden files, byte for byte as Kafka 0.8.2's tools print it
(reference ecosystem-and-style §A3, TopicCommand / PreferredReplicaLeaderElectionCommand /
ReassignPartitionsCommand @0.8.2.2). The znodes are written directly in a real ZooKeeper (no brokers), so every
leader and ISR is fixed. Set ZKBROKER_UPDATE_GOLDEN=1 to rewrite the golden files."""

from __future__ import annotations

import functools
import json
import os
import random
from pathlib import Path

import pytest

from zkbroker import admin
from zkbroker.cli import main

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).parent / "golden"


def assert_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("ZKBROKER_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def put(zk, path: str, value) -> None:
    data = value if isinstance(value, bytes) else json.dumps(value, separators=(",", ":")).encode()
    zk.client.create(path, data, makepath=True)


def state(zk, topic: str, partition: int, leader: int, isr: list[int]) -> None:
    put(zk, f"/brokers/topics/{topic}/partitions/{partition}/state",
        {"version": 1, "leader": leader, "leader_epoch": 0, "controller_epoch": 1, "isr": isr})


@pytest.fixture
def cluster(zk, zk_connect):
    """Brokers 1-3 registered; topic foo (3 partitions, one under-replicated, one without a live leader, one
    never elected), bar (overrides), baz (marked for deletion)."""
    for b in (1, 2, 3):
        put(zk, f"/brokers/ids/{b}", {"version": 1, "host": "127.0.0.1", "port": 9090 + b, "jmx_port": -1,
                                       "timestamp": "1"})
    put(zk, "/admin/delete_topics", b"")
    put(zk, "/config/changes", b"")
    for topic, partitions, config in (("foo", {"0": [1, 2], "1": [2, 4], "2": [3, 1], "3": [4, 1]}, {}),
                                      ("bar", {"0": [3, 2]}, {"retention.ms": "1000", "segment.bytes": "4096"}),
                                      ("baz", {"0": [1]}, {})):
        put(zk, f"/config/topics/{topic}", {"version": 1, "config": config})
        put(zk, f"/brokers/topics/{topic}", {"version": 1, "partitions": partitions})
    state(zk, "foo", 0, 1, [1, 2])
    state(zk, "foo", 1, 2, [2])
    state(zk, "foo", 3, -1, [4])
    state(zk, "bar", 0, 3, [3, 2])
    state(zk, "baz", 0, 1, [1])
    put(zk, "/admin/delete_topics/baz", b"")
    return zk_connect


def test_topics_list_and_describe_formats(cluster, capsys):
    outputs = {
        "topics_list.txt": ["--list"],
        "topics_list_filtered.txt": ["--list", "--topic", "ba.*"],
        "topics_describe.txt": ["--describe"],
        "topics_describe_topic.txt": ["--describe", "--topic", "foo,bar"],
        "topics_describe_under_replicated.txt": ["--describe", "--under-replicated-partitions"],
        "topics_describe_unavailable.txt": ["--describe", "--unavailable-partitions"],
        "topics_describe_with_overrides.txt": ["--describe", "--topics-with-overrides"],
    }
    for golden, args in outputs.items():
        code, out, err = run(capsys, "topics", "--zookeeper", cluster, *args)
        assert (code, err) == (0, ""), golden
        assert_golden(golden, out)


def test_topics_create_alter_delete_messages(cluster, zk, capsys):
    transcript = []
    for args in (["--create", "--topic", "new", "--replica-assignment", "1:2,2:3", "--config", "retention.ms=5"],
                 ["--alter", "--topic", "new", "--config", "segment.bytes=8192", "--delete-config", "retention.ms"],
                 ["--alter", "--topic", "new", "--partitions", "3", "--replica-assignment", "3:1"],
                 ["--delete", "--topic", "new"],
                 ["--delete", "--topic", "new"]):
        code, out, err = run(capsys, "topics", "--zookeeper", cluster, *args)
        assert (code, err) == (0, "")
        transcript.append(out)
    assert_golden("topics_create_alter_delete.txt", "".join(transcript))
    assert json.loads(zk.get("/brokers/topics/new")) == {"version": 1, "partitions": {"0": [1, 2], "1": [2, 3],
                                                                                         "2": [3, 1]}}
    assert json.loads(zk.get("/config/topics/new")) == {"version": 1, "config": {"segment.bytes": "8192"}}
    assert [json.loads(zk.get(f"/config/changes/{c}")) for c in zk.children("/config/changes")] == ["new"]
    assert zk.get("/admin/delete_topics/new") == b""


def test_topics_refusals_change_nothing(cluster, zk, capsys):
    before = zk.get("/brokers/topics/foo")
    code, out, err = run(capsys, "topics", "--zookeeper", cluster, "--alter", "--topic", "foo", "--partitions", "4")
    assert code == 1
    assert out == admin_warning()
    assert err == "zkbroker topics: The number of partitions for a topic can only be increased.\n"
    code, _, err = run(capsys, "topics", "--zookeeper", cluster, "--alter", "--topic", "foo", "--partitions", "2")
    assert code == 1 and "can only be increased" in err
    code, out, err = run(capsys, "topics", "--zookeeper", cluster, "--create", "--topic", "foo", "--partitions", "1",
                         "--replication-factor", "1")
    assert (code, out, err) == (1, "", 'zkbroker topics: Topic "foo" already exists.\n')
    code, out, err = run(capsys, "topics", "--zookeeper", cluster, "--create", "--topic", "big", "--partitions", "1",
                         "--replication-factor", "4")
    assert (code, out) == (1, "")
    assert err == "zkbroker topics: replication factor: 4 larger than available brokers: 3.\n"
    assert zk.stat("/brokers/topics/big") is None and zk.stat("/config/topics/big") is None
    for action, message in (("--describe", "Topic nope doesn't exist!"), ("--alter", "Topic nope does not exist."),
                            ("--delete", "Topic nope does not exist.")):
        extra = ["--partitions", "9"] if action == "--alter" else []
        code, out, err = run(capsys, "topics", "--zookeeper", cluster, action, "--topic", "nope", *extra)
        assert (code, out, err) == (1, "", f"zkbroker topics: {message}\n")
    assert zk.get("/brokers/topics/foo") == before


def admin_warning() -> str:
    from zkbroker.tools.topics import PARTITIONS_WARNING
    return PARTITIONS_WARNING + "\n"


def test_preferred_replica_election_output_and_node(cluster, zk, tmp_path, capsys):
    election = tmp_path / "election.json"
    election.write_text(json.dumps({"partitions": [{"topic": "foo", "partition": 1}, {"topic": "foo", "partition": 0},
                                                   {"topic": "nope", "partition": 0}]}))
    code, out, err = run(capsys, "preferred-replica-election", "--zookeeper", cluster, "--path-to-json-file",
                         str(election))
    assert code == 0
    assert err == "Skipping preferred replica leader election for partition [nope,0] since topic nope doesn't exist\n"
    assert_golden("preferred_replica_election.txt", out)
    assert zk.get("/admin/preferred_replica_election") == (
        b'{"version":1,"partitions":[{"topic":"foo","partition":0},{"topic":"foo","partition":1}]}')
    code, out, err = run(capsys, "preferred-replica-election", "--zookeeper", cluster)
    assert (code, out) == (1, "")
    assert err == ("zkbroker preferred-replica-election: Failed to start preferred replica election: Preferred "
                   "replica leader election currently in progress for Set([foo,0], [foo,1]). Aborting operation.\n")


def test_preferred_replica_election_of_every_partition(cluster, zk, capsys):
    code, out, _ = run(capsys, "preferred-replica-election", "--zookeeper", cluster)
    assert code == 0
    assert out == "Successfully started preferred replica election for partitions Set([bar,0], [baz,0], [foo,0], " \
                  "[foo,1], [foo,3])\n"


def test_reassign_partitions_generate_execute_verify_outputs(cluster, zk, tmp_path, capsys, monkeypatch):
    # --generate's proposal is random, as in 0.8.2; fix the draw.
    monkeypatch.setattr(admin, "assign_replicas_to_brokers",
                        functools.partial(admin.assign_replicas_to_brokers, rng=random.Random(7)))
    move = tmp_path / "move.json"
    move.write_text('{"topics":[{"topic":"foo"},{"topic":"bar"}],"version":1}')
    code, out, err = run(capsys, "reassign-partitions", "--zookeeper", cluster, "--generate",
                         "--topics-to-move-json-file", str(move), "--broker-list", "3,1,2")
    assert (code, err) == (0, "")
    assert_golden("reassign_generate.txt", out)

    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[2,3]},'
                    '{"topic":"bar","partition":0,"replicas":[3,2]},{"topic":"foo","partition":9,"replicas":[1]}]}')
    code, out, err = run(capsys, "reassign-partitions", "--zookeeper", cluster, "--execute",
                         "--reassignment-json-file", str(plan))
    assert code == 0
    assert err == "Skipping reassignment of partition [foo,9] since it doesn't exist\n"
    assert_golden("reassign_execute.txt", out)
    assert zk.get("/admin/reassign_partitions") == (
        b'{"version":1,"partitions":[{"topic":"bar","partition":0,"replicas":[3,2]},'
        b'{"topic":"foo","partition":0,"replicas":[2,3]}]}')
    code, out, err = run(capsys, "reassign-partitions", "--zookeeper", cluster, "--execute",
                         "--reassignment-json-file", str(plan))
    assert code == 1 and err.endswith("Partition reassignment currently in progress for Set([bar,0], [foo,0]). "
                                      "Aborting operation.\n")

    code, out, err = run(capsys, "reassign-partitions", "--zookeeper", cluster, "--verify",
                         "--reassignment-json-file", str(plan))
    assert (code, err) == (0, "")
    assert_golden("reassign_verify_in_progress.txt", out)
    zk.client.delete("/admin/reassign_partitions")
    code, out, err = run(capsys, "reassign-partitions", "--zookeeper", cluster, "--verify",
                         "--reassignment-json-file", str(plan))
    assert (code, err) == (0, "")
    assert_golden("reassign_verify_done.txt", out)

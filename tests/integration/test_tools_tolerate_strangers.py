"""Tools that tolerate strangers: with foreign and unreadable znodes written beside a real topic and group
(another client's owner znode named `b'peers'`, non-JSON data, a non-integer partition id, a partition
child that is not a number), every tool that lists znodes skips each stranger with one warning line on
stderr naming it, and shows everything else, exiting 0."""

from __future__ import annotations

import json

import pytest

from tests.integration.harness import create_topic
from tests.integration.test_console_tools import zkbroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

GROUP = "billing"
PEERS = "b'peers'"  # what a client that formatted bytes with str() wrote as a name


@pytest.fixture
def strangers(zk, zk_connect, brokers):
    """A real topic `real` (2 partitions) consumed by a group, among strangers; returns their paths."""
    (broker,) = brokers(1)
    create_topic(zk_connect, "real", 2, 1, [broker])
    client = zk.client
    group = f"/consumers/{GROUP}"
    client.create(f"{group}/owners/real/0", b"billing_host-1-0", makepath=True)
    client.create(f"{group}/offsets/real/0", b"0", makepath=True)
    client.create(f"{group}/offsets/real/1", b"not a number", makepath=True)
    stranger = {
        "owner": f"{group}/owners/{PEERS}",
        "offset": f"{group}/offsets/real/1",
        "topic name": f"/brokers/topics/{PEERS}",
        "garbled topic": "/brokers/topics/garbled",
        "half topic": "/brokers/topics/halfway",
        "partition child": f"/brokers/topics/real/partitions/{PEERS}",
    }
    client.create(stranger["owner"], b"\xff\xfe", makepath=True)
    client.create(stranger["topic name"], b"{}")
    client.create(stranger["garbled topic"], b"\x00 not json")
    client.create(stranger["half topic"], json.dumps({"version": 1, "partitions": {"0": [1], "x": [1]}}).encode())
    client.create(stranger["partition child"], b"")
    return zk_connect, stranger


def warnings_about(stderr: bytes) -> dict[str, str]:
    """{znode path: the one warning line naming it}."""
    out = {}
    for line in stderr.decode(errors="replace").splitlines():
        assert line.startswith("WARNING: skipping znode "), line
        path = line.removeprefix("WARNING: skipping znode ").split(": ", 1)[0]
        out[path] = line
    return out


def test_offset_checker_skips_the_foreign_owner_and_shows_the_group(strangers):
    zk_connect, stranger = strangers
    done = zkbroker("consumer-offset-checker", "--zookeeper", zk_connect, "--group", GROUP)
    assert done.returncode == 0, done.stderr
    assert set(warnings_about(done.stderr)) == {stranger["owner"], stranger["offset"]}
    rows = [line.split() for line in done.stdout.decode().splitlines()[1:]]
    assert [row[:4] for row in rows] == [[GROUP, "real", "0", "0"], [GROUP, "real", "1", "unknown"]]
    assert rows[0][-1] == "billing_host-1-0" and rows[1][-1] == "none"


def test_topics_list_skips_a_foreign_name_and_lists_the_rest(strangers):
    zk_connect, stranger = strangers
    done = zkbroker("topics", "--zookeeper", zk_connect, "--list")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().split() == ["garbled", "halfway", "real"]
    assert set(warnings_about(done.stderr)) == {stranger["topic name"]}


def test_topics_describe_skips_unreadable_topics_and_partitions_and_describes_the_rest(strangers):
    zk_connect, stranger = strangers
    done = zkbroker("topics", "--zookeeper", zk_connect, "--describe")
    assert done.returncode == 0, done.stderr
    warned = warnings_about(done.stderr)
    assert set(warned) == {stranger["topic name"], stranger["garbled topic"], stranger["half topic"]}
    assert "'x'" in warned[stranger["half topic"]]
    lines = done.stdout.decode().splitlines()
    assert [line.split("\t")[0] for line in lines if not line.startswith("\t")] == ["Topic:halfway", "Topic:real"]
    described = [line.split("\t")[1:3] for line in lines if line.startswith("\t")]
    assert described == [["Topic: halfway", "Partition: 0"], ["Topic: real", "Partition: 0"],
                         ["Topic: real", "Partition: 1"]]


def test_preferred_replica_election_skips_a_partition_child_that_is_not_a_number(strangers):
    zk_connect, stranger = strangers
    done = zkbroker("preferred-replica-election", "--zookeeper", zk_connect)
    assert done.returncode == 0, done.stderr
    assert set(warnings_about(done.stderr)) == {stranger["topic name"], stranger["partition child"]}
    assert "[real,0], [real,1]" in done.stdout.decode()


def test_reassign_generate_skips_an_unreadable_partition_and_proposes_the_rest(strangers, tmp_path):
    zk_connect, stranger = strangers
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "halfway"}, {"topic": "real"}]}))
    done = zkbroker("reassign-partitions", "--zookeeper", zk_connect, "--generate",
                    "--topics-to-move-json-file", str(topics), "--broker-list", "1")
    assert done.returncode == 0, done.stderr
    assert set(warnings_about(done.stderr)) == {stranger["half topic"]}
    current = json.loads(done.stdout.decode().split("\n\n")[1].splitlines()[0])
    assert sorted((p["topic"], p["partition"]) for p in current["partitions"]) == [
        ("halfway", 0), ("real", 0), ("real", 1)]

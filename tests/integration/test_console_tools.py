"""The console tools and the offset checker against real brokers, byte for byte against golden files (set
ZKBROKER_UPDATE_GOLDEN=1 to rewrite them): console-producer into console-consumer, 0.8.2's offset checker
columns with and without an owner, lag draining to 0 while a consumer works, and errors for an unknown group or
topic."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.integration.consumers import ROOT, ConsumerProcess, read_values
from tests.integration.harness import create_topic, wait_for
from tests.integration.test_admin_tools_golden import assert_golden
from zkbroker.client.producer import Producer

pytestmark = pytest.mark.integration


def zkbroker(*argv: str, stdin: bytes = b"", timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zkbroker", *argv], input=stdin, capture_output=True,
                          timeout=timeout, cwd=ROOT)


def test_console_producer_into_console_consumer(tmp_path, zk, zk_connect, brokers):
    (broker,) = brokers(1)
    create_topic(zk_connect, "lines", 1, 1, [broker])
    produced = zkbroker("console-producer", "--broker-list", broker.bootstrap, "--topic", "lines",
                        "--request-required-acks", "1", "--property", "parse.key=true", "--sync",
                        stdin=b"k1\tfirst line\nk2\tsecond\tline\n\tno key\n")
    assert (produced.returncode, produced.stderr) == (0, b"")
    plain = zkbroker("console-producer", "--broker-list", broker.bootstrap, "--topic", "lines",
                     "--request-required-acks", "1", stdin=b"unkeyed\r\n")
    assert plain.returncode == 0

    consumed = zkbroker("console-consumer", "--zookeeper", zk_connect, "--topic", "lines", "--from-beginning",
                        "--max-messages", "4", "--property", "print.key=true", "--property", "key.separator=|")
    assert consumed.returncode == 0, consumed.stderr
    assert_golden("console_consumer_print_key.txt", consumed.stdout.decode())
    assert consumed.stderr.decode().splitlines()[-1] == "Consumed 4 messages"
    assert not zk.children("/consumers"), "a generated group's znodes are deleted at exit"

    again = zkbroker("console-consumer", "--zookeeper", zk_connect, "--topic", "lines", "--from-beginning",
                     "--group", "named", "--max-messages", "4")
    assert again.stdout == b"first line\nsecond\tline\nno key\nunkeyed\n"
    assert zk.get("/consumers/named/offsets/lines/0") == b"4"
    refused = zkbroker("console-consumer", "--zookeeper", zk_connect, "--topic", "lines", "--from-beginning",
                       "--group", "named", "--max-messages", "1")
    assert refused.returncode == 1
    assert b"Found previous offset information for this group named. Please use --delete-consumer-offsets" \
        in refused.stderr
    bad = zkbroker("console-producer", "--broker-list", broker.bootstrap, "--topic", "lines", "--property",
                   "parse.key=true", stdin=b"k\tv\nnovalue\n")
    assert bad.returncode == 1
    assert bad.stderr.decode().strip() == "zkbroker console-producer: No key found on line 2: novalue."


def checker(zk_connect: str, group: str, *extra: str) -> subprocess.CompletedProcess:
    return zkbroker("consumer-offset-checker", "--zookeeper", zk_connect, "--group", group, *extra)


def rows(output: str) -> dict[int, tuple[str, str, str, str]]:
    """{pid: (offset, logSize, lag, owner)} of the checker's table."""
    out = {}
    for line in output.splitlines()[1:]:
        fields = line.split()
        if len(fields) == 7 and fields[2].isdigit():
            out[int(fields[2])] = tuple(fields[3:])
    return out


def test_offset_checker_columns_with_and_without_an_owner(tmp_path, zk, zk_connect, brokers):
    (broker,) = brokers(1)
    create_topic(zk_connect, "checked", 3, 1, [broker])
    with Producer({"bootstrap.servers": broker.bootstrap, "acks": 1}) as producer:
        for partition, count in ((0, 5), (1, 3)):
            for i in range(count):
                producer.send("checked", f"{partition}-{i}".encode(), partition=partition)
    consumer = ConsumerProcess(tmp_path, "at_least_once", zk_connect, "gold", "checked", "c", tmp_path / "c.txt",
                               consumer_id="golden")
    try:
        wait_for(lambda: len(read_values(tmp_path / "c.txt")) == 8, 20, "eight messages")
        wait_for(lambda: zk.get("/consumers/gold/offsets/checked/0") == b"5"
                 and zk.get("/consumers/gold/offsets/checked/1") == b"3", 10, "the offsets")
        running = checker(zk_connect, "gold")
        assert running.returncode == 0, running.stderr
        assert_golden("consumer_offset_checker_owned.txt", running.stdout.decode())
    finally:
        assert consumer.terminate() == 0
    with Producer({"bootstrap.servers": broker.bootstrap, "acks": 1}) as producer:
        for _ in range(4):
            producer.send("checked", b"late", partition=0).get(10)
    stopped = checker(zk_connect, "gold", "--topic", "checked", "--broker-info")
    assert stopped.returncode == 0, stopped.stderr
    assert_golden("consumer_offset_checker_lag.txt",
                  re.sub(rf":{broker.port}\b", ":PORT", stopped.stdout.decode()))

    unknown_group = checker(zk_connect, "nobody")
    assert unknown_group.returncode == 1
    assert unknown_group.stderr.decode().strip() == (
        "zkbroker consumer-offset-checker: Consumer group nobody does not exist in ZooKeeper.")
    unknown_topic = checker(zk_connect, "gold", "--topic", "checked,nope")
    assert unknown_topic.returncode == 1
    assert unknown_topic.stderr.decode().strip() == "zkbroker consumer-offset-checker: Topic nope does not exist."


def test_offset_checker_shows_lag_draining_to_zero(tmp_path, zk, zk_connect, brokers):
    (broker,) = brokers(1)
    create_topic(zk_connect, "drain", 3, 1, [broker])

    def produce(count: int) -> None:
        with Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 5}) as producer:
            for i in range(count):
                producer.send("drain", f"v{i}".encode(), partition=i % 3)

    produce(30)
    first = ConsumerProcess(tmp_path, "at_least_once", zk_connect, "drainers", "drain", "first",
                            tmp_path / "first.txt")
    wait_for(lambda: len(read_values(tmp_path / "first.txt")) == 30, 20, "the first 30 messages")
    wait_for(lambda: all(zk.get(f"/consumers/drainers/offsets/drain/{p}") == b"10" for p in range(3)), 10,
             "offsets 10")
    assert first.terminate() == 0
    # 900 more: the example consumer commits to ZooKeeper after every message (a synced write each), so the
    # drain takes one ZooKeeper write per record; 3,000 outlasted the 60 s wait on a loaded CI machine.
    produce(900)
    behind = rows(checker(zk_connect, "drainers").stdout.decode())
    assert {p: (r[0], r[1], r[2], r[3]) for p, r in behind.items()} == {
        p: ("10", "310", "300", "none") for p in range(3)}

    second = ConsumerProcess(tmp_path, "at_least_once", zk_connect, "drainers", "drain", "second",
                             tmp_path / "second.txt")
    lags = []
    tables = []
    try:
        def drained() -> bool:
            table = rows(checker(zk_connect, "drainers").stdout.decode())
            tables.append(table)
            lags.append(sum(int(r[2]) for r in table.values() if r[2] != "unknown"))
            return len(table) == 3 and all(r[2] == "0" and r[3].endswith("-0") for r in table.values())

        try:
            wait_for(drained, 60, "the lag to drain to 0", interval_s=0.2)
        except AssertionError as e:  # what the checker last showed and what the consumer said
            log = second.log_path.read_text(errors="replace")[-3000:] if second.log_path.exists() else ""
            raise AssertionError(f"{e}; the checker's last rows {tables[-1] if tables else None}; "
                                 f"the consumer's log ends:\n{log}") from None
    finally:
        second.cleanup()
    assert lags[0] > 0 and lags[-1] == 0
    assert lags == sorted(lags, reverse=True), f"the lag went up while draining: {lags}"

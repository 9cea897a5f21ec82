"""Bad configuration and an unreachable ZooKeeper end `zkbroker server` with one clear sentence; a bad topic
override in ZooKeeper does not: it is logged, naming the topic and the key, and the broker's value applies."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.integration.harness import free_port

pytestmark = pytest.mark.integration


def _server(*args: str, timeout_s: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zkbroker", "server", *args], capture_output=True, text=True,
                          timeout=timeout_s)


def _config(tmp_path, text: str) -> str:
    path = tmp_path / "server.properties"
    path.write_text(text)
    return str(path)


def _one_sentence(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_missing_config_file_is_named(tmp_path):
    result = _server(str(tmp_path / "nope.properties"))
    assert result.returncode != 0
    assert "nope.properties" in _one_sentence(result.stderr)


def test_missing_zookeeper_connect_is_named(tmp_path):
    result = _server(_config(tmp_path, "broker.id=1\n"))
    assert result.returncode != 0
    assert "zookeeper.connect" in _one_sentence(result.stderr)


def test_invalid_value_names_the_key(tmp_path):
    cfg = _config(tmp_path, "broker.id=1\nzookeeper.connect=127.0.0.1:1\nzookeeper.session.timeout.ms=soon\n")
    result = _server(cfg)
    assert result.returncode != 0
    sentence = _one_sentence(result.stderr)
    assert "zookeeper.session.timeout.ms" in sentence and "soon" in sentence


def test_invalid_override_names_the_key(tmp_path):
    cfg = _config(tmp_path, "broker.id=1\nzookeeper.connect=127.0.0.1:1\n")
    result = _server(cfg, "--override", "unclean.leader.election.enable=maybe")
    assert result.returncode != 0
    assert "unclean.leader.election.enable" in _one_sentence(result.stderr)


def test_zookeeper_unreachable_retries_for_the_connection_timeout_then_exits(tmp_path):
    port = free_port()  # nothing listens there
    cfg = _config(tmp_path, f"broker.id=1\nport={free_port()}\nhost.name=127.0.0.1\nlog.dirs={tmp_path}/data\n"
                            f"zookeeper.connect=127.0.0.1:{port}\nzookeeper.connection.timeout.ms=1500\n")
    started = time.monotonic()
    result = _server(cfg)
    elapsed = time.monotonic() - started
    assert result.returncode != 0
    assert f"Unable to connect to zookeeper server 127.0.0.1:{port} within timeout: 1500 ms" in result.stderr
    assert elapsed >= 1.5  # it kept trying for the whole connection timeout before giving up
    assert "Traceback" not in result.stderr


def test_unknown_key_is_warned_about_not_ignored(tmp_path, zk_connect):
    from tests.integration.harness import Broker, wait_for

    broker = Broker(tmp_path, 1, zk_connect, some_typo_key="1").start()
    try:
        wait_for(lambda: broker.log_lines(r"WARNING .*some\.typo\.key"), 15, "a warning naming the unknown key")
    finally:
        broker.cleanup()


def test_a_bad_topic_override_in_zookeeper_is_logged_and_the_broker_value_applies(tmp_path, zk_connect, zk):
    from tests.integration.harness import Broker, create_topic, wait_for_leaders

    broker = Broker(tmp_path, 1, zk_connect).start()
    try:
        create_topic(zk_connect, "orders", 1, 1, [broker])
        # Written by hand (`zkbroker topics` refuses it): a segment size that is not a number.
        zk.client.set("/config/topics/orders", b'{"version":1,"config":{"segment.bytes":"big"}}')
        assert broker.terminate() == 0
        broker.start()  # it opens the topic's log at start, then its partition on the controller's request
        wait_for_leaders([broker], "orders", 1)
        assert broker.log_lines(r"ERROR .*Topic orders: ignoring its override of segment\.bytes, the broker's "
                                r"log\.segment\.bytes applies instead\. Invalid value 'big'")
        assert "Traceback" not in broker.log()
    finally:
        broker.cleanup()

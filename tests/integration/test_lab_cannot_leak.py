"""A lab that cannot leak (issue 15, item 7): the lab's lock, `lab down` finding every process of the lab, and a
broker whose ZooKeeper is gone still exiting after SIGTERM. Real ZooKeeper, real broker processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.harness import Broker, ZkView, wait_for
from zkbroker.lab.cluster import LOCK_FILE, LabCluster, LabError
from zkbroker.lab.processes import process_state, processes_matching
from zkbroker.lab.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.integration


def lab_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "zkbroker", "lab", *args]


def lab_processes(directory: Path) -> list[int]:
    """Every process whose command line names a file inside the lab directory."""
    inside = str(directory.resolve()) + os.sep
    return processes_matching(lambda argv: any(arg.startswith(inside) for arg in argv))


def broker_processes(directory: Path, broker_id: int) -> list[int]:
    config = str(directory.resolve() / f"broker-{broker_id}" / "server.properties")
    return processes_matching(lambda argv: argv[-1] == config)


@pytest.fixture
def lab_dir(tmp_path):
    directory = tmp_path / "lab"
    yield directory
    if directory.exists() and (lab_processes(directory) or (directory / "cluster.json").exists()):
        subprocess.run(lab_command("down", "--dir", str(directory)), capture_output=True, timeout=120)


def test_lab_down_while_lab_start_is_starting_a_broker_leaves_nothing_running(lab_dir):
    subprocess.run(lab_command("up", "--dir", str(lab_dir), "--brokers", "2"), check=True, capture_output=True,
                   timeout=120)
    subprocess.run(lab_command("kill", "--dir", str(lab_dir), "--broker", "2"), check=True, capture_output=True,
                   timeout=30)
    start = subprocess.Popen(lab_command("start", "--dir", str(lab_dir), "--broker", "2"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The new broker process exists: the start is in progress (it returns only once the broker registers).
        wait_for(lambda: broker_processes(lab_dir, 2), 30, "the restarted broker's process")
        down = subprocess.run(lab_command("down", "--dir", str(lab_dir)), capture_output=True, text=True,
                              timeout=180)
        start_out, start_err = start.communicate(timeout=120)
    finally:
        if start.poll() is None:
            start.kill()
    assert start.returncode == 0, start_err  # down waited for the start to finish instead of cutting it short
    assert down.returncode == 0, down.stderr
    assert lab_processes(lab_dir) == []
    assert not (lab_dir / "cluster.json").exists()


def test_lab_down_after_an_interrupted_lab_up_leaves_nothing_running(lab_dir):
    up = subprocess.Popen(lab_command("up", "--dir", str(lab_dir), "--brokers", "2"),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: broker_processes(lab_dir, 1), 60, "the first broker's process")
    finally:
        up.send_signal(signal.SIGKILL)  # no cleanup of its own: the broker and ZooKeeper are orphans now
        up.wait(10)
    assert lab_processes(lab_dir)
    down = subprocess.run(lab_command("down", "--dir", str(lab_dir)), capture_output=True, text=True, timeout=180)
    assert down.returncode == 0, down.stderr
    assert lab_processes(lab_dir) == []


def test_a_lab_command_waits_for_the_lock_and_names_its_holder(tmp_path):
    lab_dir = tmp_path / "lab"
    lab_dir.mkdir()
    (lab_dir / "cluster.json").write_text('{"zookeeper": "127.0.0.1:1/x", "zookeeper_pid": null, "brokers": []}')
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, sys, time\n"
         f"f = open({str(lab_dir / LOCK_FILE)!r}, 'a+'); fcntl.flock(f, fcntl.LOCK_EX)\n"
         "f.write('pid holder: lab start'); f.flush(); print('locked', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(LabError, match=r"Another lab command \(pid holder: lab start\) has held"):
            with LabCluster(lab_dir).locked(wait_s=0.5):
                pass
        holder.kill()
        holder.wait(10)
        with LabCluster(lab_dir).locked(wait_s=10):  # released when its holder died
            assert (lab_dir / LOCK_FILE).read_text().startswith(f"pid {os.getpid()}:")
    finally:
        holder.kill()
        holder.wait(10)


def test_a_broker_whose_zookeeper_is_gone_exits_after_sigterm(tmp_path):
    zookeeper = ZooKeeperServer(tick_time_ms=200).start()
    broker = Broker(tmp_path, 1, zookeeper.connect_string + "/leak", zookeeper_connection_timeout_ms=2000,
                    controlled_shutdown_max_retries=3)
    try:
        broker.start()
        view = ZkView(zookeeper.connect_string + "/leak")
        try:
            wait_for(lambda: 1 in view.registered(), 30, "broker 1 to register")
        finally:
            view.close()
        zookeeper.stop()
        assert broker.terminate(timeout_s=60) == 0  # bounded: gives up after zookeeper.connection.timeout.ms
        assert broker.log_lines("Giving up the controlled shutdown: ZooKeeper .* has been unreachable")
        assert broker.log_lines("shut down completed")
        assert process_state(broker.pid) == "dead"
    finally:
        broker.cleanup()
        zookeeper.close()

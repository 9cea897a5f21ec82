"""Controller election through `/controller` and `/controller_epoch`, with real brokers and real faults."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime

import pytest

from tests.integration.harness import SESSION_TIMEOUT_MS, Broker, ZkView, wait_for

pytestmark = pytest.mark.integration

SESSION_S = SESSION_TIMEOUT_MS / 1000


def _three(brokers, zk):
    trio = brokers(1, 2, 3)
    wait_for(lambda: zk.registered() == {1, 2, 3} and zk.controller(), 20, "three brokers and a controller")
    return {b.id: b for b in trio}


def _wait_active(broker: Broker, epoch: int, timeout_s: float = 10) -> None:
    wait_for(lambda: broker.log_lines(rf"Broker {broker.id} is ready to serve as the new controller with epoch "
                                      rf"{epoch}\b"), timeout_s, f"broker {broker.id} to finish failover")


def test_exactly_one_controller_is_elected_and_the_first_epoch_is_1(brokers, zk):
    trio = _three(brokers, zk)
    controller = zk.controller()
    assert zk.get("/controller_epoch") == b"1"
    reg = json.loads(zk.get("/controller"))
    assert list(reg) == ["version", "brokerid", "timestamp"] and reg["version"] == 1
    assert isinstance(reg["timestamp"], str)
    _wait_active(trio[controller], 1)
    winners = [b for b in trio.values() if b.log_lines("successfully elected as leader")]
    assert [b.id for b in winners] == [controller]
    assert trio[controller].log_lines(rf"\[Controller {controller}\]: Currently active brokers in the cluster")


def test_killed_controller_is_replaced_once_its_session_expires_with_epoch_plus_one(brokers, zk):
    trio = _three(brokers, zk)
    old = zk.controller()
    _wait_active(trio[old], 1)
    trio[old].kill()
    # Session expiry (up to a tick late), the watch, then an election by a Python process on a loaded 2-core
    # machine: the bound is generous, as the test proves the failover, not its speed (bench/failover.py times it).
    new = wait_for(lambda: (c := zk.controller()) not in (None, old) and c, SESSION_S + 10,
                   "a new controller once the old one's session expired")
    wait_for(lambda: zk.epoch() == 2, 10, "/controller_epoch to become 2")
    _wait_active(trio[new], 2, timeout_s=20)
    # The new controller noticed the old one's broker failing (it may also have seen it while electing).
    survivors = {1, 2, 3} - {old}
    assert zk.registered() == survivors
    live = ",".join(map(str, sorted(survivors)))
    wait_for(lambda: trio[new].log_lines(rf"Currently active brokers in the cluster: Set\({live}\)")
             or trio[new].log_lines(rf"\[Controller {new}\]: Broker {old} failed"), 5, "the new controller's view")


def test_controller_reports_broker_failure_and_startup(brokers, zk):
    trio = _three(brokers, zk)
    controller = zk.controller()
    _wait_active(trio[controller], 1)
    victim = next(b for b in trio.values() if b.id != controller)
    log = trio[controller]
    # A broker that registered after the controller read /brokers/ids joins in a later event: wait until the
    # controller knows all three, so that the count below is final.
    wait_for(lambda: log.log_lines(r"(Currently active brokers in the cluster: Set|all live brokers: )\(?1,2,3\b"),
             10, "the controller to know all three brokers")
    started = rf"\[Controller {controller}\]: Broker {victim.id} started"
    starts_before = len(log.log_lines(started))  # it may have seen the victim join at startup
    victim.kill()
    wait_for(lambda: log.log_lines(rf"\[Controller {controller}\]: Broker {victim.id} failed"), SESSION_S + 15,
             "the controller to report the failure")  # session expiry, then the controller's work: generous
    victim.start()
    wait_for(lambda: len(log.log_lines(started)) == starts_before + 1, SESSION_S + 10,
             "the controller to report the restart")
    assert log.log_lines(rf"Newly added brokers: {victim.id}, deleted brokers: , all live brokers: 1,2,3")


def _timestamp(line: str) -> datetime:
    return datetime.strptime(re.match(r"\[([^\]]+)\]", line).group(1), "%Y-%m-%d %H:%M:%S,%f")


def test_paused_controller_loses_and_never_acts_again_after_resume(brokers, zk):
    trio = _three(brokers, zk)
    old = zk.controller()
    _wait_active(trio[old], 1)
    trio[old].pause()
    try:
        # Session expiry, then an election and a failover: generous on a loaded machine.
        new = wait_for(lambda: (c := zk.controller()) not in (None, old) and c, SESSION_S + 10,
                       "another broker to take over while the controller is paused")
        wait_for(lambda: zk.epoch() == 2, 10, "epoch 2")
        _wait_active(trio[new], 2, timeout_s=20)
    finally:
        trio[old].resume()
    # On resume the zombie learns it lost: it resigns, re-registers as a plain broker, and follows the new one.
    # It may first try to confirm its session for up to the session timeout + 2 s (controller.py): generous.
    wait_for(lambda: trio[old].log_lines(rf"Broker {old} resigned as the controller"), 20, "the old one to resign")
    wait_for(lambda: zk.registered() == {1, 2, 3}, 20, "the old controller to register again")
    assert zk.controller() == new and zk.epoch() == 2

    # Make the cluster change again: only the new controller may act on it.
    third = next(b for b in trio.values() if b.id not in (old, new))
    third.kill()
    wait_for(lambda: trio[new].log_lines(rf"\[Controller {new}\]: Broker {third.id} failed"), SESSION_S + 15,
             "the new controller to handle the failure")  # session expiry, then the controller's work
    time.sleep(0.5)
    assert not trio[old].log_lines(rf"\[Controller {old}\]: Broker {third.id} failed")
    # No two active controllers at any instant: the old one sent requests (at epoch 1) only before the new one's
    # epoch 2 began, and never after.
    new_began = _timestamp(trio[new].log_lines(r"incremented epoch to 2")[0])
    old_sends = trio[old].log_lines(rf"\[Controller {old}\]: \w+: \d+ znode writes done")
    assert all(_timestamp(line) < new_began for line in old_sends)
    # The pause may land in the middle of an event (brokers 2 and 3 often register after broker 1 took over): the
    # zombie then finishes deciding on resume, later than epoch 2 began, and sends none of it.
    old_decisions = trio[old].log_lines(rf"\[Controller {old}\]: (Broker \d+ (failed|started)|Newly added)|"
                                        rf"Controller {old} epoch 1 handled")
    if any(_timestamp(line) >= new_began for line in old_decisions):
        assert trio[old].log_lines(r"decided before a pause this controller did not survive; its requests .* are "
                                   r"not sent")
    assert trio[old].alive()


def test_zookeeper_restart_shorter_than_the_session_keeps_the_controller(tmp_path):
    from zkbroker.lab.zookeeper import ZooKeeperServer

    with ZooKeeperServer(tick_time_ms=200, data_dir=tmp_path / "zk") as server:
        connect = f"{server.connect_string}/restart"
        made = [Broker(tmp_path, i, connect, zookeeper_session_timeout_ms=6000).start() for i in (1, 2)]
        view = ZkView(connect)
        try:
            wait_for(lambda: view.registered() == {1, 2} and view.controller(), 20, "two brokers and a controller")
            controller, epoch = view.controller(), view.epoch()
            view.close()
            server.restart()
            view = ZkView(connect)
            wait_for(lambda: all(b.log_lines("disconnected from ZooKeeper") for b in made), 10,
                     "both brokers to notice the restart")
            time.sleep(2)  # give a (wrong) re-election every chance to happen
            assert (view.controller(), view.epoch()) == (controller, epoch)
            assert view.registered() == {1, 2}
            assert all(not b.log_lines("new ZooKeeper session") for b in made)
            assert all(b.alive() for b in made)
        finally:
            view.close()
            for b in made:
                b.cleanup()

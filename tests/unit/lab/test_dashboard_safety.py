"""The dashboard's guards and request parsing, pure: the Host check against DNS rebinding, the lab token,
fault requests, and a broker's `state` answer."""

from __future__ import annotations

import pytest

from zkbroker.lab.dashboard.broker_state import parse_state
from zkbroker.lab.dashboard.faults import BadFaultRequest, FaultRequest, parse
from zkbroker.lab.dashboard.safety import host_allowed, new_token, token_ok


@pytest.mark.parametrize("header,allowed", [
    ("127.0.0.1:8080", True), ("localhost:8080", True), ("LOCALHOST:8080", True),
    ("127.0.0.1:8081", False), ("127.0.0.1", False), ("evil.example:8080", False), ("127.0.0.2:8080", False),
    ("", False), (None, False), ("127.0.0.1:80x", False), ("[::1]:8080", False)])
def test_host_header_must_name_the_loopback_address_it_is_bound_to(header, allowed):
    assert host_allowed(header, "127.0.0.1", 8080) is allowed


def test_host_header_for_other_binds():
    assert host_allowed("[::1]:8080", "::1", 8080) and host_allowed("localhost:8080", "::1", 8080)
    assert host_allowed("10.0.0.5:8080", "10.0.0.5", 8080) and not host_allowed("localhost:8080", "10.0.0.5", 8080)
    assert host_allowed("192.168.1.9:8080", "0.0.0.0", 8080)  # an IP literal cannot be rebound
    assert not host_allowed("attacker.example:8080", "0.0.0.0", 8080)
    assert host_allowed("127.0.0.1", "127.0.0.1", 80)


def test_token():
    token = new_token()
    assert len(token) >= 32 and token != new_token()
    assert token_ok(token, token) and not token_ok(None, token) and not token_ok(token + "x", token)


def test_fault_requests():
    assert parse({"action": "kill", "broker": 1}) == FaultRequest("kill", broker=1)
    assert parse({"action": "start", "zookeeper": 2}) == FaultRequest("start", zookeeper=2)
    assert parse({"action": "partition", "node": "broker:2", "from": "zookeeper, broker:1"}) == FaultRequest(
        "partition", node="broker:2", peers=("zookeeper", "broker:1"))
    assert parse({"action": "partition", "node": "broker:2", "from": ["zookeeper"], "one_way": True}).one_way
    assert parse({"action": "heal"}) == FaultRequest("heal")


@pytest.mark.parametrize("body,words", [
    ([], "JSON object"), ({"action": "explode"}, "Unknown action 'explode'"),
    ({"action": "kill"}, "exactly one of broker, zookeeper or controller"),
    ({"action": "kill", "broker": 1, "zookeeper": 1}, "exactly one"),
    ({"action": "kill", "broker": "1"}, "integer"), ({"action": "kill", "broker": True}, "integer"),
    ({"action": "kill", "broker": 1, "signal": 9}, "unknown: signal"),
    ({"action": "partition", "node": "broker:1"}, "from must name"),
    ({"action": "partition", "from": ["zookeeper"]}, "partition needs node"),
    ({"action": "partition", "node": "broker:1", "from": ["zookeeper"], "one_way": "yes"}, "true or false")])
def test_bad_fault_requests_say_what_is_wrong(body, words):
    with pytest.raises(BadFaultRequest, match=words):
        parse(body)


def test_fault_point_requests():
    assert parse({"action": "fault_point", "broker": 2, "point": "drop_next_leader_and_isr", "count": 2}) == \
        FaultRequest("fault_point", broker=2, point="drop_next_leader_and_isr", params=(("count", 2),))
    stop = parse({"action": "fault_point", "broker": 1, "point": "stop_before_zookeeper_write", "write": "isr_update",
                  "stop": "pause"})
    assert dict(stop.params) == {"write": "isr_update", "action": "pause"}
    assert parse({"action": "heal_fault_points", "broker": 2}) == FaultRequest("heal_fault_points", broker=2)
    with pytest.raises(BadFaultRequest, match="Unknown fault point 'explode'"):
        parse({"action": "fault_point", "broker": 2, "point": "explode"})
    with pytest.raises(BadFaultRequest, match="has no parameter 'ms'"):
        parse({"action": "fault_point", "broker": 2, "point": "hold_fetchers", "ms": 5})
    assert parse({"action": "fault_point", "broker": 3, "point": "hold_cleaner_at", "phase": "swapped"}) == \
        FaultRequest("fault_point", broker=3, point="hold_cleaner_at", params=(("phase", "swapped"),))
    with pytest.raises(BadFaultRequest, match="unknown log cleaner phase 'swap'"):
        parse({"action": "fault_point", "broker": 3, "point": "hold_cleaner_at", "phase": "swap"})


# The answer zkbroker/control_protocol.py documents, from a follower and from the controller.
STATE = {"broker": 2, "pid": 456, "session": "0x10", "zookeeper_connected": True, "controller_epoch_seen": 3,
         "partitions": [{"topic": "t", "partition": 0, "role": "leader", "leader": 2, "leader_epoch": 4,
                         "isr": [2, 1], "replicas": [2, 1], "zk_version": 7, "controller_epoch": 3, "hw": 5, "leo": 6,
                         "log_start": 0, "lso": 4, "open_transactions": 1, "metadata_leader": 2}],
         "metadata": {"controller": 1, "live_brokers": [1, 2], "partitions": []},
         "controller": None, "faults": [{"point": "hold_fetchers"}]}


def test_a_state_answer():
    belief = parse_state(STATE, 2)
    assert (belief.broker, belief.controller_epoch, belief.session, belief.is_controller) == (2, 3, 16, False)
    assert belief.zookeeper_connected is True and belief.faults == ({"point": "hold_fetchers"},)
    r = belief.replica("t", 0)
    assert (r.leader, r.leader_epoch, r.isr, r.zk_version, r.hw, r.leo, r.metadata_leader) == (2, 4, (2, 1), 7, 5, 6, 2)
    assert (r.lso, r.open_transactions) == (4, 1)
    assert belief.replica("t", 1) is None
    assert parse_state({**STATE, "controller": {"epoch": 3}}, 2).is_controller is True


def test_a_partial_state_answer_leaves_the_rest_unknown():
    belief = parse_state({"partitions": [{"topic": "t", "partition": 0, "hw": 3}]}, 5)
    assert belief.broker == 5 and belief.controller_epoch is None and belief.is_controller is None
    assert belief.replica("t", 0).leader is None


@pytest.mark.parametrize("answer", [[], "state", {"partitions": [{"topic": "t"}]}])
def test_a_malformed_state_answer_is_refused(answer):
    with pytest.raises(ValueError):
        parse_state(answer, 1)

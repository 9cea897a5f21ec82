"""The lab control interface without a broker: the fault points' registry, the command handler (sans I/O),
and one round trip over a real Unix socket between the broker's server and the lab's client."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time

import pytest

from zkbroker import fault_points, timeline
from zkbroker.control_protocol import ControlError, ControlHandler, decode, encode, fault_request, initial_faults
from zkbroker.fault_points import FaultPointError, FaultPoints
from zkbroker.lab.control_client import ControlClient
from zkbroker.server.lab_control import LabControlServer


@pytest.fixture
def stops():
    """The signals a FaultPoints registry sent itself (instead of really stopping the test)."""
    return []


@pytest.fixture
def faults(stops):
    return FaultPoints(stop_self=stops.append)


@pytest.fixture
def handler(faults):
    return ControlHandler(faults, lambda: {"broker": 7, "partitions": []})


# ---- the registry ------------------------------------------------------------------------------------------


def test_hold_and_release_fetchers(faults):
    assert not faults.fetchers_held
    faults.apply("hold_fetchers")
    assert faults.fetchers_held and faults.in_force() == [{"point": "hold_fetchers"}]
    faults.apply("release_fetchers")
    assert not faults.fetchers_held and faults.in_force() == []


def test_hold_after_offset_out_of_range_until_released_or_for_a_time(faults, tmp_path, monkeypatch):
    assert not faults.out_of_range_held
    faults.apply("hold_offset_out_of_range")
    assert faults.out_of_range_held and faults.out_of_range_ms is None
    assert faults.in_force() == [{"point": "hold_offset_out_of_range"}]
    faults.apply("release_offset_out_of_range")
    assert not faults.out_of_range_held and faults.in_force() == []
    faults.apply("hold_offset_out_of_range", ms=2000)
    assert faults.in_force() == [{"point": "hold_offset_out_of_range", "ms": 2000}]
    monkeypatch.setenv(timeline.ENV_VAR, str(tmp_path / "timeline.jsonl"))
    faults.source = "broker:1"
    faults.out_of_range_fired("t", 0, 8, 2)
    (event,) = timeline.read(tmp_path / "timeline.jsonl")
    assert {k: event[k] for k in ("source", "kind", "point", "topic", "partition", "offset", "leader", "ms")} == {
        "source": "broker:1", "kind": "fault_fired", "point": "hold_offset_out_of_range", "topic": "t",
        "partition": 0, "offset": 8, "leader": 2, "ms": 2000}
    faults.heal("release_offset_out_of_range")
    assert not faults.out_of_range_held and faults.out_of_range_ms is None


def test_a_drop_counts_the_requests_it_takes_and_ends_when_spent(faults):
    faults.apply("drop_next_leader_and_isr", count=2)
    assert faults.take_request_fault("update_metadata") is None
    first = faults.take_request_fault("leader_and_isr")
    assert first is not None and first.ms is None
    assert faults.in_force() == [{"point": "drop_next_leader_and_isr", "count": 1}]
    assert faults.take_request_fault("leader_and_isr") is not None
    assert faults.take_request_fault("leader_and_isr") is None
    assert faults.in_force() == []


def test_a_delay_says_how_long_and_count_defaults_to_one(faults):
    faults.apply("delay_next_update_metadata", ms=1500)
    assert faults.in_force() == [{"point": "delay_next_update_metadata", "count": 1, "ms": 1500}]
    assert faults.take_request_fault("update_metadata").ms == 1500
    assert faults.take_request_fault("update_metadata") is None


def test_the_controller_queue_hold_blocks_until_released(faults):
    faults.apply("hold_controller_queue")
    assert faults.controller_held
    released = threading.Event()

    def wait() -> None:
        faults.wait_while_controller_held(threading.Event())
        released.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert not released.wait(0.2)
    faults.apply("release_controller_queue")
    assert released.wait(5)
    waiter.join()


def test_the_controller_queue_hold_lets_a_closing_controller_go(faults):
    faults.apply("hold_controller_queue")
    closing = threading.Event()
    closing.set()
    faults.wait_while_controller_held(closing)  # returns at once
    assert faults.controller_held


@pytest.mark.parametrize("action, sig", [("kill", signal.SIGKILL), ("pause", signal.SIGSTOP)])
def test_a_stop_at_a_zookeeper_write_fires_once_at_its_point_only(faults, stops, action, sig, tmp_path, monkeypatch):
    monkeypatch.setenv(timeline.ENV_VAR, str(tmp_path / "timeline.jsonl"))
    faults.source = "broker:3"
    faults.apply("stop_after_zookeeper_write", write="isr_update", action=action)
    faults.at_zookeeper_write("isr_update", "before")
    faults.at_zookeeper_write("registration", "after")
    assert stops == []
    faults.at_zookeeper_write("isr_update", "after")
    assert stops == [sig]
    faults.at_zookeeper_write("isr_update", "after")
    assert stops == [sig] and faults.in_force() == []
    (event,) = timeline.read(tmp_path / "timeline.jsonl")
    assert (event["source"], event["kind"], event["point"], event["write"], event["action"]) == (
        "broker:3", "fault_fired", "stop_after_zookeeper_write", "isr_update", action)


def _cleaner_held_at(faults, phase: str) -> tuple[threading.Thread, threading.Event]:
    """A cleaner thread that reaches `phase` (held there by the test's hold_cleaner_at), once it waits there;
    the event is set when it goes on."""
    passed = threading.Event()
    cleaner = threading.Thread(target=lambda: (faults.at_cleaner_phase(phase), passed.set()))
    cleaner.start()
    deadline = time.monotonic() + 10
    while faults.cleaners_held == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    return cleaner, passed


def test_hold_cleaner_at_stops_a_cleaner_thread_at_its_phase_only_until_released(faults, tmp_path, monkeypatch):
    monkeypatch.setenv(timeline.ENV_VAR, str(tmp_path / "timeline.jsonl"))
    faults.source = "broker:2"
    faults.at_cleaner_phase("swap-renamed")  # nothing in force: goes on at once
    faults.apply("hold_cleaner_at", phase="swap-renamed")
    assert faults.in_force() == [{"point": "hold_cleaner_at", "phase": "swap-renamed", "held": 0}]
    faults.at_cleaner_phase("offset-map-built")  # another phase: goes on
    cleaner, passed = _cleaner_held_at(faults, "swap-renamed")
    assert faults.in_force() == [{"point": "hold_cleaner_at", "phase": "swap-renamed", "held": 1}]
    assert not passed.wait(0.2)
    faults.apply("release_cleaner")
    assert passed.wait(5)
    cleaner.join()
    assert faults.in_force() == [] and faults.cleaners_held == 0
    (event,) = timeline.read(tmp_path / "timeline.jsonl")
    assert (event["source"], event["kind"], event["point"], event["phase"]) == (
        "broker:2", "fault_fired", "hold_cleaner_at", "swap-renamed")


def test_a_cleaner_hold_moved_to_another_phase_or_healed_lets_its_waiters_go(faults):
    faults.apply("hold_cleaner_at", phase="cleaned-written")
    cleaner, passed = _cleaner_held_at(faults, "cleaned-written")
    assert not passed.wait(0.2)
    faults.apply("hold_cleaner_at", phase="checkpointed")
    # at once: the thread let go is not counted as held at the new phase, even before it runs again
    assert faults.in_force() == [{"point": "hold_cleaner_at", "phase": "checkpointed", "held": 0}]
    assert passed.wait(5)
    cleaner.join()
    faults.heal()
    assert faults.cleaner_hold is None and faults.in_force() == []


def test_stop_before_txn_markers_stops_the_process_once_at_a_commit_not_at_an_abort(tmp_path):
    stops = []
    faults = FaultPoints(stop_self=stops.append)
    faults.apply("stop_before_txn_markers")
    assert faults.in_force() == [{"point": "stop_before_txn_markers", "action": "kill"}]
    faults.before_txn_markers("t", commit=False)
    assert stops == []
    faults.before_txn_markers("t", commit=True)
    faults.before_txn_markers("t", commit=True)
    assert stops == [signal.SIGKILL] and faults.in_force() == []
    assert fault_points.describe({"point": "stop_before_txn_markers", "action": "pause"}) == (
        "SIGSTOP between a PrepareCommit and its markers")


def test_hold_group_loading_holds_each_load_on_the_loop_until_released(faults, tmp_path, monkeypatch):
    monkeypatch.setenv(timeline.ENV_VAR, str(tmp_path / "timeline.jsonl"))
    faults.source = "broker:1"

    async def scenario() -> list[int]:
        await faults.wait_while_group_loading_held("__consumer_offsets", 3)  # nothing in force: returns
        faults.apply("hold_group_loading")
        assert faults.in_force() == [{"point": "hold_group_loading", "held": 0}]
        loads = [asyncio.create_task(faults.wait_while_group_loading_held("__consumer_offsets", p)) for p in (0, 7)]
        await asyncio.sleep(0.2)
        held = [f["held"] for f in faults.in_force()]
        assert not any(load.done() for load in loads)
        faults.apply("release_group_loading")
        await asyncio.wait_for(asyncio.gather(*loads), 5)
        return held

    assert asyncio.run(scenario()) == [2]
    assert faults.in_force() == [] and faults.group_loads_held == 0
    events = timeline.read(tmp_path / "timeline.jsonl")
    assert [(e["point"], e["topic"], e["partition"]) for e in events] == [
        ("hold_group_loading", "__consumer_offsets", 0), ("hold_group_loading", "__consumer_offsets", 7)]


def test_a_held_group_load_that_is_cancelled_is_no_longer_counted(faults):
    async def scenario() -> None:
        faults.apply("hold_group_loading")
        load = asyncio.create_task(faults.wait_while_group_loading_held("__consumer_offsets", 0))
        await asyncio.sleep(0.1)
        assert faults.group_loads_held == 1
        load.cancel()  # the partition was unloaded (its leadership moved) while held
        with pytest.raises(asyncio.CancelledError):
            await load
        assert faults.in_force() == [{"point": "hold_group_loading", "held": 0}]

    asyncio.run(scenario())


def test_hold_heartbeats_holds_the_lifecycle_request_on_the_loop_until_released(faults, tmp_path, monkeypatch):
    monkeypatch.setenv(timeline.ENV_VAR, str(tmp_path / "timeline.jsonl"))
    faults.source = "broker:1"

    async def scenario() -> list[dict]:
        await faults.wait_while_heartbeats_held("heartbeat")  # nothing in force: returns at once
        faults.apply("hold_heartbeats")
        in_force = faults.in_force()
        held = asyncio.create_task(faults.wait_while_heartbeats_held("heartbeat"))
        await asyncio.sleep(0.2)
        assert not held.done()
        faults.apply("release_heartbeats")
        await asyncio.wait_for(held, 5)
        return in_force

    assert asyncio.run(scenario()) == [{"point": "hold_heartbeats"}]
    assert faults.in_force() == [] and not faults.heartbeats_held
    (event,) = timeline.read(tmp_path / "timeline.jsonl")
    assert (event["source"], event["kind"], event["point"], event["request"]) == (
        "broker:1", "fault_fired", "hold_heartbeats", "heartbeat")


def test_hold_metadata_holds_every_metadata_fetch_tells_the_timeline_once_and_lets_a_stopping_node_go(
        faults, tmp_path, monkeypatch):
    monkeypatch.setenv(timeline.ENV_VAR, str(tmp_path / "timeline.jsonl"))
    faults.source = "broker:2"
    stopped = threading.Event()

    async def scenario() -> None:
        faults.apply("hold_metadata")
        assert faults.in_force() == [{"point": "hold_metadata"}]
        # the Raft client sends another Fetch when one times out: both wait
        fetches = [asyncio.create_task(faults.wait_while_metadata_held(stopped.is_set)) for _ in range(2)]
        await asyncio.sleep(0.2)
        assert not any(f.done() for f in fetches)
        faults.apply("release_metadata")
        await asyncio.wait_for(asyncio.gather(*fetches), 5)
        faults.apply("hold_metadata")
        stopping = asyncio.create_task(faults.wait_while_metadata_held(stopped.is_set))
        await asyncio.sleep(0.1)
        stopped.set()  # the node shuts down with the point still in force
        await asyncio.wait_for(stopping, 5)

    asyncio.run(scenario())
    assert faults.in_force() == [{"point": "hold_metadata"}]
    faults.heal()
    assert not faults.metadata_held
    events = timeline.read(tmp_path / "timeline.jsonl")
    assert [(e["source"], e["point"]) for e in events] == [("broker:2", "hold_metadata")] * 2  # one per hold


def test_heal_one_point_or_all(faults):
    faults.apply("hold_fetchers")
    faults.apply("hold_controller_queue")
    faults.apply("drop_next_update_metadata", count=3)
    faults.apply("stop_before_zookeeper_write", write="registration")
    assert [f["point"] for f in faults.in_force()] == [
        "hold_fetchers", "hold_controller_queue", "drop_next_update_metadata", "stop_before_zookeeper_write"]
    assert faults.in_force()[-1] == {"point": "stop_before_zookeeper_write", "write": "registration",
                                     "action": "kill"}
    faults.heal("drop_next_update_metadata")
    assert [f["point"] for f in faults.in_force()] == [
        "hold_fetchers", "hold_controller_queue", "stop_before_zookeeper_write"]
    faults.heal()
    assert faults.in_force() == [] and not faults.fetchers_held and not faults.controller_held


@pytest.mark.parametrize("point, params, message", [
    ("explode", {}, "unknown fault point 'explode'; allowed: hold_fetchers, "),
    ("hold_fetchers", {"count": 1}, "fault point hold_fetchers has no parameter 'count'; it takes none"),
    ("delay_next_leader_and_isr", {"count": 1}, "fault point delay_next_leader_and_isr needs ms"),
    ("drop_next_leader_and_isr", {"count": 0}, "count of fault point drop_next_leader_and_isr must be an integer "
                                               "of at least 1, not 0"),
    ("drop_next_leader_and_isr", {"count": "2"}, "must be an integer"),
    ("stop_before_zookeeper_write", {}, "fault point stop_before_zookeeper_write needs write"),
    ("hold_offset_out_of_range", {"count": 1}, "fault point hold_offset_out_of_range has no parameter 'count'; "
                                               "it takes ms"),
    ("hold_offset_out_of_range", {"ms": -1}, "ms of fault point hold_offset_out_of_range must be an integer"),
    ("stop_before_zookeeper_write", {"write": "anything"}, "unknown ZooKeeper write 'anything'; allowed: "
                                                            "registration, controller_election, "),
    ("stop_after_zookeeper_write", {"write": "registration", "action": "explode"},
     "unknown stop action 'explode'; allowed: kill, pause"),
    ("hold_cleaner_at", {}, "fault point hold_cleaner_at needs phase"),
    ("hold_cleaner_at", {"phase": "swap"}, "unknown log cleaner phase 'swap'; allowed: offset-map-built, "
                                           "cleaned-partial, cleaned-written, swap-renamed, "),
    ("hold_cleaner_at", {"phase": ["swapped"]}, "unknown log cleaner phase ['swapped']"),
    ("hold_group_loading", {"partition": 0}, "fault point hold_group_loading has no parameter 'partition'; "
                                             "it takes none"),
    ("hold_heartbeats", {"ms": 500}, "fault point hold_heartbeats has no parameter 'ms'; it takes none"),
])
def test_a_bad_fault_point_is_refused_with_what_is_allowed(faults, point, params, message):
    with pytest.raises(FaultPointError) as refused:
        faults.apply(point, **params)
    assert message in str(refused.value)
    assert faults.in_force() == []


def test_fault_points_in_words():
    describe = fault_points.describe
    assert describe({"point": "hold_fetchers"}) == "replica fetchers held"
    assert describe({"point": "hold_offset_out_of_range"}) == (
        "replica fetchers held after an OFFSET_OUT_OF_RANGE answer, until released")
    assert describe({"point": "hold_offset_out_of_range", "ms": 300}) == (
        "replica fetchers held after an OFFSET_OUT_OF_RANGE answer, 300 ms each time")
    assert describe({"point": "drop_next_leader_and_isr", "count": 1}) == "the next 1 LeaderAndIsr request dropped"
    assert describe({"point": "delay_next_update_metadata", "count": 2, "ms": 500}) == (
        "the next 2 UpdateMetadata requests delayed 500 ms")
    assert describe({"point": "stop_before_zookeeper_write", "write": "registration", "action": "pause"}) == (
        "SIGSTOP before the ZooKeeper write registration")
    assert describe({"point": "hold_cleaner_at", "phase": "swapped"}) == "log cleaner held at phase swapped"
    assert describe({"point": "hold_cleaner_at", "phase": "swapped", "held": 1}) == (
        "log cleaner held at phase swapped (1 cleaner thread waiting there)")
    assert describe({"point": "hold_group_loading", "held": 0}) == "loading of offsets partitions held"
    assert describe({"point": "hold_group_loading", "held": 3}) == (
        "loading of offsets partitions held (3 offsets partitions waiting)")
    assert describe({"point": "hold_heartbeats"}) == "heartbeats to the active controller held"
    assert describe({"point": "hold_metadata"}) == "metadata log fetches held (the broker applies nothing new)"


# ---- the command handler -----------------------------------------------------------------------------------


def test_state_is_the_brokers_view(handler):
    assert handler.handle({"command": "state"}) == {"ok": True, "state": {"broker": 7, "partitions": []}}


def test_fault_and_heal_answer_what_is_in_force(handler, faults):
    answer = handler.handle(fault_request("drop_next_leader_and_isr", count=2))
    assert answer == {"ok": True, "faults": [{"point": "drop_next_leader_and_isr", "count": 2}]}
    assert handler.handle({"command": "faults"})["faults"] == answer["faults"]
    assert handler.handle({"command": "heal", "point": "drop_next_leader_and_isr"}) == {"ok": True, "faults": []}
    handler.handle({"command": "fault", "point": "hold_fetchers"})
    assert faults.fetchers_held
    assert handler.handle({"command": "heal"}) == {"ok": True, "faults": []}


@pytest.mark.parametrize("request_, error", [
    ({"command": "explode"}, "unknown command 'explode'; allowed: state, faults, fault, heal"),
    ({}, "unknown command None"),
    ({"command": "state", "broker": 1}, "state takes nothing, not 'broker'"),
    ({"command": "heal", "count": 1}, "heal takes point, not 'count'"),
    ({"command": "fault"}, "fault needs a point"),
    ({"command": "fault", "point": "hold_fetchers", "ms": 5}, "has no parameter 'ms'"),
    ({"command": "heal", "point": "explode"}, "unknown fault point 'explode'"),
])
def test_a_refused_request_is_one_sentence_and_changes_nothing(handler, faults, request_, error):
    answer = handler.handle(request_)
    assert answer["ok"] is False and error in answer["error"]
    assert faults.in_force() == []


def test_lines_in_lines_out(handler):
    answer, go_on = handler.handle_line(b'{"command": "faults"}\n')
    assert (decode(answer), go_on) == ({"ok": True, "faults": []}, True)
    answer, go_on = handler.handle_line(b"not json\n")
    assert decode(answer)["ok"] is False and "not a JSON line" in decode(answer)["error"] and not go_on
    answer, go_on = handler.handle_line(b"[1, 2]\n")
    assert decode(answer)["error"] == "a control message is a JSON object" and not go_on
    assert encode({"a": 1}) == b'{"a":1}\n'


def test_initial_faults_come_as_a_json_list_of_fault_requests():
    assert initial_faults(None) == [] and initial_faults("") == []
    requests = [fault_request("hold_fetchers"), fault_request("stop_before_zookeeper_write", write="registration")]
    assert initial_faults(json.dumps(requests)) == requests
    with pytest.raises(ControlError, match="ZKBROKER_LAB_FAULTS is not a JSON list"):
        initial_faults('{"command": "fault"}')


# ---- over a real Unix socket ---------------------------------------------------------------------------------


@pytest.fixture
def served(handler, tmp_path):
    """The broker's control server on a loop of its own; yields its socket path (deep enough to need the
    long-path workaround: a Unix socket address holds at most 107 bytes)."""
    path = tmp_path / ("d" * 60) / ("e" * 60) / "control.sock"
    loop = asyncio.new_event_loop()
    server = LabControlServer(path, handler)
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    yield path
    asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()
    assert not path.exists()  # the socket file goes with the server


def test_the_client_and_the_server_over_a_unix_socket(served, faults):
    assert len(str(served)) > 107
    with ControlClient(served) as client:
        assert client.state() == {"broker": 7, "partitions": []}
        assert client.fault("drop_next_leader_and_isr", count=3) == [{"point": "drop_next_leader_and_isr",
                                                                      "count": 3}]
        assert faults.requests["leader_and_isr"].remaining == 3
        with pytest.raises(ControlError, match="unknown fault point 'explode'"):
            client.fault("explode")
        assert client.faults() == [{"point": "drop_next_leader_and_isr", "count": 3}]  # the connection goes on
        assert client.heal() == []


def test_the_client_says_when_nothing_listens(tmp_path):
    with pytest.raises(ControlError, match="does not exist"):
        ControlClient(tmp_path / "control.sock").state()


def test_hold_transactional_produce_holds_the_next_requests_until_released(faults, tmp_path, monkeypatch):
    monkeypatch.setenv(timeline.ENV_VAR, str(tmp_path / "timeline.jsonl"))
    faults.source = "broker:1"

    async def scenario() -> tuple[list, list, list[bool]]:
        assert not await faults.hold_transactional_produce("t", ["out-0"])  # nothing in force: goes on
        faults.apply("hold_transactional_produce", count=2)
        assert faults.in_force() == [{"point": "hold_transactional_produce", "count": 2, "held": 0}]
        held = [asyncio.create_task(faults.hold_transactional_produce("t", [f"out-{p}"])) for p in (0, 1)]
        await asyncio.sleep(0.2)
        while_held = faults.in_force()
        assert await faults.hold_transactional_produce("t", ["out-2"]) is False  # the count is spent
        assert not any(task.done() for task in held)
        faults.apply("release_transactional_produce")
        after_release = faults.in_force()  # the released ones are no longer counted, even before they run
        return while_held, after_release, await asyncio.wait_for(asyncio.gather(*held), 5)

    while_held, after_release, results = asyncio.run(scenario())
    assert while_held == [{"point": "hold_transactional_produce", "count": 0, "held": 2}]
    assert after_release == [] and results == [True, True]
    fired = [e for e in timeline.read(tmp_path / "timeline.jsonl") if e["kind"] == "fault_fired"]
    assert [(e["point"], e["transactional_id"], e["partitions"]) for e in fired] == [
        ("hold_transactional_produce", "t", ["out-0"]), ("hold_transactional_produce", "t", ["out-1"])]
    assert fault_points.describe({"point": "hold_transactional_produce", "count": 1, "held": 0}) == (
        "the next 1 transactional Produce request held until released")
    assert fault_points.describe({"point": "hold_transactional_produce", "count": 0, "held": 2}) == (
        "transactional Produce requests held until released (2 held now)")


def test_healing_every_point_lets_held_produce_requests_go(faults):
    async def scenario() -> bool:
        faults.apply("hold_transactional_produce")
        task = asyncio.create_task(faults.hold_transactional_produce("t", ["out-0"]))
        await asyncio.sleep(0.1)
        faults.heal()
        return await asyncio.wait_for(task, 5)

    assert asyncio.run(scenario()) is True and faults.in_force() == []

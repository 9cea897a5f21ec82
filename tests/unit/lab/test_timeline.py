"""DIR/timeline.jsonl: DESIGN §10's shape, safe appends from many processes, and the plain-words lines."""

from __future__ import annotations

import json
import multiprocessing
import time

import pytest

from zkbroker import timeline
from zkbroker.lab.narration import clock, describe, format_line


def test_an_event_is_one_line_with_ts_source_kind_then_its_fields(tmp_path):
    path = tmp_path / "timeline.jsonl"
    before = time.time() * 1000 - 0.1  # ts is rounded to 0.1 ms
    timeline.append(path, "broker:2", "truncated", topic="t", partition=0, **{"from": 42, "to": 41},
                    reason="high-watermark truncation on becoming a follower")
    (line,) = path.read_text().splitlines()
    event = json.loads(line)
    assert list(event) == ["ts", "source", "kind", "topic", "partition", "from", "to", "reason"]
    assert before <= event["ts"] <= time.time() * 1000
    assert (event["source"], event["kind"], event["to"]) == ("broker:2", "truncated", 41)
    with pytest.raises(ValueError, match="ts"):
        timeline.encode("lab", "x", {"ts": 1})


def test_emit_writes_only_inside_a_lab(tmp_path, monkeypatch):
    path = tmp_path / "timeline.jsonl"
    monkeypatch.delenv(timeline.ENV_VAR, raising=False)
    timeline.emit("broker:1", "hw_moved", topic="t", partition=0, **{"from": 1, "to": 2})
    assert not path.exists()
    monkeypatch.setenv(timeline.ENV_VAR, str(path))
    timeline.emit("broker:1", "hw_moved", topic="t", partition=0, **{"from": 1, "to": 2})
    assert [e["kind"] for e in timeline.read(path)] == ["hw_moved"]


def _append_many(path: str, source: str, count: int) -> None:
    for i in range(count):
        timeline.append(path, source, "produce_acked", topic="t", partition=0, offset=i, acks=-1,
                        padding="x" * 3000)  # long lines: a torn or interleaved write would show


def test_several_processes_append_whole_lines(tmp_path):
    path = str(tmp_path / "timeline.jsonl")
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_append_many, args=(path, f"client:{n}", 200)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    events = timeline.read(path)
    assert len(events) == 800
    for n in range(4):
        assert [e["offset"] for e in events if e["source"] == f"client:{n}"] == list(range(200))


def test_read_leaves_out_a_line_still_being_written(tmp_path):
    path = tmp_path / "timeline.jsonl"
    timeline.append(path, "lab", "lab_down")
    with open(path, "a") as f:
        f.write('{"ts": 1, "source": "la')
    assert [e["kind"] for e in timeline.read(path)] == ["lab_down"]


def test_follow_yields_what_is_there_then_what_comes(tmp_path):
    path = tmp_path / "timeline.jsonl"
    timeline.append(path, "lab", "process_started", node="broker:1", pid=10)
    events = timeline.follow(path, poll_s=0.01)
    assert next(events)["pid"] == 10
    timeline.append(path, "lab", "process_killed", node="broker:1", pid=10, signal="SIGKILL")
    assert next(events)["kind"] == "process_killed"


@pytest.mark.parametrize(("event", "words"), [
    ({"kind": "truncated", "topic": "t", "partition": 0, "from": 42, "to": 41,
      "reason": "high-watermark truncation on becoming a follower"},
     "Truncating log t-0 to offset 41 (from 42): high-watermark truncation on becoming a follower"),
    ({"kind": "isr_changed", "topic": "t", "partition": 0, "broker": 1, "from": [1, 2, 3], "isr": [1]},
     "Partition [t,0] on broker 1: Shrinking ISR for partition [t,0] from 1,2,3 to 1"),
    ({"kind": "isr_changed", "topic": "t", "partition": 0, "from": [1], "isr": [1, 2]},
     "Partition [t,0]: Expanding ISR for partition [t,0] from 1 to 1,2"),
    ({"kind": "broker_registered", "broker": 2, "session": 255, "host": "10.0.0.2", "port": 9092},
     "Registered broker 2 at path /brokers/ids/2 with address 10.0.0.2:9092. (session 0xff)"),
    ({"kind": "controller_elected", "broker": 3, "epoch": 7},
     "[Controller 3]: Broker 3 starting become controller state transition; Controller 3 incremented epoch to 7"),
    ({"kind": "leader_changed", "topic": "t", "partition": 1, "leader": 2, "leader_epoch": 5, "isr": [2, 3],
      "zk_version": 9}, "Partition [t,1]: leader 2, leader epoch 5, ISR 2,3, zkVersion 9"),
    ({"kind": "produce_acked", "topic": "t", "partition": 0, "offset": 41, "acks": -1},
     "Partition [t,0]: offset 41 acknowledged (acks=-1)"),
    ({"kind": "fault_applied", "fault": "partition", "node": "broker:2", "peers": ["zookeeper"], "one_way": False},
     "Applied partition: broker:2 cut off from zookeeper (both directions)"),
    ({"kind": "fault_healed", "fault": "partition", "node": "broker:2", "peers": ["broker:1"], "one_way": True},
     "Healed partition: broker:2 cut off from broker:1 (what it sends is dropped)"),
    ({"kind": "zookeeper_role", "server": 2, "role": "leader"}, "ZooKeeper server 2 is leader (LEADING)"),
    ({"kind": "zookeeper_role", "server": 3, "role": "down"}, "ZooKeeper server 3 is down (does not answer)"),
    ({"kind": "process_killed", "node": "zookeeper:1", "pid": 12, "signal": "SIGKILL"},
     "zookeeper:1 killed with SIGKILL (pid 12)"),
    ({"kind": "something_new", "a": 1, "b": [1, 2]}, "something_new a=1 b=1,2"),
    ({"kind": "truncated", "topic": "t"}, "truncated topic=t"),  # fields missing: shown as they are
])
def test_events_in_plain_words(event, words):
    assert describe({"ts": 0, "source": "lab", **event}) == words


def test_a_line_is_the_time_the_source_and_the_words():
    ts = 1795467553765.2
    line = format_line({"ts": ts, "source": "broker:2", "kind": "lab_down"})
    assert line.startswith(f"{clock(ts)} broker:2      Lab stopped")
    assert clock(ts).endswith(".765")


@pytest.mark.parametrize(("event", "words"), [
    ({"kind": "leader_and_isr_sent", "topic": "t", "partition": 0, "broker": 2, "leader": 1, "leader_epoch": 3,
      "isr": [1, 2], "zk_version": 4, "controller": 1, "controller_epoch": 2},
     "Controller 1 epoch 2 sending become-follower LeaderAndIsr request (Leader:1,ISR:1,2,LeaderEpoch:3,"
     "ControllerEpoch:2,zkVersion:4) to broker 2 for partition [t,0]"),
    ({"kind": "leader_and_isr_sent", "broker": 3, "controller": 1, "controller_epoch": 2, "count": 500,
      "leading": 170}, "Controller 1 epoch 2 sending LeaderAndIsr request with 500 partition states (170 to lead) "
                       "to broker 3"),
    ({"kind": "leader_and_isr_applied", "topic": "t", "partition": 0, "broker": 1, "leader": 1, "leader_epoch": 3,
      "isr": [1], "zk_version": 4, "controller": 2, "controller_epoch": 2},
     "Broker 1 completed LeaderAndIsr request (Leader:1,ISR:1,LeaderEpoch:3,ControllerEpoch:2,zkVersion:4) from "
     "controller 2 epoch 2 for the become-leader transition for partition [t,0]"),
    ({"kind": "hw_moved", "topic": "t", "partition": 0, "from": 40, "to": 41, "role": "leader"},
     "High watermark for partition [t,0] updated to 41 (from 40, as leader)"),
    ({"kind": "broker_failed", "broker": 2, "epoch": 3}, "Broker failure callback for 2 (controller epoch 3)"),
    ({"kind": "broker_started", "broker": 2, "epoch": 3}, "New broker startup callback for 2 (controller epoch 3)"),
    ({"kind": "leader_changed", "topic": "t", "partition": 0, "leader": 2, "previous_leader": 1, "leader_epoch": 1,
      "isr": [2], "zk_version": 1}, "Partition [t,0]: leader 2 (was 1), leader epoch 1, ISR 2, zkVersion 1"),
    ({"kind": "admin_request", "api": "CreateTopics", "resource_type": "topic", "resource": "t", "error": "NONE",
      "message": None, "znodes": ["/config/topics/t", "/brokers/topics/t"], "validate_only": False},
     "CreateTopics for topic 't': NONE; wrote /config/topics/t, /brokers/topics/t"),
    ({"kind": "admin_request", "api": "AlterConfigs", "resource_type": "broker", "resource": "", "error":
      "INVALID_REQUEST", "message": "Cannot update these configs dynamically: broker.id", "znodes": [],
      "validate_only": True},
     "AlterConfigs (validate only) for broker '': INVALID_REQUEST: Cannot update these configs dynamically: "
     "broker.id"),
    ({"kind": "config_changed", "entity_type": "topics", "entity_name": "t", "topics": ["t"]},
     "Processed config change for topics/t (logs of t updated)"),
    ({"kind": "produce_acked", "topic": "t", "partition": 0, "offset": 41, "last_offset": 45, "acks": 1},
     "Partition [t,0]: offsets 41-45 acknowledged (acks=1)"),
    ({"kind": "produce_appended", "topic": "t", "partition": 0, "offset": 41, "last_offset": 45, "client": "rdkafka",
      "connection": "127.0.0.1:5000#3", "correlation_id": 7},
     "Partition [t,0]: offsets 41-45 appended from request 7 of client 'rdkafka' on connection 127.0.0.1:5000#3"),
    ({"kind": "fault_applied", "fault": "drop_next_leader_and_isr", "node": "broker:2", "count": 2},
     "Applied fault point drop_next_leader_and_isr on broker:2: the next 2 LeaderAndIsr requests dropped"),
    ({"kind": "fault_applied", "fault": "stop_before_zookeeper_write", "node": "broker:1", "write": "registration",
      "at_start": True}, "Applied fault point stop_before_zookeeper_write on broker:1 from its next start: SIGKILL "
                         "before the ZooKeeper write registration"),
    ({"kind": "fault_healed", "fault": "hold_fetchers", "node": "broker:3"},
     "Healed fault point hold_fetchers on broker:3"),
    ({"kind": "fault_healed", "fault": "all", "node": "broker:3"}, "Healed every fault point on broker:3"),
    ({"kind": "fault_fired", "point": "stop_after_zookeeper_write", "write": "isr_update", "action": "pause"},
     "Fault point stop_after_zookeeper_write: stopping itself with SIGSTOP right after the ZooKeeper write "
     "isr_update"),
    ({"kind": "fault_fired", "point": "drop_next_update_metadata", "remaining": 0},
     "Fault point drop_next_update_metadata: dropped a UpdateMetadata request (0 more to come)"),
    ({"kind": "fault_fired", "point": "hold_offset_out_of_range", "topic": "t", "partition": 0, "offset": 8,
      "leader": 2}, "Fault point hold_offset_out_of_range: fetch offset 8 of partition [t,0] is out of range at "
                    "leader 2; the fetcher waits until released before asking the leader for its offsets"),
    ({"kind": "fault_applied", "fault": "hold_cleaner_at", "node": "broker:2", "phase": "swap-renamed"},
     "Applied fault point hold_cleaner_at on broker:2: log cleaner held at phase swap-renamed"),
    ({"kind": "fault_fired", "point": "hold_cleaner_at", "phase": "swap-renamed"},
     "Fault point hold_cleaner_at: a log cleaner thread stopped at phase swap-renamed of a cleaning; it waits "
     "there until released"),
    ({"kind": "fault_fired", "point": "hold_group_loading", "topic": "__consumer_offsets", "partition": 7},
     "Fault point hold_group_loading: the loading of offsets partition [__consumer_offsets,7] waits until "
     "released (its groups answer COORDINATOR_LOAD_IN_PROGRESS)"),
    ({"kind": "fault_fired", "point": "stop_before_txn_markers", "transactional_id": "copier", "action": "kill"},
     "Fault point stop_before_txn_markers: the transaction coordinator stops itself with SIGKILL between the "
     "PrepareCommit of copier and its markers"),
    ({"kind": "fault_fired", "point": "hold_transactional_produce", "transactional_id": "late",
      "partitions": ["out-0"]},
     "Fault point hold_transactional_produce: a Produce request of transactional id late for out-0 waits unanswered "
     "until released"),
    ({"kind": "fault_fired", "point": "hold_heartbeats", "request": "heartbeat"},
     "Fault point hold_heartbeats: the broker's heartbeat to the active controller waits unsent until released"),
    ({"kind": "fault_fired", "point": "hold_metadata"},
     "Fault point hold_metadata: the broker's fetches of the metadata log wait unsent until released; it applies "
     "nothing the controller decides meanwhile"),
    ({"kind": "broker_fenced", "broker": 1, "epoch": 5}, "Broker 1 fenced (broker epoch 5)"),
    ({"kind": "broker_fenced", "broker": 1, "epoch": 9, "registered": True, "incarnation_id": "ab"},
     "Broker 1 registered under broker epoch 9, fenced until it has caught up"),
    ({"kind": "broker_unfenced", "broker": 1, "epoch": 9}, "Broker 1 unfenced (broker epoch 9)"),
])
def test_the_processes_events_in_plain_words(event, words):
    assert describe({"ts": 0, "source": "broker:1", **event}) == words


def test_emit_keeps_its_descriptor_and_appends_whole_lines(tmp_path, monkeypatch):
    path = tmp_path / "timeline.jsonl"
    monkeypatch.setenv(timeline.ENV_VAR, str(path))
    assert timeline.enabled()
    for offset in range(3):
        timeline.emit("broker:1", "produce_acked", topic="t", partition=0, offset=offset, acks=1)
    timeline.append(path, "lab", "lab_down")  # another writer in between
    timeline.emit("broker:1", "produce_acked", topic="t", partition=0, offset=3, acks=1)
    assert [e.get("offset") for e in timeline.read(path)] == [0, 1, 2, None, 3]
    monkeypatch.delenv(timeline.ENV_VAR)
    assert not timeline.enabled()

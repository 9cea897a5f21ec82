"""DIR/timeline.jsonl from inside real brokers and their controller: after a leader is killed, a broker paused
past its session and the dead one restarted, the timeline holds DESIGN §10's kinds with their fields, in an
order that tells the story, and `lab timeline` says each one in words."""

from __future__ import annotations

import pytest

from tests.integration.admin_support import tool
from tests.integration.harness import ZkView, wait_for
from tests.integration.lab_support import bootstrap, cluster_json, ok, partitions, produce_all, status
from zkbroker import timeline
from zkbroker.lab.narration import _WORDS, describe

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SESSION_MS = 3000
TOPIC = "t"


def test_the_timeline_tells_a_leader_kill_a_session_expiry_and_a_restart(lab_dir):
    # No HW checkpoint before the kill: the restarted broker's HW is 0, so it truncates when it follows.
    ok("up", "--dir", str(lab_dir), "--brokers", "3", "--config", f"zookeeper.session.timeout.ms={SESSION_MS}",
       "--config", "replica.high.watermark.checkpoint.interval.ms=600000")
    controller = status(lab_dir)["controller"]
    leader, third = [b for b in (1, 2, 3) if b != controller]
    code, _, err = tool("topics", "--zookeeper", cluster_json(lab_dir)["zookeeper"], "--create", "--topic", TOPIC,
                        "--replica-assignment", f"{leader}:{controller}:{third}")
    assert code == 0, err
    wait_for(lambda: len(partitions(status(lab_dir), TOPIC).get(0, (None, None, []))[2]) == 3, 30, "the ISR")
    assert produce_all(bootstrap(lab_dir), TOPIC, [b"a", b"b", b"c"]) == ([b"a", b"b", b"c"], [])

    ok("kill", "--dir", str(lab_dir), "--broker", str(leader))
    wait_for(lambda: partitions(status(lab_dir), TOPIC)[0][0] == controller, SESSION_MS / 1000 + 20, "a new leader")
    view = ZkView(cluster_json(lab_dir)["zookeeper"])
    ok("pause", "--dir", str(lab_dir), "--broker", str(third))
    try:  # past its session: wait until ZooKeeper expired it (a fixed sleep may fall short on a loaded machine)
        wait_for(lambda: third not in view.registered(), SESSION_MS / 1000 + 20,
                 "ZooKeeper to expire the paused broker")
    finally:
        view.close()
        ok("resume", "--dir", str(lab_dir), "--broker", str(third))
    ok("start", "--dir", str(lab_dir), "--broker", str(leader))
    wait_for(lambda: sorted(partitions(status(lab_dir), TOPIC)[0][2]) == [1, 2, 3], 60, "everyone back in the ISR")
    path = lab_dir / "timeline.jsonl"
    wait_for(lambda: any(e["kind"] == "broker_registered" and e["broker"] == third and e["ts"] > 0
                         for e in timeline.read(path)[-200:]), 30, "the paused broker to register again")
    events = timeline.read(path)

    def of(kind: str, **fields) -> list[dict]:
        return [e for e in events if e["kind"] == kind and all(e.get(k) == v for k, v in fields.items())]

    (elected,) = of("controller_elected")
    assert (elected["source"], elected["broker"], elected["epoch"]) == (f"controller:{controller}", controller, 1)
    registered = of("broker_registered", broker=third)
    assert len(registered) == 2 and registered[0]["session"] != registered[1]["session"]
    assert all(isinstance(e["session"], int) for e in registered)
    (expired,) = of("broker_expired", broker=third)
    assert (expired["source"], expired["session"]) == (f"broker:{third}", registered[0]["session"])
    assert registered[0]["ts"] < expired["ts"] < registered[1]["ts"]

    acked = of("produce_acked", source=f"broker:{leader}", topic=TOPIC, partition=0, acks=-1)
    written = of("produce_appended", source=f"broker:{leader}", topic=TOPIC, partition=0)
    assert acked and [(e["offset"], e["last_offset"]) for e in written] == [(e["offset"], e["last_offset"])
                                                                            for e in acked]
    assert all(isinstance(e["correlation_id"], int) and e["connection"] and e["client"] for e in written)
    assert all(w["ts"] <= a["ts"] for w, a in zip(written, acked))
    assert of("hw_moved", source=f"broker:{leader}", topic=TOPIC, partition=0, to=3)
    (failed,) = of("broker_failed", broker=leader)
    (moved,) = of("leader_changed", topic=TOPIC, previous_leader=leader)
    assert moved["source"] == f"controller:{controller}" and moved["leader"] == controller
    assert moved["leader_epoch"] == 1 and moved["isr"] == [controller, third] and failed["ts"] <= moved["ts"]
    sent = of("leader_and_isr_sent", topic=TOPIC, leader_epoch=1, broker=third)
    applied = of("leader_and_isr_applied", source=f"broker:{third}", topic=TOPIC, leader_epoch=1)
    assert sent and applied and sent[0]["zk_version"] == applied[0]["zk_version"] == moved["zk_version"]
    assert sent[0]["ts"] <= applied[0]["ts"]

    (truncated,) = of("truncated", source=f"broker:{leader}", topic=TOPIC)
    assert (truncated["from"], truncated["to"]) == (3, 0)
    assert truncated["reason"] == "high-watermark truncation on becoming a follower"
    rejoined = of("isr_changed", source=f"broker:{controller}", topic=TOPIC)
    assert rejoined and sorted(rejoined[-1]["isr"]) == [1, 2, 3] and len(rejoined[-1]["from"]) == 2
    assert of("zookeeper_role", server=1, role="standalone")
    assert of("process_killed", node=f"broker:{leader}")

    # Every kind has its words; `lab timeline` prints one line an event.
    unknown = {e["kind"] for e in events} - set(_WORDS)
    assert not unknown
    assert all(not describe(e).startswith(e["kind"]) for e in events)
    lines = ok("timeline", "--dir", str(lab_dir)).splitlines()
    assert len(lines) == len(events)
    assert any(f"Truncating log {TOPIC}-0 to offset 0 (from 3)" in line for line in lines)
    assert any(f"Broker failure callback for {leader}" in line for line in lines)

"""A follower's answer to OFFSET_OUT_OF_RANGE: the decision as a pure function (0.8.2's rule and KAFKA-2143's),
then the fetcher carrying it out against a leader that answers from a script (no network), with the lab's
fault point holding it between the out-of-range answer and its offset requests."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from zkbroker.config import KafkaConfig
from zkbroker.fault_points import FAULTS
from zkbroker.log.log import EARLIEST_TIME, LATEST_TIME, Log
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.message_set import build_message_set
from zkbroker.server.offset_out_of_range import KEEP_LOG, LEADER_START, OutOfRangeDecision, decide, needs_leader_start
from zkbroker.server.partition import Partition
from zkbroker.server.replica_fetcher import ReplicaFetcher, SourceBroker

# ---- the decision --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", [LEADER_START, KEEP_LOG])
def test_a_leader_end_below_ours_truncates_to_it_under_either_policy(policy):
    assert not needs_leader_start(8, 5)
    assert decide(8, 5, policy=policy) == OutOfRangeDecision("truncate_to", 5)


def test_0_8_2_drops_the_whole_log_whenever_the_leader_end_is_not_below_ours():
    # KAFKA-2143's race: the fetch at 8 was past the leader's end 5, but a write made it 8 before we asked
    assert needs_leader_start(8, 8)
    assert decide(8, 8, 0) == OutOfRangeDecision("start_at", 0)
    assert decide(8, 12, 3) == OutOfRangeDecision("start_at", 3)


def test_keep_log_fetches_on_from_our_own_end_when_the_leader_start_is_not_above_it():
    assert decide(8, 8, 0, KEEP_LOG) == OutOfRangeDecision("resume_at", 8)
    assert decide(8, 12, 8, KEEP_LOG) == OutOfRangeDecision("resume_at", 8)


def test_keep_log_still_starts_over_when_retention_has_passed_our_end():
    assert decide(8, 40, 20, KEEP_LOG) == OutOfRangeDecision("start_at", 20)
    assert decide(8, 40, 20, LEADER_START) == OutOfRangeDecision("start_at", 20)


def test_the_decision_refuses_a_missing_leader_start_or_an_unknown_policy():
    with pytest.raises(ValueError, match="needs the leader's log start"):
        decide(8, 8)
    with pytest.raises(ValueError, match="allowed: leader-start, keep-log"):
        decide(8, 5, policy="truncate-everything")


# ---- the fetcher carrying it out -----------------------------------------------------------------------------


def offsets_answer(offset: int):
    return SimpleNamespace(topics=[SimpleNamespace(partitions=[SimpleNamespace(error_code=ErrorCode.NONE,
                                                                                offsets=[offset])])])


def follower_of_2_with_8_records(tmp_path) -> Partition:
    p = Partition("t", 0, 1, Log(str(tmp_path / "t-0")))
    p.make_follower(2, leader_epoch=1, isr=(2,), replicas=(1, 2), zk_version=1, controller_epoch=1)
    p.log.append(build_message_set([(None, b"m%d" % i) for i in range(8)]))
    return p


def handle_out_of_range(tmp_path, policy: str, hold: bool = False):
    """The follower (LEO 8) handles an OFFSET_OUT_OF_RANGE answer; the leader's end is 5 until a write makes it
    8 (while the fault point holds us, when `hold`), its start 0. Returns the partition and the requests."""
    async def scenario():
        config = KafkaConfig.from_props({"broker.id": "1", "zookeeper.connect": "zk:2181",
                                         "replica.out.of.range.reset": policy})
        fetcher = ReplicaFetcher(config, SourceBroker(2, "127.0.0.1", 1))
        await fetcher.stop()  # its loop is not needed: the test drives one answer itself
        fetcher._stopped = False  # (a stopped fetcher would not wait in a hold)
        leader = {"end": 5 if hold else 8}
        asked: list[int] = []

        async def send(api_key, version, body):
            timestamp = body["topics"][0]["partitions"][0]["timestamp"]
            asked.append(timestamp)
            return offsets_answer(leader["end"] if timestamp == LATEST_TIME else 0)
        fetcher._connection.send = send
        p = follower_of_2_with_8_records(tmp_path)
        fetcher.add(p)
        if hold:
            FAULTS.apply("hold_offset_out_of_range")
        try:
            handling = asyncio.create_task(fetcher._handle_offset_out_of_range(p))
            if hold:
                await asyncio.sleep(0.3)
            held = not handling.done() and asked == []
            leader["end"] = 8  # a write reaches the leader before the follower asks for its end
            FAULTS.apply("release_offset_out_of_range")
            await asyncio.wait_for(handling, 5)
        finally:
            FAULTS.heal()
        return p, asked, held
    return asyncio.run(scenario())


def test_0_8_2_follower_drops_its_whole_log_when_a_write_reached_the_leader_in_between(tmp_path):
    p, asked, _ = handle_out_of_range(tmp_path, LEADER_START)
    assert asked == [LATEST_TIME, EARLIEST_TIME]
    assert (p.log_end_offset, p.log.log_start_offset, p.high_watermark) == (0, 0, 0)


def test_keep_log_follower_keeps_its_log_and_fetches_on_from_its_end(tmp_path):
    p, asked, _ = handle_out_of_range(tmp_path, KEEP_LOG)
    assert asked == [LATEST_TIME, EARLIEST_TIME]
    assert (p.log_end_offset, p.log.log_start_offset) == (8, 0)


def test_the_fault_point_holds_the_fetcher_before_it_asks_the_leader_until_released(tmp_path):
    p, asked, held = handle_out_of_range(tmp_path, LEADER_START, hold=True)
    assert held and asked == [LATEST_TIME, EARLIEST_TIME] and p.log_end_offset == 0

"""A leader's append rules, owned by Partition (0.8.2's appendMessagesToLeader and checkEnoughReplicasReachOffset):
the min.insync.replicas check before an acks=-1 append, offsets from the log, the HW move, the answer an acks=-1
produce waits for, and the reads and ListOffsets a leader serves. A Partition over a real Log in a tmp dir."""

from __future__ import annotations

import asyncio
import os

import pytest

from zkbroker.log.log import EARLIEST_TIME, LATEST_TIME, Log
from zkbroker.log.log_config import LogConfig
from zkbroker.protocol.errors import ErrorCode, NotEnoughReplicasError, OffsetOutOfRangeError, ProtocolError
from zkbroker.protocol.message_set import build_message_set, iter_messages
from zkbroker.server.partition import Partition


def messages(count: int) -> bytearray:
    return bytearray(build_message_set([(None, f"value-{i}".encode()) for i in range(count)]))


def leader(tmp_path, isr=(1, 2), replicas=(1, 2, 3), min_insync_replicas=2) -> Partition:
    """Broker 1 leading [t,0] with the given ISR and replicas."""
    p = Partition("t", 0, 1, Log(str(tmp_path / "t-0"), LogConfig(min_insync_replicas=min_insync_replicas)))
    p.make_leader(leader_epoch=1, isr=isr, replicas=replicas, zk_version=0, controller_epoch=1)
    return p


def test_the_log_numbers_the_messages_from_its_end(tmp_path):
    p = leader(tmp_path, isr=(1,), replicas=(1,), min_insync_replicas=1)
    first = p.append_messages_to_leader(messages(3), required_acks=1)
    second = p.append_messages_to_leader(messages(2), required_acks=1)
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert p.log_end_offset == 5


def test_a_leader_alone_in_its_isr_moves_the_hw_to_its_log_end_on_append(tmp_path):
    p = leader(tmp_path, isr=(1,), replicas=(1,), min_insync_replicas=1)
    p.append_messages_to_leader(messages(4), required_acks=1)
    assert p.high_watermark == 4


def test_the_hw_waits_for_every_isr_member(tmp_path):
    p = leader(tmp_path)
    p.append_messages_to_leader(messages(4), required_acks=-1)
    assert p.high_watermark == 0  # broker 2, in the ISR, has not fetched yet
    p.record_follower_fetch(2, 3)
    assert p.high_watermark == 3
    p.record_follower_fetch(2, 4)
    assert p.high_watermark == 4


def test_acks_all_below_min_insync_replicas_is_refused_and_writes_nothing(tmp_path):
    p = leader(tmp_path, isr=(1,), replicas=(1, 2), min_insync_replicas=2)
    with pytest.raises(NotEnoughReplicasError) as e:
        p.append_messages_to_leader(messages(3), required_acks=-1)
    assert e.value.errno == ErrorCode.NOT_ENOUGH_REPLICAS
    assert "Number of insync replicas for partition [t,0] is [1], below required minimum [2]" in str(e.value)
    assert (p.log_end_offset, p.high_watermark) == (0, 0)


@pytest.mark.parametrize("acks", [0, 1])
def test_min_insync_replicas_does_not_concern_acks_0_or_1(tmp_path, acks):
    p = leader(tmp_path, isr=(1,), replicas=(1, 2), min_insync_replicas=2)
    info = p.append_messages_to_leader(messages(3), required_acks=acks)
    assert info.last_offset == 2 and p.log_end_offset == 3


def test_a_message_set_the_log_refuses_writes_nothing(tmp_path):
    p = leader(tmp_path, isr=(1,), replicas=(1,), min_insync_replicas=1)
    corrupt = messages(2)
    corrupt[-1] ^= 0xFF  # the last message's value no longer matches its CRC
    with pytest.raises(ProtocolError) as e:
        p.append_messages_to_leader(corrupt, required_acks=1)
    assert e.value.error_code == ErrorCode.CORRUPT_MESSAGE
    assert (p.log_end_offset, p.high_watermark) == (0, 0)


def test_acks_all_waits_until_the_hw_passes_its_messages(tmp_path):
    p = leader(tmp_path)
    info = p.append_messages_to_leader(messages(3), required_acks=-1)
    required = info.last_offset + 1
    assert p.check_enough_replicas_reach_offset(required) is None
    p.record_follower_fetch(2, 2)
    assert p.check_enough_replicas_reach_offset(required) is None
    p.record_follower_fetch(2, 3)
    assert p.check_enough_replicas_reach_offset(required) == ErrorCode.NONE


def test_acks_all_answers_not_enough_replicas_after_append_when_the_isr_shrank_meanwhile(tmp_path):
    p = leader(tmp_path)
    info = p.append_messages_to_leader(messages(3), required_acks=-1)
    # Broker 2 falls out of the ISR: the leader alone is in it, so the HW reaches the log end at once.
    assert p.apply_isr_change((1,), written_against=0, new_version=1)
    assert p.maybe_increment_high_watermark()
    assert p.check_enough_replicas_reach_offset(info.last_offset + 1) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert p.log_end_offset == 3  # as in 0.8.2, the messages stay in the log


def test_acks_all_answers_request_timed_out_at_once_when_leadership_moved(tmp_path):
    p = leader(tmp_path)
    info = p.append_messages_to_leader(messages(3), required_acks=-1)
    p.make_follower(2, leader_epoch=2, isr=(2,), replicas=(1, 2, 3), zk_version=1, controller_epoch=1)
    assert p.check_enough_replicas_reach_offset(info.last_offset + 1) == ErrorCode.REQUEST_TIMED_OUT


def test_a_forgotten_partition_answers_waiting_produces_at_once(tmp_path):
    p = leader(tmp_path)
    info = p.append_messages_to_leader(messages(3), required_acks=-1)

    async def wait_for_forget() -> bool:
        waiter = p.waiter(asyncio.get_running_loop())
        p.forget()
        await asyncio.wait_for(waiter, timeout=5)
        return waiter.done()

    assert asyncio.run(wait_for_forget())
    assert not p.is_leader
    assert p.check_enough_replicas_reach_offset(info.last_offset + 1) == ErrorCode.REQUEST_TIMED_OUT


def test_an_append_wakes_the_requests_waiting_on_the_partition(tmp_path):
    p = leader(tmp_path)

    async def append_while_waiting() -> bool:
        waiter = p.waiter(asyncio.get_running_loop())
        assert not waiter.done()
        p.append_messages_to_leader(messages(1), required_acks=1)
        return waiter.done()

    assert asyncio.run(append_while_waiting())


def test_a_consumer_reads_up_to_the_hw_and_a_follower_to_the_log_end(tmp_path):
    p = leader(tmp_path)
    p.append_messages_to_leader(messages(4), required_acks=1)
    p.record_follower_fetch(2, 2)

    def offsets(records) -> list[int]:
        return [m.offset for m in iter_messages(os.pread(records.file.fileno(), records.size, records.position))]

    assert offsets(p.read(0, 10_000, from_follower=False)) == [0, 1]
    assert offsets(p.read(0, 10_000, from_follower=True)) == [0, 1, 2, 3]
    with pytest.raises(OffsetOutOfRangeError):
        p.read(5, 10_000, from_follower=False)


def test_list_offsets_caps_a_consumer_at_the_hw_and_a_follower_at_the_log_end(tmp_path):
    p = leader(tmp_path)
    p.append_messages_to_leader(messages(4), required_acks=1)
    p.record_follower_fetch(2, 2)
    assert p.offset_for_timestamp(EARLIEST_TIME, from_follower=False) == 0
    assert p.offset_for_timestamp(LATEST_TIME, from_follower=False) == 2
    assert p.offset_for_timestamp(LATEST_TIME, from_follower=True) == 4
    # A time after every write names the log end, capped like LATEST_TIME.
    assert p.offset_for_timestamp(2**62, from_follower=False) == 2
    assert p.offset_for_timestamp(2**62, from_follower=True) == 4


def test_the_leader_writes_its_epoch_into_record_batches(tmp_path):
    from zkbroker.protocol.record_batch import build_record_batch, read_header

    p = leader(tmp_path, isr=(1,), replicas=(1,), min_insync_replicas=1)
    p.append_messages_to_leader(bytearray(build_record_batch([(None, b"x", 1)])), required_acks=1)
    assert read_header(p.log.read(0, 1000).read_bytes()).partition_leader_epoch == 1


def test_a_followers_epoch_cache_learns_the_epochs_of_the_batches_it_copies(tmp_path):
    from zkbroker.log.leader_epoch import LeaderEpochCache
    from zkbroker.protocol.record_batch import build_record_batch

    p = Partition("t", 0, 2, Log(str(tmp_path / "t-0")))
    p.epoch_cache = LeaderEpochCache(p.log.dir)
    p.make_follower(1, leader_epoch=7, isr=(1, 2), replicas=(1, 2), zk_version=0, controller_epoch=1)
    fetched = (build_record_batch([(None, b"a", 1)] * 2, base_offset=0, partition_leader_epoch=3)
               + build_record_batch([(None, b"b", 1)], base_offset=2, partition_leader_epoch=5))
    p.append_as_follower(bytearray(fetched))
    p.append_as_follower(bytearray(build_message_set([(None, b"magic 0")], base_offset=3)))
    # the batches say who wrote them; messages without an epoch go to the leader we follow
    assert p.epoch_cache.entries == [(3, 0), (5, 2), (7, 3)]


def test_delete_records_moves_the_leaders_log_start_up_to_the_hw_and_not_past_it(tmp_path):
    p = leader(tmp_path, isr=(1,), replicas=(1,), min_insync_replicas=1)
    p.append_messages_to_leader(messages(5), required_acks=1)
    assert p.delete_records_on_leader(3) == 3 and p.log.log_start_offset == 3
    assert p.delete_records_on_leader(-1) == 5  # -1: the high watermark
    with pytest.raises(OffsetOutOfRangeError, match="larger than the high watermark 5"):
        p.delete_records_on_leader(6)


def test_the_low_watermark_waits_for_the_in_sync_followers(tmp_path):
    p = leader(tmp_path, isr=(1, 2), replicas=(1, 2, 3), min_insync_replicas=1)
    p.append_messages_to_leader(messages(5), required_acks=1)
    for follower in (2, 3):
        p.record_follower_fetch(follower, 5)
    p.record_follower_log_start(2, 0)
    p.record_follower_log_start(3, 0)
    assert p.delete_records_on_leader(4) == 0  # follower 2 has not followed yet; 3 is out of the ISR
    p.record_follower_log_start(2, 4)
    assert p.low_watermark == 4


def test_an_empty_follower_fetching_from_a_log_start_inside_a_batch_starts_its_log_at_the_batch(tmp_path):
    from zkbroker.protocol.record_batch import build_record_batch

    p = Partition("t", 0, 2, Log(str(tmp_path / "t-0")))
    p.make_follower(1, leader_epoch=1, isr=(1, 2), replicas=(1, 2), zk_version=0, controller_epoch=1)
    p.truncate_fully_and_start_at(3, "the leader's log starts at 3 (DeleteRecords)")
    p.append_as_follower(bytearray(build_record_batch([(None, b"x", 1)] * 5, base_offset=0)))
    assert (p.log.log_start_offset, p.log_end_offset) == (0, 5)
    assert p.log.maybe_increment_log_start_offset(3)  # what the same Fetch answer then says
    with pytest.raises(ValueError, match="Out of order"):  # a log that holds records refuses such a batch
        p.append_as_follower(bytearray(build_record_batch([(None, b"y", 1)] * 2, base_offset=4)))

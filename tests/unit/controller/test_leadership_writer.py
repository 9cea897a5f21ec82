"""The one leadership writer (controller/leadership_writer.py): read -> decide -> conditional write -> on a
version conflict read and decide again -> stop on a newer controller epoch; on a dict of `state` znodes."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from controller.context import LeaderIsrAndZkVersion
from controller.leadership_writer import WRITE_ATTEMPTS
from controller.log_lines import STATE_CHANGE, LogLine
from tests.unit.controller.contexts import StateStore, leadership


@dataclass(frozen=True)
class Bump:
    leadership: LeaderIsrAndZkVersion | None
    lines: tuple[LogLine, ...] = ()


def _bump(tp, current):
    """A decision on the state read: leader_epoch + 1, on the zkVersion read."""
    if current is None:
        return None
    return Bump(LeaderIsrAndZkVersion(current.leader, current.leader_epoch + 1, current.isr, 2, current.zk_version))


def _newer(tp, current):
    return LogLine(STATE_CHANGE, logging.ERROR, "newer epoch %d for [%s,%d]", (current.controller_epoch, *tp))


def test_decisions_are_written_on_the_version_read_and_returned_with_their_new_version():
    store = StateStore({("t", 0): leadership(1, (1, 2), leader_epoch=3, zk_version=4), ("t", 1): leadership(2, (2,))})
    written = store.writer().update([("t", 0), ("t", 1)], lambda tp: tp, _bump, _newer)
    assert {tp: state for tp, (_, state) in written.written.items()} == {
        ("t", 0): leadership(1, (1, 2), leader_epoch=4, zk_version=5), ("t", 1): leadership(2, (2,), 1, zk_version=1)}
    assert store.state("t", 0) == {"version": 1, "leader": 1, "leader_epoch": 4, "controller_epoch": 2, "isr": [1, 2]}
    assert len(store.batches) == 1 and not written.newer_epoch and not written.conflicted


def test_a_version_conflict_is_read_and_decided_again():
    store = StateStore({("t", 0): leadership(1, (1, 2), leader_epoch=3), ("t", 1): leadership(2, (2,))})
    decided_on = []

    def decide(tp, current):
        decided_on.append((tp, current.isr))
        return _bump(tp, current)

    def leader_shrinks_the_isr_once():  # the leader of [t,0] writes its ISR between our read and our write
        store.before_write = None
        store.put(("t", 0), leadership(1, (1,), leader_epoch=3, zk_version=1))

    store.before_write = leader_shrinks_the_isr_once
    written = store.writer().update([("t", 0), ("t", 1)], lambda tp: tp, decide, _newer)
    assert decided_on == [(("t", 0), (1, 2)), (("t", 1), (2,)), (("t", 0), (1,))]
    assert written.written[("t", 0)][1] == leadership(1, (1,), leader_epoch=4, zk_version=2)
    assert store.batches == [["/brokers/topics/t/partitions/0/state", "/brokers/topics/t/partitions/1/state"],
                             ["/brokers/topics/t/partitions/0/state"]]


def test_a_partition_that_keeps_conflicting_is_given_up_after_the_attempts():
    store = StateStore({("t", 0): leadership(1, (1, 2))})
    version = iter(range(1, 100))
    store.before_write = lambda: store.put(("t", 0), leadership(1, (1, 2), zk_version=next(version)))
    written = store.writer().update([("t", 0)], lambda tp: tp, _bump, _newer)
    assert written.conflicted == [("t", 0)] and not written.written
    assert len(store.batches) == WRITE_ATTEMPTS


def test_a_state_written_by_a_newer_controller_epoch_stops_that_partition_alone(caplog):
    store = StateStore({("t", 0): leadership(1, (1, 2), controller_epoch=3), ("t", 1): leadership(2, (2,))})
    with caplog.at_level(logging.ERROR, STATE_CHANGE):
        written = store.writer(epoch=2).update([("t", 0), ("t", 1)], lambda tp: tp, _bump, _newer)
    assert list(written.newer_epoch) == [("t", 0)] and list(written.written) == [("t", 1)]
    assert store.state("t", 0)["leader_epoch"] == 0
    assert caplog.messages == ["newer epoch 3 for [t,0]"]


def test_no_decision_writes_nothing_and_the_decisions_lines_are_logged(caplog):
    store = StateStore({("t", 0): leadership(1, (1,))})
    line = LogLine(STATE_CHANGE, logging.INFO, "left [%s,%d] alone", ("t", 0))
    with caplog.at_level(logging.INFO, STATE_CHANGE):
        written = store.writer().update([("t", 0), ("t", 1)], lambda tp: tp,
                                        lambda tp, current: Bump(None, (line,)) if current else None, _newer)
    assert not written.written and caplog.messages == ["left [t,0] alone"]
    assert store.batches == [[]]


def test_keys_may_carry_more_than_the_partition():
    store = StateStore({("t", 0): leadership(1, (1, 2))})
    written = store.writer().update([(("t", 0), 2)], lambda key: key[0], lambda key, current: _bump(key[0], current),
                                    _newer)
    assert list(written.written) == [(("t", 0), 2)]

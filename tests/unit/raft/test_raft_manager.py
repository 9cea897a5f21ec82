"""The Raft manager as the RaftClient the quorum controller uses (listener.py), on a one-voter quorum (its own
majority, so no network): appends come back as committed batches in log order, leader changes are told, a
snapshot replaces the listener's state at the next start, and NotLeaderError guards an old epoch."""

from __future__ import annotations

import asyncio
import threading

import pytest

from zkbroker.raft import messages as m
from zkbroker.raft.config import QuorumConfig
from zkbroker.raft.listener import NotLeaderError
from zkbroker.raft.metadata_log import MetadataLog
from zkbroker.raft.raft_manager import RaftManager

NO_OP = (20, 0, {})
FEATURE = (12, 0, {"name": "metadata.version", "feature_level": 19})


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def handle_commit(self, base_offset, last_offset, epoch, records):
        self.events.append(("commit", base_offset, last_offset, epoch, [r[0] for r in records]))

    def handle_load_snapshot(self, end_offset, epoch, records):
        self.events.append(("snapshot", end_offset, epoch, [r[0] for r in records]))

    def handle_leader_change(self, leader_id, epoch):
        self.events.append(("leader", leader_id, epoch))


def _manager(directory: str) -> RaftManager:
    config = QuorumConfig(node_id=1, voters=frozenset({1}), election_timeout_ms=10)
    return RaftManager(config, {1: ("127.0.0.1", 1)}, MetadataLog(directory))


async def _until(condition, timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.005)


async def _leading(directory: str) -> tuple[RaftManager, Recorder, int]:
    """A started one-voter manager with a listener, once it leads; its epoch."""
    manager, listener = _manager(directory), Recorder()
    manager.start()
    manager.register(listener)
    await _until(lambda: manager.leader_and_epoch()[0] == 1)
    return manager, listener, manager.leader_and_epoch()[1]


def test_appends_commit_in_order_and_a_snapshot_is_loaded_at_the_next_start(tmp_path):
    async def first_run() -> tuple[int, list]:
        manager, listener, epoch = await _leading(str(tmp_path))
        last = manager.schedule_append(epoch, [FEATURE, NO_OP])
        manager.schedule_append(epoch, [NO_OP])
        await _until(lambda: sum(e[0] == "commit" for e in listener.events) == 2)
        with pytest.raises(NotLeaderError):
            manager.schedule_append(epoch + 1, [NO_OP])
        manager.create_snapshot(last + 1, epoch, [FEATURE, NO_OP])
        await manager.shutdown()
        return epoch, listener.events

    epoch, events = asyncio.run(first_run())
    assert ("leader", 1, epoch) in events
    commits = [e for e in events if e[0] == "commit"]
    assert commits == [("commit", 1, 2, epoch, [12, 20]), ("commit", 3, 3, epoch, [20])]  # offset 0: LeaderChange

    async def second_run() -> list:
        manager, listener = _manager(str(tmp_path)), Recorder()
        manager.start()
        manager.register(listener)
        await _until(lambda: any(e[0] == "commit" for e in listener.events))
        await manager.shutdown()
        return listener.events

    events = asyncio.run(second_run())
    snapshot = [e for e in events if e[0] == "snapshot"]
    assert snapshot == [("snapshot", 3, epoch, [12, 20])]
    assert [e for e in events if e[0] == "commit"][0][1:3] == (3, 3)  # the log after the snapshot, not from 0


def test_a_quorum_request_from_another_cluster_is_refused_with_inconsistent_cluster_id(tmp_path):
    async def run():
        config = QuorumConfig(node_id=1, voters=frozenset({1, 2}), cluster_id="fMCL8kv1SWm87L_Md-I2hg")
        manager = RaftManager(config, {1: ("127.0.0.1", 1), 2: ("127.0.0.1", 1)}, MetadataLog(str(tmp_path)))
        manager.start()
        answer = await manager.handle(2, m.VoteRequest("another-cluster-id-xxxx", 5, 2, 0, 0))
        await manager.shutdown(grace_s=0)
        return answer, manager.node.epoch

    answer, epoch = asyncio.run(run())
    assert answer.error_code == 104 and not answer.vote_granted  # INCONSISTENT_CLUSTER_ID
    assert epoch == 0  # the request moved nothing


def test_in_a_lab_the_raft_manager_writes_its_states_and_commits_to_the_timeline(tmp_path, monkeypatch):
    from zkbroker import timeline

    path = tmp_path / "timeline.jsonl"
    monkeypatch.setenv(timeline.ENV_VAR, str(path))

    async def run():
        manager = _manager(str(tmp_path / "data"))
        manager.start()
        await _until(lambda: manager.leader_and_epoch()[0] == 1)
        manager.schedule_append(manager.leader_and_epoch()[1], [NO_OP])
        await manager.shutdown(grace_s=0)

    asyncio.run(run())
    events = timeline.read(path)
    states = [(e["state"], e["epoch"], e["leader"]) for e in events if e["kind"] == "raft_state"]
    # The state each step ends in (a lone voter stands and wins within one step), then its resignation.
    assert states == [("unattached", 0, None), ("leader", 1, 1), ("resigned", 1, 1)]
    assert all(e["source"] == "controller:1" for e in events)
    assert [e["offset"] for e in events if e["kind"] == "metadata_committed"][-1] == 2


def test_a_read_mixing_a_leader_change_among_data_hands_the_listener_data_records_only_in_runs_of_one_epoch():
    from zkbroker.raft import messages as m
    from zkbroker.raft.raft_manager import _data_runs

    def data(offset, epoch):
        return m.LogEntry(offset, epoch, b"x")

    change = m.LogEntry(3, 2, m.LeaderChangeMessage(0, 1, (1,), (1,)))
    runs = _data_runs([data(1, 1), data(2, 1), change, data(4, 2), data(5, 2)])
    assert [[(e.offset, e.epoch) for e in run] for run in runs] == [[(1, 1), (2, 1)], [(4, 2), (5, 2)]]
    assert _data_runs([change]) == []


def test_the_leader_hands_its_listeners_the_records_it_appended_and_a_later_listener_reads_them_from_the_log(
        tmp_path):
    from zkbroker.metadata.records import PARTITION_CHANGE, record

    change = record(PARTITION_CHANGE, partition_id=7, topic_id=bytes(range(16)), leader=2, isr=[2, 3])

    class Keeper(Recorder):
        def __init__(self) -> None:
            super().__init__()
            self.records: list = []

        def handle_commit(self, base_offset, last_offset, epoch, records):
            super().handle_commit(base_offset, last_offset, epoch, records)
            self.records += records

    async def run():
        manager, listener, later = _manager(str(tmp_path)), Keeper(), Keeper()
        manager.start()
        manager.register(listener)
        await _until(lambda: manager.leader_and_epoch()[0] == 1)
        manager.schedule_append(manager.leader_and_epoch()[1], [change, record(20)])  # a NoOpRecord
        await _until(lambda: len(listener.records) == 2)
        manager.register(later)  # handed what is committed, from the log's bytes
        await manager.shutdown(grace_s=0)
        return manager, listener, later

    manager, listener, later = asyncio.run(run())
    assert listener.records[0] is change  # not decoded again: the very record appended
    decoded = later.records[0]
    assert decoded is not change and decoded[:2] == change[:2]  # the same record, through the codec
    assert decoded[2]._replace(unknown_tagged_fields=()) == change[2]
    assert manager._own_batches == {}  # nothing kept once handed over


def test_a_run_read_from_the_log_takes_the_leaders_own_batches_whole_and_decodes_the_rest(tmp_path):
    from zkbroker.protocol.metadata_records import encode_frame

    manager = _manager(str(tmp_path))
    own = [(20, 0, {"marker": "own"}), (20, 0, {"marker": "own too"})]
    manager._own_batches = {5: (6, 1, own), 8: (9, 1, [NO_OP])}  # the batch at 8 runs past the run read
    run = [m.LogEntry(offset, 1, encode_frame(*NO_OP)) for offset in range(4, 9)]
    records = manager._records_of(run)
    assert records[1:3] == own and records[1] is own[0]
    assert [r[0] for r in records] == [20] * 5 and records[0][2] == records[3][2] == records[4][2]
    assert list(manager._own_batches) == [8]  # not taken: only part of it was read


def test_records_appended_in_another_form_than_the_decoded_one_come_back_decoded_from_the_log(tmp_path):
    class Keeper(Recorder):
        def __init__(self) -> None:
            super().__init__()
            self.records: list = []

        def handle_commit(self, base_offset, last_offset, epoch, records):
            self.records += records

    async def run():
        manager, listener = _manager(str(tmp_path)), Keeper()
        manager.start()
        manager.register(listener)
        await _until(lambda: manager.leader_and_epoch()[0] == 1)
        manager.schedule_append(manager.leader_and_epoch()[1], [FEATURE])  # a dict, as the lab's append gives
        await _until(lambda: len(listener.records) == 1)
        await manager.shutdown(grace_s=0)
        return listener.records

    [(api_key, version, rec)] = asyncio.run(run())
    assert (api_key, version) == (12, 0) and rec.feature_level == 19 and not isinstance(rec, dict)


def test_a_snapshot_is_written_off_the_loop_and_joins_the_log_only_once_stored(tmp_path):
    """At 100,000 partitions a snapshot takes seconds to encode and write; the loop (fetches, commits) goes on
    meanwhile, the snapshot joins the log once its file is stored, and one asked for meanwhile is skipped."""
    async def run() -> None:
        manager, listener, epoch = await _leading(str(tmp_path))
        last = manager.schedule_append(epoch, [FEATURE, NO_OP])
        await _until(lambda: any(e[0] == "commit" for e in listener.events))
        release, entered = threading.Event(), threading.Event()
        store = manager.log.store_snapshot_file

        def slow_store(snapshot, data):
            entered.set()
            assert release.wait(5), "the test never released the write"
            store(snapshot, data)

        manager.log.store_snapshot_file = slow_store
        manager.create_snapshot(last + 1, epoch, [FEATURE, NO_OP])
        await _until(entered.is_set)
        later = manager.schedule_append(epoch, [NO_OP])  # the loop goes on while the file is being written
        await _until(lambda: any(e[0] == "commit" and e[2] == later for e in listener.events))
        manager.create_snapshot(later + 1, epoch, [FEATURE, NO_OP, NO_OP])  # skipped: one is being written
        assert manager.log.latest_snapshot is None
        release.set()
        await _until(lambda: manager.log.latest_snapshot is not None)
        assert manager.log.latest_snapshot == m.SnapshotId(last + 1, epoch)
        await manager.shutdown()

    asyncio.run(run())
    assert [p.name for p in tmp_path.rglob("*.checkpoint*")] == [f"{3:020d}-{1:010d}.checkpoint"]

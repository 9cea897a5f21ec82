"""The metadata log on disk: the same answers as the in-memory model, and what survives a reopen."""

from __future__ import annotations

import os

import pytest

from tests.unit.raft.helpers import VOTERS, make_node, sends, stand
from tests.unit.raft.test_wire import through_the_wire
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.metadata_records import iter_metadata_log
from zkbroker.protocol.record_batch import read_header
from zkbroker.raft import messages as m
from zkbroker.raft.batches import StoredEntries, batch_headers, batches_to_entries, entries_to_batches
from zkbroker.raft.log import InMemoryLog
from zkbroker.raft.messages import LeaderChangeMessage, LogEntry, OffsetAndEpoch, SnapshotId
from zkbroker.raft.metadata_log import MAX_BATCH_SIZE_BYTES, PARTITION_DIR, MetadataLog
from zkbroker.raft.quorum_state import ElectionState
from zkbroker.raft.wire import KAFKA_37_VERSIONS, to_body


def _entries(start: int, epoch: int, n: int, leader_change: bool = False) -> list[LogEntry]:
    out = []
    for i in range(n):
        record = LeaderChangeMessage(1, (1, 2, 3), (1, 2)) if leader_change and i == 0 else b"r%d" % (start + i)
        out.append(LogEntry(start + i, epoch, record))
    return out


def _fill(log) -> None:
    log.append(_entries(0, 1, 4, leader_change=True))
    log.append(_entries(4, 1, 2))
    log.append(_entries(6, 3, 5, leader_change=True))


def test_the_disk_log_answers_as_the_in_memory_model(tmp_path):
    disk, model = MetadataLog(str(tmp_path)), InMemoryLog()
    _fill(disk)
    _fill(model)
    for epoch in range(6):
        assert disk.end_offset_for_epoch(epoch) == model.end_offset_for_epoch(epoch)
    assert disk.read(2, 10**6) == model.read(2, 10**6)
    assert (disk.end_offset, disk.last_fetched_epoch, disk.start_offset) == (11, 3, 0)


def test_a_read_returns_at_least_one_batch_whatever_max_bytes(tmp_path):
    log = MetadataLog(str(tmp_path))
    _fill(log)
    assert [e.offset for e in log.read(1, 1)] == [1, 2, 3]  # the rest of the batch holding offset 1


def test_the_log_and_its_epochs_survive_a_reopen_in_kafkas_format(tmp_path):
    log = MetadataLog(str(tmp_path))
    _fill(log)
    log.flush()
    log.close()
    again = MetadataLog(str(tmp_path))
    assert (again.end_offset, again.last_fetched_epoch) == (11, 3)
    assert again.end_offset_for_epoch(2) == OffsetAndEpoch(6, 1)
    segment = os.path.join(str(tmp_path), PARTITION_DIR, "00000000000000000000.log")
    with open(segment, "rb") as f:
        control = [r for _, _, r in iter_metadata_log_safe(f.read())]
    assert control[0].type == 2 and control[0].value.leader_id == 1


def iter_metadata_log_safe(data: bytes):
    # Data records here are opaque test bytes, not frames: read only the control batches.
    from zkbroker.protocol.record_batch import read_header
    pos = 0
    while pos < len(data):
        header = read_header(data, pos)
        if header.is_control:
            yield from iter_metadata_log(data[pos:pos + header.size])
        pos += header.size


def test_truncation_inside_a_batch_keeps_the_records_before_the_cut(tmp_path):
    log = MetadataLog(str(tmp_path))
    _fill(log)
    log.truncate_to(8)
    assert (log.end_offset, log.last_fetched_epoch) == (8, 3)
    assert [e.offset for e in log.read(6, 10**6)] == [6, 7]
    log.truncate_to(5)
    assert (log.end_offset, log.last_fetched_epoch) == (5, 1)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(5, 1)
    log.append(_entries(5, 4, 1))
    log.close()
    again = MetadataLog(str(tmp_path))
    assert [(e.offset, e.epoch) for e in again.read(3, 10**6)] == [(3, 1), (4, 1), (5, 4)]


def test_a_snapshot_deletes_the_segments_wholly_below_it(tmp_path):
    log = MetadataLog(str(tmp_path), segment_bytes=200)
    for i in range(10):
        log.append(_entries(i * 3, 1, 3))
    assert log.start_offset == 0
    log.write_snapshot(SnapshotId(16, 1), b"snapshot bytes")
    assert 0 < log.start_offset <= 16
    assert log.end_offset == 30 and log.read(log.start_offset, 100)
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(30, 1)
    log.close()
    again = MetadataLog(str(tmp_path), segment_bytes=200)
    assert again.latest_snapshot == SnapshotId(16, 1)
    assert again.read_snapshot_bytes(SnapshotId(16, 1)) == b"snapshot bytes"


def test_an_installed_snapshot_restarts_the_log_at_its_end(tmp_path):
    log = MetadataLog(str(tmp_path))
    _fill(log)
    log.install_snapshot(SnapshotId(40, 7), b"x")
    assert (log.start_offset, log.end_offset, log.last_fetched_epoch) == (40, 40, 7)
    assert log.end_offset_for_epoch(7) == OffsetAndEpoch(40, 7)
    log.append(_entries(40, 8, 2))
    assert log.end_offset_for_epoch(7) == OffsetAndEpoch(40, 7)
    with pytest.raises(ValueError, match="before the log start"):
        log.truncate_to(10)


def test_a_read_from_a_batch_boundary_carries_the_stored_batches_sent_as_they_are(tmp_path):
    disk, model = MetadataLog(str(tmp_path)), InMemoryLog()
    _fill(disk)
    _fill(model)
    stored = disk.read(4, 10**6)
    assert isinstance(stored, StoredEntries) and stored == model.read(4, 10**6)
    assert entries_to_batches(stored) == stored.raw  # no encoding: the bytes on disk
    assert batches_to_entries(entries_to_batches(stored)) == stored
    inside = disk.read(2, 10**6)  # from inside a batch: not as stored, encoded from the entries
    assert not isinstance(inside, StoredEntries) and inside == model.read(2, 10**6)


def _batch_sizes(log: MetadataLog) -> list[tuple[int, int, int]]:
    """(base offset, last offset, size) of every batch in the log's segments, as stored."""
    out = []
    for name in sorted(os.listdir(log.dir)):
        if name.endswith(".log"):
            with open(os.path.join(log.dir, name), "rb") as f:
                data = f.read()
            out += [(base, last, read_header(data, position).size)
                    for position, base, last, _ in batch_headers(data)]
    return out


def test_a_follower_fed_a_many_batch_fetch_answer_stores_the_leaders_batches(tmp_path):
    """A Fetch answer of one epoch holding many batches, through the wire, is stored by the follower batch for
    batch as the leader stored it, never as one batch as large as the answer."""
    leader = make_node(node_id=1, log=MetadataLog(str(tmp_path / "leader")), stored=ElectionState(1, voters=VOTERS))
    requests = sends(stand(leader), m.VoteRequest)
    leader.handle(0, 2, requests[0].correlation_id, m.VoteResponse(m.NONE, -1, leader.epoch, True))
    for part in range(20):  # twenty appends of the leader's epoch: twenty batches of 50 records
        leader.append(10 + part, [b"part %d record %d " % (part, i) + b"x" * 100 for i in range(50)])
    follower = make_node(node_id=2, log=MetadataLog(str(tmp_path / "follower")),
                         stored=ElectionState(leader.epoch, leader_id=1, voters=VOTERS), now=100, polled=False)
    (request,) = sends(follower.poll(100), m.FetchRequest)
    assert request.message.fetch_offset == 0 and request.message.partition_max_bytes >= 1 << 20
    (answer,) = sends(leader.handle(100, 2, request.correlation_id, request.message), m.FetchResponse)
    received = through_the_wire(answer.message, request.correlation_id, is_request=False)
    assert len(received.records) == leader.log.end_offset  # one answer holds the whole log
    follower.handle(101, 1, request.correlation_id, received)
    assert follower.log.end_offset == leader.log.end_offset
    leaders, followers = _batch_sizes(leader.log), _batch_sizes(follower.log)
    assert len(leaders) == 21 and followers == leaders
    assert follower.log.read(0, 1 << 30) == leader.log.read(0, 1 << 30)


def test_recovery_keeps_a_valid_batch_above_the_brokers_bound_below_the_metadata_logs_max(tmp_path):
    """A batch of 4 MB (above message.max.bytes' 1,000,012, below the metadata log's 8 MiB, Kafka's
    max.message.bytes for __cluster_metadata) survives the recovery of an unclean reopen, with what follows it."""
    log = MetadataLog(str(tmp_path))
    log.append(_entries(0, 1, 2, leader_change=True))
    log.append([LogEntry(2 + i, 1, b"%06d" % i + b"y" * 40_000) for i in range(100)])  # one batch of 4 MB
    log.append(_entries(102, 1, 3))
    log.flush()
    sizes = _batch_sizes(log)
    assert 1_000_012 < max(size for _, _, size in sizes) < MAX_BATCH_SIZE_BYTES
    log.close()
    os.remove(os.path.join(log.dir, "00000000000000000000.index"))  # no clean shutdown: the segment is recovered
    again = MetadataLog(str(tmp_path))
    assert again.end_offset == 105 and _batch_sizes(again) == sizes
    assert [e.offset for e in again.read(0, 1 << 30)] == list(range(105))


def test_a_leader_answers_a_fetch_with_its_stored_batches_without_decoding_their_records(tmp_path, monkeypatch):
    """Decoding an answer's records only to send the same bytes on took about 0.6 s a megabyte: an 8 MiB answer
    outlasted the asker's 2 s request timeout, and the observer retrying the same Fetch never got one."""
    import zkbroker.raft.batches as batches

    leader = make_node(node_id=1, log=MetadataLog(str(tmp_path)), stored=ElectionState(1, voters=VOTERS))
    requests = sends(stand(leader), m.VoteRequest)
    leader.handle(0, 2, requests[0].correlation_id, m.VoteResponse(m.NONE, -1, leader.epoch, True))
    for part in range(5):
        leader.append(10 + part, [b"record %d" % i for i in range(100)])
    decoded = []
    real = batches._decode
    monkeypatch.setattr(batches, "_decode", lambda data: decoded.append(len(data)) or real(data))
    request = m.FetchRequest("", 7, 0, leader.epoch, 0, 0, 0, 1 << 20)  # an observer's, from offset 0
    (answer,) = sends(leader.handle(100, 7, 1, request), m.FetchResponse)
    body = to_body(answer.message, KAFKA_37_VERSIONS[ApiKey.FETCH])
    assert decoded == []  # read, framed and sent as stored
    received = through_the_wire(answer.message, 1, is_request=False)
    assert decoded and len(received.records) == leader.log.end_offset == 501  # the receiver decodes them
    assert body["topics"][0]["partitions"][0]["records"] == received.records.raw

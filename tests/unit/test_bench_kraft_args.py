"""bench/kraft.py's and bench/kraft_vs_zk.py's argument handling (the benches themselves run outside the suite)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import kraft  # noqa: E402
import kraft_vs_zk  # noqa: E402


def test_kraft_vs_zk_takes_comma_separated_sizes_rounds_and_in_memory_counts():
    args = kraft_vs_zk.parse_args(["--sizes", "10000,100000", "--rounds", "10,5", "--in-memory", "1000000"])
    assert (args.sizes, args.rounds, args.in_memory) == ([10000, 100000], [10, 5], [1000000])
    assert kraft_vs_zk.parse_args(["--sizes", "", "--in-memory", "10000"]).sizes == []


@pytest.mark.parametrize("argv", [["--sizes", "ten"], ["--rounds", "0"], ["--sizes", "2"], ["--only", "both"]])
def test_kraft_vs_zk_refuses_bad_arguments_with_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        kraft_vs_zk.parse_args(argv)
    assert exc.value.code == 2 and "usage:" in capsys.readouterr().err


def test_kraft_takes_records_and_stand_ins_and_refuses_a_count_below_one(capsys):
    args = kraft.parse_args(["--partitions", "10000", "--records", "100000", "--stand-ins"])
    assert (args.partitions, args.records, args.stand_ins) == (10000, 100000, True)
    with pytest.raises(SystemExit):
        kraft.parse_args(["--rounds", "0"])
    assert "must be positive" in capsys.readouterr().err


def test_kraft_takes_a_replication_factor_of_one_to_three():
    assert kraft.parse_args([]).replication_factor == 3
    assert kraft.parse_args(["--replication-factor", "1"]).replication_factor == 1
    with pytest.raises(SystemExit):
        kraft.parse_args(["--replication-factor", "4"])


class _Limits:
    """resource's RLIMIT_NOFILE calls, with a hard limit only a privileged process may raise."""

    RLIMIT_NOFILE = 7
    RLIM_INFINITY = -1

    def __init__(self, soft, hard, privileged):
        self.limits, self.privileged = (soft, hard), privileged

    def getrlimit(self, _which):
        return self.limits

    def setrlimit(self, _which, limits):
        if limits[1] > self.limits[1] and not self.privileged:
            raise ValueError("not allowed to raise maximum limit")
        self.limits = limits


@pytest.mark.parametrize(("privileged", "hard", "after"), [
    (True, 20_000, (31_000, 31_000)),  # root with CAP_SYS_RESOURCE: the hard limit raised to the need
    (False, 20_000, (20_000, 20_000)),  # not: the soft limit raised to the hard one, no further
    (False, 50_000, (50_000, 50_000)),  # the hard limit is enough: the soft one raised to it
])
def test_the_bench_raises_the_brokers_open_files_limit_as_far_as_it_may(monkeypatch, privileged, hard, after):
    monkeypatch.setattr(kraft, "resource", _Limits(1024, hard, privileged))
    assert kraft.raise_nofile_limit(31_000) == after


def test_a_stand_ins_image_written_as_a_snapshot_loads_back_the_same():
    """A stand-in snapshots its image as a real broker does (BrokerSnapshotWriter); what a restart loads from that
    snapshot is the image it wrote."""
    from zkbroker.metadata.records import PARTITION, PARTITION_CHANGE, TOPIC, record
    from zkbroker.protocol.metadata_records import build_snapshot, read_snapshot

    topic_id = bytes(range(16))
    image = kraft.StandInImage()
    image.handle_commit(0, 2, 4, [
        record(TOPIC, name="bench-0", topic_id=topic_id),
        record(PARTITION, partition_id=0, topic_id=topic_id, replicas=[1, 2, 3], isr=[1, 2, 3],
               removing_replicas=[], adding_replicas=[], leader=1, leader_epoch=0, partition_epoch=0),
        record(PARTITION_CHANGE, partition_id=0, topic_id=topic_id, isr=[2, 3], leader=2)])
    _, records = read_snapshot(build_snapshot([image.image.to_records()], epoch=image.epoch, timestamp=0,
                                              last_contained_log_timestamp=0))
    restarted = kraft.StandInImage()
    restarted.handle_load_snapshot(image.offset + 1, image.epoch, records)
    assert (restarted.topics, restarted.partitions, restarted.offset, restarted.epoch) == (
        {topic_id: "bench-0"}, {(topic_id, 0): [(1, 2, 3), (2, 3), 2, 1, 1]}, 2, 4)

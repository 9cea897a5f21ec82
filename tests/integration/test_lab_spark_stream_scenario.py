"""The spark-stream-during-failover scenario, run as a user runs it (`zkbroker lab scenario run ... --mode both --json`:
the two modes side by side, each on a lab of its own -- real ZooKeeper, real broker processes, confluent-kafka
producers, and a real streaming ingest (spark-ingest --stream's query, readStream through zkkafka into a Parquet file
sink) in a process of its own), with its verdicts, what its sink holds and what it told the timeline: in 0.8 mode
the sink keeps m2, which high-watermark truncation took from the log, and the stream goes past m3's first record
without a word; with leader epochs the sink holds m1, m2 and m3 where the log has them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.test_lab_scenarios import SEED, VERDICTS
from zkbroker import timeline
from zkbroker.lab.spark_stream import SparkStream, status_file

# Its Spark JVMs take turns with the Spark cluster's (tests/side_by_side.py). Both modes run at once, in one test.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.xdist_group("spark-processes")]

NAME = "spark-stream-during-failover"


def value(mode: str, record: str) -> bytes:
    return f"{NAME}/{mode}/seed{SEED}/{record}".encode()


def test_a_streaming_ingest_through_a_leader_failover_in_both_truncation_modes(tmp_path):
    directory = tmp_path / "lab"
    done = subprocess.run([sys.executable, "-m", "zkbroker", "lab", "scenario", "run", NAME, "--mode", "both",
                           "--seed", str(SEED), "--dir", str(directory), "--json"],
                          capture_output=True, text=True, timeout=540)
    narration = done.stderr
    assert done.stdout.strip(), narration
    runs = {run["mode"]: run for run in json.loads(done.stdout)["runs"]}
    assert {mode: run["verdict"] for mode, run in runs.items()} == VERDICTS[NAME], narration
    assert all(run["expected"] for run in runs.values()) and done.returncode == 0, narration

    for mode, run in runs.items():
        lab = directory / mode
        assert run["acknowledged"] == 4, narration  # m1, m2 and m3's two records
        sink = SparkStream("s", "t", lab, []).result()
        held = [(offset, v) for _, _, offset, v in sink.rows]
        m1, m2, m3 = value(mode, "m1/0"), value(mode, "m2/0"), [value(mode, f"m3/{i}") for i in range(2)]
        if mode == "0.8":
            # The sink has m1 and m2 from the old leader, then m3's second record from the new one, whose log had
            # come back past the stream's offset 2 with m3's first record at offset 1.
            assert held == [(0, m1), (1, m2), (2, m3[1])], narration
            assert (run["lost"], run["divergent"], run["duplicated"]) == (2, 1, 0)
            causes = {(loss["offset"], loss["cause"]) for loss in run["losses"]}
            assert (1, f"t-0 offset 1 acknowledged and in the log, inside the offsets s's committed batches cover "
                       f"[0, 3), but not in its sink (it holds {m2.decode()!r} there)") in causes
            assert any(offset == 1 and cause.startswith("t-0 offset 1 truncated on broker 1")
                       for offset, cause in causes)
        else:
            assert held == [(0, m1), (1, m2), (2, m3[0]), (3, m3[1])], narration
            assert (run["lost"], run["divergent"], run["duplicated"], run["losses"]) == (0, 0, 0, [])
        # Nothing the sink holds lies beyond what was acknowledged.
        assert {v for _, v in held} <= {m1, m2, *m3}
        # It stopped when told (SIGTERM after its running batch), and said how it went in the timeline.
        status = json.loads(status_file(lab, "s").read_text())
        assert (status["state"], status["error"], status["offsets"]) == ("stopped", None,
                                                                         {"t": {"0": 3 if mode == "0.8" else 4}})
        events = [e for e in timeline.read(timeline.path_in(lab)) if e["source"] == "client:s"]
        kinds = [e["kind"] for e in events]
        assert kinds[0] == "stream_started" and kinds[-1] == "stream_stopped", kinds
        batches = [e for e in events if e["kind"] == "stream_batch"]
        assert sum(e["rows"] for e in batches) == len(held)
        assert batches[-1]["end"] == batches[-1]["latest"] == status["offsets"] and batches[-1]["behind"] == 0
        # Each batch goes on where the one before ended: the stream skipped nothing it knew of, in either mode.
        assert all(later["start"] == earlier["end"] for earlier, later in zip(batches, batches[1:]))
        assert f"client:s      Stream s batch {batches[-1]['batch']}: " in narration

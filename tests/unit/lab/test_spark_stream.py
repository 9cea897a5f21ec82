"""The spark_stream step without Spark: its schema in a scenario file (the step, its conditions, and the kill, stop
and start of a stream), its words and its timeline events in words, what a file sink's metadata log says it holds,
and the checker's verdicts on a sink."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from consumer.spark.stream_ingest import batch_end_offsets, sink_files
from tests.unit.lab.test_scenario_loader import scenario_with_step
from zkbroker.lab.checker import Attempt, PartitionState, check
from zkbroker.lab.narration import describe
from zkbroker.lab.processes import process_state
from zkbroker.lab.runner import describe_step
from zkbroker.lab.scenario import ScenarioError, parse_scenario
from zkbroker.lab.spark_stream import SparkStream, batch_event, checkpoint_dir, output_dir, status_file
from zkbroker.topic_partition import TopicPartition

STREAM = '''action = "spark_stream"
topic = "t"
as = "s"
options = { "failOnDataLoss" = false }

[[steps]]
action = "wait"
condition = "stream_offset"
of = "s"
topic = "t"
size = 2

[[steps]]
action = "wait"
condition = "stream_caught_up"
of = "s"

[[steps]]
action = "kill"
stream = "s"

[[steps]]
action = "start"
stream = "s"

[[steps]]
action = "wait"
condition = "stream_batches"
of = "s"
size = 1

[[steps]]
action = "stop"
stream = "s"
'''


def test_a_spark_stream_step_its_conditions_and_its_process_steps_load_and_read_in_words():
    scenario = parse_scenario(scenario_with_step(STREAM), "s.toml")
    stream, offset, caught_up, kill, start, batches, stop = scenario.steps[-7:]
    assert stream.action == "spark_stream" and stream.fields["options"] == {"failOnDataLoss": False}
    assert describe_step(stream) == "a Spark stream s of t into Parquet (processing-time=500ms) in the background"
    assert describe_step(offset) == "wait until stream s's committed batches reach offset 2 of t-0"
    assert describe_step(caught_up) == ("wait until stream s's committed batches reach the high watermark of every "
                                        "partition")
    assert describe_step(batches) == "wait until stream s has committed at least 1 batches"
    assert [describe_step(s) for s in (kill, start, stop)] == ["kill stream s", "start stream s", "stop stream s"]


@pytest.mark.parametrize("step, message, line_of", [
    ('action = "spark_stream"\ntopic = "t"\n', "a spark_stream step needs 'as'", "[[steps]]"),
    ('action = "spark_stream"\ntopic = "t"\nas = "s"\nend = 3\n', "unknown field of a spark_stream step 'end'",
     "end = 3"),
    ('action = "wait"\ncondition = "stream_offset"\nof = "nothing"\ntopic = "t"\nsize = 1\n',
     "no earlier spark_stream step is named 'nothing'", 'of = "nothing"'),
    ('action = "kill"\nstream = "nothing"\n', "no earlier spark_stream step is named 'nothing'", 'stream = "nothing"'),
    ('action = "pause"\nstream = "s"\n', "unknown field of a pause step 'stream'", 'stream = "s"'),
    ('action = "spark_stream"\ntopic = "t"\nas = "s"\ntrigger = "every-10s"\n',
     "trigger must be available-now or processing-time=<N>s|<N>ms, not 'every-10s'", 'trigger = "every-10s"'),
])
def test_a_spark_stream_step_or_condition_that_is_wrong_fails_with_its_line(step, message, line_of):
    text = scenario_with_step(step)
    line = max(n for n, text_line in enumerate(text.splitlines(), 1) if text_line == line_of)
    with pytest.raises(ScenarioError) as failure:
        parse_scenario(text, "s.toml")
    assert str(failure.value).startswith(f"s.toml:{line}: ") and message in str(failure.value)


def test_a_batch_of_the_querys_progress_becomes_a_timeline_event_and_its_words():
    progress = {"batchId": 4, "numInputRows": 1200, "processedRowsPerSecond": 5400.25,
                "sources": [{"startOffset": '{"t":{"0":10,"1":20}}', "endOffset": {"t": {"0": 610, "1": 620}},
                             "latestOffset": '{"t":{"0":700,"1":710}}'}]}
    event = batch_event(progress)
    assert event == {"batch": 4, "rows": 1200, "rows_per_s": 5400.2, "start": {"t": {"0": 10, "1": 20}},
                     "end": {"t": {"0": 610, "1": 620}}, "latest": {"t": {"0": 700, "1": 710}}, "behind": 180}
    assert describe({"kind": "stream_batch", "stream": "s", **event}) == (
        "Stream s batch 4: 1200 rows, 5,400 rows/s from t-0 10, t-1 20 to t-0 610, t-1 620; 180 offsets behind the "
        "latest (t-0 700, t-1 710)")
    first = batch_event({"batchId": 0, "numInputRows": 0, "sources": [{"startOffset": None, "endOffset":
                                                                       '{"t":{"0":0}}', "latestOffset": "null"}]})
    assert (first["start"], first["latest"], first["behind"]) == ({}, {}, 0)
    assert describe({"kind": "stream_failed", "stream": "s", "error": "boom"}) == "Stream s failed: boom"


def write_metadata(output, name: str, entries: list[tuple[str, str]]) -> None:
    log_dir = output / "_spark_metadata"
    log_dir.mkdir(parents=True, exist_ok=True)
    lines = ["v1"] + [json.dumps({"path": f"file://{output / path}", "size": 1, "isDir": False,
                                  "modificationTime": 0, "blockReplication": 1, "blockSize": 1, "action": action})
                      for path, action in entries]
    (log_dir / name).write_text("\n".join(lines))


def test_a_sinks_metadata_log_names_its_files_from_the_last_compaction_on(tmp_path):
    assert sink_files(tmp_path / "none") == (None, [])
    write_metadata(tmp_path, "8", [("stale-a", "add")])  # left behind by the compaction that covers it
    write_metadata(tmp_path, "9.compact", [("a", "add"), ("b", "add")])
    write_metadata(tmp_path, "10", [("c", "add")])
    write_metadata(tmp_path, "11", [("b", "delete"), ("d", "add")])
    (tmp_path / "_spark_metadata" / ".11.crc").write_text("")
    last, files = sink_files(tmp_path)
    assert last == 11 and sorted(f.name for f in files) == ["a", "c", "d"]


def test_a_batches_end_offsets_come_from_the_checkpoints_offsets_log(tmp_path):
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "3").write_text('v1\n{"batchWatermarkMs":0}\n{"t":{"0":41}}\n')
    assert batch_end_offsets(tmp_path, 3) == {"t": {"0": 41}}
    assert batch_end_offsets(tmp_path, 4) is None


def stream_with_sink(tmp_path, rows: list[tuple[int, bytes]], end: int, status: dict | None = None) -> SparkStream:
    """A stream whose process has ended, having committed one batch of `rows` of t-0 ending at `end`."""
    output, checkpoint = output_dir(tmp_path, "s"), checkpoint_dir(tmp_path, "s")
    output.mkdir(parents=True)
    pq.write_table(pa.table({"topic": ["t"] * len(rows), "partition": [0] * len(rows),
                             "offset": [o for o, _ in rows], "value": [v for _, v in rows]}), output / "part-0.parquet")
    write_metadata(output, "0", [("part-0.parquet", "add")])
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / "0").write_text(f'v1\n{{}}\n{{"t":{{"0":{end}}}}}\n')
    if status is not None:
        status_file(tmp_path, "s").write_text(json.dumps(status))
    stream = SparkStream("s", "t", tmp_path, [sys.executable, "-c", "pass"])
    stream.start()
    stream.process.wait(30)
    return stream


def acked(value: bytes, offset: int) -> Attempt:
    return Attempt("t", 0, value, 1000.0, acked_at=1001.0, offset=offset)


def test_the_checker_judges_what_a_sink_holds_against_the_final_log(tmp_path):
    """KAFKA-1211 under a stream: the sink keeps m2, truncated away from the log; the stream went past m3a at 1."""
    stream = stream_with_sink(tmp_path, [(0, b"m1"), (1, b"m2"), (2, b"m3b")], 3)
    sink = stream.result()
    assert (sink.name, dict(sink.ranges), sink.sink, stream.error()) == ("s", {TopicPartition("t", 0): (0, 3)},
                                                                         True, None)
    log = {0: b"m1", 1: b"m3a", 2: b"m3b"}
    state = PartitionState("t", 0, 3, 1, {1: log})
    attempts = [acked(b"m1", 0), acked(b"m2", 1), acked(b"m3a", 1), acked(b"m3b", 2)]
    report = check(attempts, [state], reads=[sink])
    assert report.verdict() == "lost"
    assert "t-0 offset 1 acknowledged and in the log, inside the offsets s's committed batches cover [0, 3), but not " \
           "in its sink (it holds 'm2' there)" in [loss.cause for loss in report.losses]
    (divergence,) = report.read_divergences
    assert divergence.cause == "t-0 offset 1 in s's sink as 'm2' (acknowledged), but the log now holds 'm3a' there"


def test_a_sink_holding_a_record_twice_is_duplicated_and_a_failed_stream_says_why(tmp_path):
    stream = stream_with_sink(tmp_path, [(0, b"m1"), (1, b"m2"), (1, b"m2")], 2,
                              {"state": "failed", "error": "DataLossError: offsets gone"})
    report = check([acked(b"m1", 0), acked(b"m2", 1)], [PartitionState("t", 0, 2, 1, {1: {0: b"m1", 1: b"m2"}})],
                   reads=[stream.result()])
    assert report.verdict() == "duplicated" and report.duplicates[0].offsets == (1, 1)
    assert stream.error() == "DataLossError: offsets gone"


def test_a_stream_that_is_running_cannot_be_started_again_and_stops_on_sigterm(tmp_path):
    stream = SparkStream("s", "t", tmp_path, [sys.executable, "-c", "import time; time.sleep(60)"])
    stream.start()
    try:
        with pytest.raises(RuntimeError, match="the stream s is running already"):
            stream.start()
        assert stream.stop(30) and not stream.running() and stream.killed == []
    finally:
        stream.kill()
    stubborn = SparkStream("s", "t", tmp_path, [sys.executable, "-c",
                                                "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                                "print(flush=True); time.sleep(60)"])
    stubborn.start()
    subprocess.run(["sleep", "1"], check=True)  # the child sets its handler
    assert not stubborn.stop(0.5) and stubborn.error().startswith("the stream did not stop within 500 ms")


def test_a_killed_stream_takes_its_whole_process_group_and_starts_again_on_its_checkpoint(tmp_path):
    """A kill reaches the children too (a stream's JVM and Spark's Python workers run in its process group)."""
    child_pid = tmp_path / "child.pid"
    stream = SparkStream("s", "t", tmp_path, [sys.executable, "-c",
                                              "import subprocess, sys, time; "
                                              "child = subprocess.Popen([sys.executable, '-c', 'import time; "
                                              "time.sleep(60)']); "
                                              f"open({str(child_pid)!r}, 'w').write(str(child.pid)); time.sleep(60)"])
    stream.start()
    try:
        deadline = time.monotonic() + 30
        while not child_pid.exists() or not child_pid.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        first = stream.process.pid
        stream.kill()
        assert not stream.running() and stream.error() is None  # killed when told: no error of its own
        child = int(child_pid.read_text())
        while process_state(child) != "dead":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        stream.start()
        assert stream.running() and stream.process.pid != first
    finally:
        stream.kill()

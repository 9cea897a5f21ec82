"""`spark-ingest --stream`'s pure parts: its triggers, the progress line, and the offsets of the last batch a
checkpoint holds as committed (Spark's checkpoint layout)."""

from __future__ import annotations

import json

import pytest

from consumer.spark.stream_ingest import checkpoint_committed_offsets, parse_trigger, progress_line


def test_triggers_are_available_now_or_a_processing_time():
    assert parse_trigger("available-now") == {"availableNow": True}
    assert parse_trigger("processing-time=10s") == {"processingTime": "10 seconds"}
    assert parse_trigger("processing-time=250ms") == {"processingTime": "250 milliseconds"}
    for bad in ("once", "processing-time=", "processing-time=soon", "processing-time=10m"):
        with pytest.raises(ValueError, match="--trigger must be available-now or processing-time"):
            parse_trigger(bad)


def test_the_progress_line_says_rows_rate_and_how_far_behind_each_partition_is():
    progress = {"batchId": 4, "numInputRows": 1200, "processedRowsPerSecond": 5400.4, "sources": [{
        "endOffset": json.dumps({"t": {"0": 100, "1": 40, "2": 7}}),
        "latestOffset": json.dumps({"t": {"0": 100, "1": 160, "2": 67}})}]}
    assert progress_line(progress) == ("batch 4: 1200 rows, 5,400 rows/s, 180 offsets behind the latest "
                                       "(per partition min 0 / avg 60 / max 120)")
    assert progress_line({"batchId": 0, "numInputRows": 0, "sources": []}) == "batch 0: 0 rows, 0 rows/s"
    unreported = {"batchId": 1, "numInputRows": 3, "sources": [{"endOffset": '{"t":{"0":3}}', "latestOffset": "null"}]}
    assert progress_line(unreported) == "batch 1: 3 rows, 0 rows/s"


def test_the_committed_offsets_of_a_checkpoint_are_those_of_its_last_committed_batch(tmp_path):
    assert checkpoint_committed_offsets(tmp_path) is None
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    for batch, end in ((0, 10), (1, 20), (2, 30)):
        (tmp_path / "offsets" / str(batch)).write_text(
            'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1}\n' + json.dumps({"t": {"0": end}}) + "\n")
    (tmp_path / "commits" / "0").write_text("v1\n{}\n")
    (tmp_path / "commits" / "1").write_text("v1\n{}\n")  # batch 2 was planned but never committed
    assert checkpoint_committed_offsets(tmp_path) == {"t": {"0": 20}}

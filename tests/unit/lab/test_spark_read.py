"""The spark_read step without Spark: its schema in a scenario file, its words, the rows file's format, and what
a read that failed or never finished hands the checker."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.unit.lab.test_scenario_loader import scenario_with_step
from zkbroker.lab.runner import describe_step
from zkbroker.lab.scenario import ScenarioError, parse_scenario
from zkbroker.lab.spark_read import SparkRead, read_rows, row_line, rows_file, status_file
from zkbroker.topic_partition import TopicPartition

READ = '''action = "spark_read"
topic = "t"
end = 3
master = "local[1]"
background = true
as = "r"
options = { "maxRecordsPerPartition" = 2, "failOnDataLoss" = false }

[[steps]]
action = "wait"
condition = "read_tasks_done"
of = "r"
size = 1
'''


def test_a_spark_read_step_and_a_wait_on_its_tasks_load_and_read_in_words():
    scenario = parse_scenario(scenario_with_step(READ), "s.toml")
    read, wait = scenario.steps[-2:]
    assert read.action == "spark_read" and read.fields["options"] == {"maxRecordsPerPartition": 2,
                                                                      "failOnDataLoss": False}
    assert describe_step(read) == "a Spark read of t-0 offsets [0, 3) in the background"
    assert describe_step(wait) == "wait until at least 1 of r's Spark tasks are done"


@pytest.mark.parametrize("step, message, line_of", [
    ('action = "spark_read"\ntopic = "t"\n', "a spark_read step needs 'end'", "[[steps]]"),
    ('action = "spark_read"\ntopic = "t"\nend = 3\nmaster = 2\n', "master must be a string, not 2", "master = 2"),
    ('action = "wait"\ncondition = "read_tasks_running"\nsize = 1\n', "the read_tasks_running condition needs 'of'",
     "[[steps]]"),
    ('action = "wait"\ncondition = "read_tasks_done"\nof = "nothing"\nsize = 1\n',
     "no earlier spark_read step is named 'nothing'", 'of = "nothing"'),
])
def test_a_spark_read_step_or_condition_missing_what_it_needs_fails_with_its_line(step, message, line_of):
    text = scenario_with_step(step)
    line = max(n for n, text_line in enumerate(text.splitlines(), 1) if text_line == line_of)
    with pytest.raises(ScenarioError) as failure:
        parse_scenario(text, "s.toml")
    assert str(failure.value).startswith(f"s.toml:{line}: ") and message in str(failure.value)


def test_rows_keep_text_as_text_and_anything_else_exactly(tmp_path):
    rows = [("t", 0, 0, b"m1"), ("t", 0, 1, None), ("t", 0, 2, b"\xff\x00"), ("t", 0, 3, b"")]
    lines = [row_line(*row) for row in rows]
    assert json.loads(lines[0]) == {"topic": "t", "partition": 0, "offset": 0, "value": "m1"}
    assert json.loads(lines[2]) == {"topic": "t", "partition": 0, "offset": 2, "value_base64": "/wA="}
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    assert read_rows(path) == rows


def ended(tmp_path, status: dict | None, rows: list[str] = ()) -> SparkRead:
    """A SparkRead whose process has ended, with the files it left."""
    if status is not None:
        status_file(tmp_path, "r").write_text(json.dumps(status))
    rows_file(tmp_path, "r").write_text("".join(line + "\n" for line in rows))
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(1 if %r else 0)" % (status is None)])
    process.wait(30)
    return SparkRead("r", "t", 0, 0, 3, tmp_path, process, 60.0, 0.0)


def test_a_finished_read_hands_the_checker_its_range_and_rows(tmp_path):
    read = ended(tmp_path, {"state": "done", "tasks": 2, "active": 0, "done": 2, "error": None},
                 [row_line("t", 0, 0, b"m1")]).result()
    assert (read.name, dict(read.ranges), list(read.rows), read.error) == (
        "r", {TopicPartition("t", 0): (0, 3)}, [("t", 0, 0, b"m1")], None)


def test_a_read_that_failed_or_never_finished_hands_the_checker_its_error_and_no_rows(tmp_path):
    failed = ended(tmp_path, {"state": "failed", "tasks": 1, "active": 0, "done": 0,
                              "error": "DataLossError: Some data may have been lost"}).result()
    assert (failed.rows, failed.error) == ([], "DataLossError: Some data may have been lost")
    (tmp_path / "other").mkdir()
    never = ended(tmp_path / "other", None).result()
    assert never.rows == [] and never.error.startswith("the read process ended (1) without finishing; see ")

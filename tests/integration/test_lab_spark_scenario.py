"""The spark-read-during-failover scenario, run as a user runs it (`zkbroker lab scenario run ... --json`, one mode a
test, on a lab of its own: real ZooKeeper, real broker processes, confluent-kafka producers, and a real Spark
session reading through the zkkafka source in a process of its own), with its verdicts and the rows its read
left in the run's directory: in 0.8 mode the read returns m2, which high-watermark truncation took from the log,
and misses the two records written where it had read; with leader epochs it reads m1, m2 and m3 as the log keeps
them. Neither read sees anything beyond the high watermark."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.test_lab_scenarios import SEED, VERDICTS
from zkbroker.lab.spark_read import read_rows, rows_file

# Its two modes take turns (each starts a lab and a Spark JVM), beside the Spark cluster's group rather than in
# it: in one group the two made the longest chain of a side-by-side run, as long as the whole run
# (tests/side_by_side.py).
pytestmark = [pytest.mark.integration, pytest.mark.timeout(540), pytest.mark.xdist_group("spark-lab")]

NAME = "spark-read-during-failover"


def value(mode: str, record: str) -> bytes:
    return f"{NAME}/{mode}/seed{SEED}/{record}".encode()


@pytest.mark.parametrize("mode", ["0.8", "fixed"])
def test_a_spark_read_through_a_leader_failover_in_each_truncation_mode(tmp_path, mode):
    directory = tmp_path / "lab"
    done = subprocess.run([sys.executable, "-m", "zkbroker", "lab", "scenario", "run", NAME, "--mode", mode,
                           "--seed", str(SEED), "--dir", str(directory), "--json"],
                          capture_output=True, text=True, timeout=480)
    assert done.stdout.strip(), done.stderr
    (run,) = json.loads(done.stdout)["runs"]
    narration = done.stderr
    assert run["verdict"] == VERDICTS[NAME][mode] and run["expected"] and done.returncode == 0, narration
    assert run["acknowledged"] == 4  # m1, m2 and m3's two records
    read = [(offset, v) for _, _, offset, v in read_rows(rows_file(directory, "r"))]
    m1, m2, m3 = value(mode, "m1/0"), value(mode, "m2/0"), [value(mode, f"m3/{i}") for i in range(2)]
    if mode == "0.8":
        # The read got m1 and m2 from the old leader, then found the new leader's log ending before offset 2.
        assert read == [(0, m1), (1, m2)], narration
        assert (run["lost"], run["divergent"], run["duplicated"]) == (3, 1, 0)
        causes = {(loss["offset"], loss["cause"]) for loss in run["losses"]}
        assert (1, f"t-0 offset 1 acknowledged and in the log, inside r's range [0, 3), but not in what it read "
                   f"(it returned {m2.decode()!r} there)") in causes
        assert (2, "t-0 offset 2 acknowledged and in the log, inside r's range [0, 3), but not in what it "
                   "read") in causes
        assert "Skipping offsets [2, 3) of t-0" in (directory / "spark-read-r.log").read_text()
    else:
        assert read == [(0, m1), (1, m2), (2, m3[0])], narration
        assert (run["lost"], run["divergent"], run["duplicated"], run["losses"]) == (0, 0, 0, [])
    status = json.loads((directory / "spark-read-r.status.json").read_text())
    assert (status["state"], status["tasks"], status["done"]) == ("done", 2, 2)
    # Nothing read beyond the high watermark: every row the read returned was an acknowledged record.
    assert {v for _, v in read} <= {m1, m2, *m3}

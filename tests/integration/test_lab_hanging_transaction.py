"""The kafka-12671-hanging-transaction scenario, run as a user runs it (`zkbroker lab scenario run ... --keep --json`,
both modes side by side, each on a lab of its own: real ZooKeeper, a real broker process, librdkafka's transactional
producers), then the labs it left running examined with `zkbroker transactions` as an operator would: without
KIP-890's verification the late produce opened a transaction its coordinator does not know, which
describe-producers shows, find-hanging finds and abort ends, after which a read_committed confluent-kafka consumer
reads every committed record; with it, nothing hangs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.admin_support import tool
from tests.integration.clients import ClientConfig
from tests.integration.test_lab_scenarios import SEED, VERDICTS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

NAME = "kafka-12671-hanging-transaction"
# out-0 after the scenario: "before" at 0-2 and its COMMIT at 3, the ABORT of "late" at 4, then (mode 0.8 only) the
# late batch at 5; "after" and its COMMIT follow.
LATE_OFFSET = 5


def rows(out: str) -> list[list[str]]:
    return [line.rstrip("\t").split() for line in out.splitlines()]


def bootstrap(directory) -> str:
    broker = json.loads((directory / "cluster.json").read_text())["brokers"][0]
    return f"{broker['host']}:{broker['port']}"


def committed_values(mode: str) -> list[bytes]:
    return [f"{NAME}/{mode}/seed{SEED}/{step}/{i}".encode() for step in ("before", "after") for i in range(3)]


def test_a_late_produce_hangs_the_partition_without_kip_890_and_the_transactions_tool_ends_it(tmp_path):
    labs = tmp_path / "labs"
    try:
        done = subprocess.run([sys.executable, "-m", "zkbroker", "lab", "scenario", "run", NAME, "--seed", str(SEED),
                               "--dir", str(labs), "--keep", "--json"], capture_output=True, text=True, timeout=240)
        assert done.stdout.strip(), done.stderr
        runs = {r["mode"]: r for r in json.loads(done.stdout)["runs"]}
        narration = done.stderr
        assert {mode: r["verdict"] for mode, r in runs.items()} == VERDICTS[NAME], narration
        assert all(r["expected"] for r in runs.values()) and done.returncode == 0, narration
        assert "committed_later read 3 records of out-0 offsets [0, 5) at read_committed" in narration
        assert "committed_later read 6 records of out-0 offsets [0, 9) at read_committed" in narration

        server = bootstrap(labs / "0.8")
        code, out, _ = tool("transactions", "--bootstrap-server", server, "describe-producers", "--topic", "out",
                            "--partition", "0")
        assert code == 0 and [r[5] for r in rows(out)[1:]].count(str(LATE_OFFSET)) == 1, out
        code, out, _ = tool("transactions", "--bootstrap-server", server, "list")
        assert code == 0 and ["late", "Empty"] in [[r[0], r[3]] for r in rows(out)[1:]], out  # the coordinator's
        code, out, _ = tool("transactions", "--bootstrap-server", server, "find-hanging", "--broker-id", "1",
                            "--max-transaction-timeout", "0")
        assert code == 0
        (hanging,) = rows(out)[1:]
        assert (hanging[:2], hanging[5]) == (["out", "0"], str(LATE_OFFSET)), out
        code, _, err = tool("transactions", "--bootstrap-server", server, "abort", "--topic", "out", "--partition",
                            "0", "--start-offset", str(LATE_OFFSET))
        assert code == 0, err
        code, out, _ = tool("transactions", "--bootstrap-server", server, "find-hanging", "--broker-id", "1",
                            "--max-transaction-timeout", "0")
        assert code == 0 and rows(out)[1:] == []
        reader = ClientConfig("confluent-kafka", "confluent-kafka", {"isolation.level": "read_committed"})
        assert [r.value for r in reader.consume(server, "out", {0: 0}, 6, timeout_s=60)] == committed_values("0.8")

        code, out, _ = tool("transactions", "--bootstrap-server", bootstrap(labs / "fixed"), "find-hanging",
                            "--broker-id", "1", "--max-transaction-timeout", "0")
        assert code == 0 and rows(out)[1:] == []
    finally:
        for mode in ("0.8", "fixed"):
            if (labs / mode / "cluster.json").exists():
                subprocess.run([sys.executable, "-m", "zkbroker", "lab", "down", "--dir", str(labs / mode)],
                               capture_output=True, timeout=60)

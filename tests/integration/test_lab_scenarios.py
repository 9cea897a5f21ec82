"""Every catalogue scenario, run as a user runs it (`zkbroker lab scenario run NAME --json`, both modes side by
side, each on a lab of its own: real ZooKeeper, real broker processes, confluent-kafka producers), with the
verdicts DESIGN §10 expects of it; and Ctrl-C in the middle of a scenario leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.integration.harness import wait_for
from zkbroker.lab.processes import process_state
from zkbroker.lab.scenario import CATALOGUE, catalogue

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

ROOT = os.geteuid() == 0
SEED = 7

# What each mode of each scenario ends with (the verdict its file expects, checked here independently of it).
VERDICTS = {
    "kafka-1211": {"0.8": "lost", "fixed": "ok", "kraft": "ok"},
    "kip-101-divergence": {"0.8": "divergent", "fixed": "ok"},
    "jepsen-2013": {"0.8": "lost", "fixed": "ok"},
    "unclean-election": {"0.8": "lost", "fixed": "ok", "kraft": "ok"},
    "kafka-6082-zombie-controller": {"fixed": "ok", "kraft": "ok"},
    "kafka-2729-stuck-isr": {"0.8": "stuck"},
    "kafka-1120-fast-bounce": {"0.8": "stuck", "fixed": "ok", "kraft": "ok"},
    "kafka-7165-lingering-ephemeral": {"0.8": "ok"},
    "kafka-5642-many-partitions": {"0.8": "ok", "fixed": "ok"},
    "zk-consumer-herd": {"0.8": "stuck", "fixed": "ok"},
    "stuck-topic-deletion": {"0.8": "stuck", "fixed": "ok"},
    "kafka-1546-isr-flapping": {"0.8": "ok", "fixed": "ok"},
    "kafka-2143-truncate-to-start": {"0.8": "ok", "fixed": "divergent"},
    "zookeeper-quorum-loss": {"0.8": "ok", "kraft": "ok"},
    "spark-read-during-failover": {"0.8": "lost", "fixed": "ok"},
    "spark-stream-during-failover": {"0.8": "lost", "fixed": "ok"},
    "coordinator-failover-mid-commit": {"fixed": "ok"},
    "producer-dies-mid-transaction": {"fixed": "ok"},
    "kafka-12671-hanging-transaction": {"0.8": "stuck", "fixed": "ok"},
    "zombie-producer": {"fixed": "ok"},
    "controller-failover": {"0.8": "ok", "kraft": "ok"},
    "raft-check-quorum-resign": {"kraft": "ok"},
    "raft-pre-vote-disruption": {"kraft": "unavailable", "kraft-fixed": "ok"},
    "raft-lost-disk": {"kraft": "lost", "kraft-fixed": "ok"},
    "raft-fenced-broker-serves": {"kraft": "lost"},
}
# Fixed forms that stop one harm and leave another, which the checker sees (each file says so in its `why`).
FIXED_NOT_SAFE = {"kafka-2143-truncate-to-start": "Kafka 0.9's fix keeps the follower's log, records the unclean "
                                                  "leader never had included (KIP-101 made them agree)"}
# Run by a test file of their own, which also checks what else the run leaves behind.
OWN_TESTS = {"spark-read-during-failover": "test_lab_spark_scenario.py",
             "spark-stream-during-failover": "test_lab_spark_stream_scenario.py",
             "kafka-12671-hanging-transaction": "test_lab_hanging_transaction.py"}
# Not run here, to keep the suite short (each is about a minute on a loaded machine): what they show is tested
# elsewhere with real controllers, and they are run with `lab scenario run NAME --mode all` (BENCHMARKS.md).
ELSEWHERE = {"raft-check-quorum-resign": "test_lab_kraft.py partitions the active controller from the other two "
                                         "and sees it resign and another elected",
             "raft-pre-vote-disruption": "test_kraft_pre_vote.py cuts a follower off its leader with and without "
                                         "Pre-Vote between three controllers"}
# Run by bench/catalogue.py only (BENCHMARKS.md): two KRaft labs in the lab network, two to three minutes each on
# a loaded machine; what decides them is unit-tested (the quorum checker's loss across epochs, directory ids in
# the Raft simulation).
BENCH_ONLY = {"raft-lost-disk",
              # about 45 s on a loaded machine; its fault points are tested in test_lab_kraft.py (the controller
              # fences a broker whose heartbeats are held, the broker hears it from the metadata log only)
              "raft-fenced-broker-serves"}
# The kraft forms of ZooKeeper-mode scenarios run here (each is about a minute on a loaded machine, most of it
# five or six Python processes starting); the others run in bench/catalogue.py (BENCHMARKS.md).
KRAFT_HERE = ("controller-failover", "kafka-1211")
ZOOKEEPER_MODES = ("0.8", "fixed")
SCENARIOS = {s.name: s for s in catalogue()}


def run(name: str, *args: str, timeout_s: float = 360) -> tuple[int, dict, str]:
    done = subprocess.run([sys.executable, "-m", "zkbroker", "lab", "scenario", "run", name, "--seed", str(SEED),
                           "--json", *args], capture_output=True, text=True, timeout=timeout_s)
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout), done.stderr


def test_every_catalogue_scenario_has_its_expected_verdicts_here():
    assert set(VERDICTS) == set(SCENARIOS) and set(SCENARIOS) <= set(CATALOGUE)
    for name, verdicts in VERDICTS.items():
        assert verdicts == {mode: spec.expect for mode, spec in SCENARIOS[name].modes.items()}, name


KNOWN_FAILING: dict[str, str] = {}  # scenario -> why its run is expected to fail, while it is


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_FAILING[n], strict=False))
                                  if n in KNOWN_FAILING else n
                                  for n in sorted(set(VERDICTS) - set(OWN_TESTS) - set(ELSEWHERE) - BENCH_ONLY)])
def test_catalogue_scenario_in_both_modes_ends_with_the_expected_verdicts(name):
    if SCENARIOS[name].network and not ROOT:
        pytest.skip("the lab network needs root (namespaces, nftables)")
    zookeeper = bool(set(SCENARIOS[name].modes) & set(ZOOKEEPER_MODES))
    # `both` is 0.8 and fixed only: a scenario's kraft forms run in test_kraft_form_... (KRAFT_HERE) or in bench/
    code, result, narration = run(name, *(() if zookeeper else ("--mode", "all")))
    assert result["scenario"] == name and result["seed"] == SEED
    runs = {r["mode"]: r for r in result["runs"]}
    expected = {m: v for m, v in VERDICTS[name].items() if m in ZOOKEEPER_MODES or not zookeeper}
    assert {mode: r["verdict"] for mode, r in runs.items()} == expected, narration
    assert all(r["expected"] for r in runs.values()) and code == 0, narration
    for r in runs.values():
        assert r["lost"] == len(r["losses"])
        if r["verdict"] == "ok":
            assert r["lost"] == r["divergent"] == r["duplicated"] == 0
    if "0.8" in runs and runs["0.8"]["verdict"] == "lost":
        assert runs["0.8"]["lost"] >= 1 and runs["0.8"]["acknowledged"] >= runs["0.8"]["lost"]
        assert all(loss["topic"] == "t" and loss["cause"] for loss in runs["0.8"]["losses"])
    if "fixed" in runs and "0.8" in runs and name not in FIXED_NOT_SAFE:
        assert runs["fixed"]["lost"] == 0 and runs["fixed"]["divergent"] == 0
    if name == "kafka-1211":  # m1, m2, m3 acknowledged; m2 lost, and m3 took its offset
        assert (runs["0.8"]["acknowledged"], runs["0.8"]["lost"], runs["0.8"]["losses"][0]["offset"]) == (3, 1, 1)
        assert (runs["fixed"]["acknowledged"], runs["fixed"]["lost"]) == (3, 0)
    if name == "kafka-1546-isr-flapping":  # 5 + 3 bursts of 50 (acks=1) + 5; each acks=all write after one: fixed only
        assert (runs["0.8"]["acknowledged"], runs["fixed"]["acknowledged"]) == (160, 163)
    if name == "kafka-2143-truncate-to-start":  # 5 + 3 + 1 acknowledged (the three acks=0 records are not)
        # 0.8: the follower dropped its whole log and fetched it all again; fixed: it kept offsets 5-7, which differ
        assert (runs["0.8"]["acknowledged"], runs["0.8"]["lost"], runs["0.8"]["divergent"]) == (9, 0, 0)
        assert (runs["fixed"]["acknowledged"], runs["fixed"]["lost"], runs["fixed"]["divergent"]) == (9, 0, 3)


@pytest.mark.parametrize("name", KRAFT_HERE)
def test_kraft_form_of_a_catalogue_scenario_ends_with_its_verdict_and_no_raft_violation(name):
    """The scenario runner's KRaft path: topics created through the Admin API, leaders and ISRs read from the
    brokers' metadata images, the data checker and the quorum checker on one run."""
    code, result, narration = run(name, "--mode", "kraft")
    [kraft] = result["runs"]
    assert (kraft["mode"], kraft["verdict"], kraft["expected"], code) == ("kraft", VERDICTS[name]["kraft"], True, 0), \
        narration
    assert kraft["raft_violations"] == [] and kraft["lost"] == kraft["divergent"] == 0, narration
    if name == "kafka-1211":  # m1, m2, m3 acknowledged and kept: the restarted follower truncated by leader epoch
        assert kraft["acknowledged"] == 3 and "A asked B where its leader epoch ended" in narration
        assert "as expected: broker 1's log of t-0 holds 2 records" in narration
    if name == "controller-failover":  # 3 before, 3 after; a new quorum leader, and the new topic created by it
        assert kraft["acknowledged"] == 6 and "create topic after-failover" in narration
        assert "the step failed" not in narration


def test_a_scenario_without_a_kraft_form_says_why():
    done = subprocess.run([sys.executable, "-m", "zkbroker", "lab", "scenario", "run", "zk-consumer-herd", "--mode",
                           "kraft"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "has no kraft mode: No analogue in KRaft" in done.stderr
    listed = subprocess.run([sys.executable, "-m", "zkbroker", "lab", "scenario", "list"], capture_output=True,
                            text=True, timeout=60).stdout
    assert any(line.startswith("zk-consumer-herd ") and "0.8,fixed (no kraft)" in line for line in listed.splitlines())
    assert any(line.startswith("controller-failover ") and "0.8,kraft" in line for line in listed.splitlines())


def test_one_mode_of_a_scenario_and_a_mode_it_lacks():
    code, result, narration = run("kafka-1211", "--mode", "fixed")
    assert [r["mode"] for r in result["runs"]] == ["fixed"] and code == 0, narration
    done = subprocess.run([sys.executable, "-m", "zkbroker", "lab", "scenario", "run", "kafka-6082-zombie-controller",
                           "--mode", "0.8"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "has no 0.8 mode: zkbroker's controller has no unfenced form" in done.stderr


@pytest.mark.skipif(not ROOT, reason="the lab network needs root (namespaces, nftables)")
def test_ctrl_c_in_the_middle_of_a_scenario_leaves_no_process_namespace_or_rule(tmp_path):
    directory = tmp_path / "lab"
    runner = subprocess.Popen([sys.executable, "-m", "zkbroker", "lab", "scenario", "run", "jepsen-2013", "--mode",
                               "0.8", "--dir", str(directory)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        # Interrupt once the followers are cut off from the leader: processes, namespaces and rules all exist.
        wait_for(lambda: (directory / "network.json").exists()
                 and json.loads((directory / "network.json").read_text())["partitions"], 120,
                 "the scenario's first partition", interval_s=0.05)
        network = json.loads((directory / "network.json").read_text())
        cluster = json.loads((directory / "cluster.json").read_text())
        runner.send_signal(signal.SIGINT)
        output, _ = runner.communicate(timeout=120)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 130, output
    pids = [b["pid"] for b in cluster["brokers"]] + [z["pid"] for z in cluster["zookeepers"]]
    assert pids and all(process_state(pid) == "dead" for pid in pids)
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(ns in namespaces for ns in network["namespaces"].values())
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert network["bridge"] not in links
    assert not (directory / "cluster.json").exists() and not (directory / "network.json").exists()


def test_a_scenario_file_of_ones_own_with_an_unknown_step_fails_with_its_line(tmp_path):
    own = tmp_path / "mine.toml"
    own.write_text('name = "mine"\nsource = "me"\nsummary = "x"\nwhy_one_mode = "x"\n[modes."0.8"]\nexpect = "ok"\n'
                   'why = "x"\n[[steps]]\naction = "explode"\n')
    done = subprocess.run([sys.executable, "-m", "zkbroker", "lab", "scenario", "run", "--file", str(own)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2  # a scenario file's mistake: nothing was started (DESIGN §20)
    assert done.stderr.startswith(f"{own}:9: unknown step 'explode'; allowed: create_topic")


@pytest.mark.alone  # two labs killed and paused on a clock of their own: CPU-heavy, and failed once beside others
def test_a_torture_smoke_run_keeps_every_acknowledged_record_in_the_safe_configuration():
    done = subprocess.run([sys.executable, "-m", "zkbroker", "lab", "torture", "--runs", "1", "--seed", "3",
                           "--faults", "kill,pause", "--json"], capture_output=True, text=True, timeout=360)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert (result["seed"], result["runs"], result["faults"]) == (3, 1, ["kill", "pause"]), done.stderr
    modes = {m["mode"]: m for m in result["modes"]}
    assert set(modes) == {"0.8", "fixed"}
    for totals in modes.values():
        assert totals["runs"] == 1 and totals["acknowledged"] > 0
        assert {"verdict", "expected", "lost", "duplicated", "divergent", "unavailable_ms_max", "losses",
                "unavailable_ms_by_fault"} <= set(totals)
        assert set(totals["unavailable_ms_by_fault"]) <= {"kill", "pause"}
    assert modes["fixed"]["lost"] == modes["fixed"]["divergent"] == 0 and modes["fixed"]["expected"]
    assert done.returncode == 0, done.stderr

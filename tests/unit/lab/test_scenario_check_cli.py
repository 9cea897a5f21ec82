"""`zkbroker lab scenario check F`, and `run` of a file with a mistake: FILE:LINE: on stderr, exit status 2, and
no process started (DESIGN §20)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.unit.lab.test_scenario_checker import HEAD
from zkbroker import cli
from zkbroker.lab import cluster

MISSING_BROKER = HEAD + '\n[[steps]]\naction = "wait"\ncondition = "controller_changed"\n'
LINE = HEAD.count("\n") + 2  # the [[steps]] header of the wait


def zkbroker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zkbroker", *args], capture_output=True, text=True, timeout=60)


def test_check_names_the_file_and_line_and_exits_2_and_a_good_file_is_ok(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(MISSING_BROKER)
    checked = zkbroker("lab", "scenario", "check", str(bad))
    assert checked.returncode == 2
    assert checked.stderr == f"{bad}:{LINE}: the controller_changed condition needs 'broker'\n"
    good = tmp_path / "good.toml"
    good.write_text(HEAD)
    checked = zkbroker("lab", "scenario", "check", str(good))
    assert (checked.returncode, checked.stdout) == (0, f"{good}: mine, 1 steps, modes 0.8, fixed: ok\n")


def test_run_of_a_bad_file_exits_2_and_starts_no_process(tmp_path, monkeypatch):
    bad = tmp_path / "bad.toml"
    bad.write_text(MISSING_BROKER)
    lab_dir = tmp_path / "lab"
    run = zkbroker("lab", "scenario", "run", "--file", str(bad), "--dir", str(lab_dir))
    assert (run.returncode, run.stderr, run.stdout) == (2, f"{bad}:{LINE}: the controller_changed condition "
                                                           f"needs 'broker'\n", "")
    assert not lab_dir.exists()  # no lab was laid out

    def no_process(*args, **kwargs):
        pytest.fail(f"a process was started: {args}")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    monkeypatch.setattr(cluster.LabCluster, "up", no_process)
    assert cli.main(["lab", "scenario", "run", "--file", str(bad), "--dir", str(lab_dir), "--json"]) == 2



def test_run_and_torture_hand_security_to_the_runner_and_kraft_torture_refuses_it(tmp_path, monkeypatch, capsys):
    """`--security` reaches run_scenario / run_torture (each run's lab is `lab up --security`); a KRaft torture,
    whose labs run PLAINTEXT listeners only, refuses it before anything starts."""
    from zkbroker.lab import runner, torture

    good = tmp_path / "good.toml"
    good.write_text(HEAD)
    seen = {}

    class Stop(Exception):
        pass

    def fake_run(scenario, *args, security="plaintext", **kwargs):
        seen["run"] = security
        raise Stop("stopped")  # nothing is started

    def fake_torture(*args, security="plaintext", **kwargs):
        seen["torture"] = security
        raise Stop("stopped")

    monkeypatch.setattr(runner, "run_scenario", fake_run)
    monkeypatch.setattr(torture, "run_torture", fake_torture)
    for argv in (["lab", "scenario", "run", "--file", str(good), "--security", "sasl_ssl"],
                 ["lab", "torture", "--runs", "1", "--faults", "kill", "--security", "ssl"]):
        assert cli.main(argv) != 0  # the CLI reports the error in one line
    assert seen == {"run": "sasl_ssl", "torture": "ssl"}
    assert cli.main(["lab", "torture", "--kraft", "--runs", "1", "--security", "sasl_ssl"]) != 0
    assert "KRaft lab runs PLAINTEXT listeners only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["lab", "scenario", "run", "--file", str(good), "--security", "tls"])
    assert "invalid choice: 'tls'" in capsys.readouterr().err

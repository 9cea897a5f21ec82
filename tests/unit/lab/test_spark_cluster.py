"""The lab's Spark standalone cluster keeps its workers clean: their Python is refused if it can see our packages
or the compiled ones a zip cannot carry, and the daemons start without this interpreter's Python settings."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from zkbroker.lab.spark_cluster import SparkClusterError, _check_worker_python, _clean_env, master_ports


def test_an_interpreter_that_sees_our_packages_is_not_a_clean_worker_python():
    with pytest.raises(SparkClusterError, match=r"must not see \['zkbroker', 'consumer', 'controller', 'cramjam', "
                                                r"'lz4', 'isal', 'kazoo'\]"):
        _check_worker_python(Path(sys.executable), _clean_env(PYTHONPATH=str(Path(__file__).resolve().parents[3])))


def test_the_daemons_environment_has_none_of_this_interpreters_python_settings(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3")
    monkeypatch.setenv("VIRTUAL_ENV", "/work/main/.venv")
    env = _clean_env(SPARK_LOCAL_IP="127.0.0.1")
    assert not {"PYTHONPATH", "PYSPARK_PYTHON", "VIRTUAL_ENV"} & set(env)
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1" and env["PATH"]


def test_the_masters_ports_are_the_ones_its_log_says_it_bound():
    log = ("15:56:47.007 INFO Master: Starting Spark master at spark://127.0.0.1:59880\n"
           "15:56:49.001 WARN Utils: Service 'MasterUI' could not bind on port 47269. Attempting port 47270.\n")
    assert master_ports(log) is None  # the web UI not bound yet
    log += "15:56:49.489 INFO MasterWebUI: Bound MasterWebUI to 127.0.0.1, and started at http://localhost:47270\n"
    assert master_ports(log) == (59880, 47270)

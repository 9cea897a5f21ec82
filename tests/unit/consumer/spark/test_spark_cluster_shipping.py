"""What a Spark cluster's workers get from the driver: the project's zip (reproducible, cached by content,
importable on its own, shipped once), the interpreter they run (PYSPARK_PYTHON never overridden), and the
Spark settings of `spark-ingest --master ... --conf key=value`."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from consumer.spark.pyfiles import PACKAGES, project_zip, ship
from consumer.spark.session import pyspark_python
from zkbroker.cli import build_parser


def test_the_zip_holds_the_packages_sources_and_no_bytecode(tmp_path):
    path = project_zip(tmp_path)
    names = zipfile.ZipFile(path).namelist()
    assert {name.split("/")[0] for name in names} == set(PACKAGES)
    for module in ("consumer/spark/source.py", "consumer/simple.py", "zkbroker/protocol/compression.py",
                   "kazoo/client.py"):
        assert module in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_the_zip_is_built_once_per_content_and_byte_for_byte_reproducible(tmp_path):
    first = project_zip(tmp_path / "a")
    built = first.stat().st_ino
    assert project_zip(tmp_path / "a") == first and first.stat().st_ino == built  # found, not rebuilt
    again = project_zip(tmp_path / "b")
    assert again.name == first.name and again.read_bytes() == first.read_bytes()


def test_only_builds_unused_for_a_day_beyond_the_newest_four_are_cleared(tmp_path):
    import os
    import time

    now = time.time()
    for n, age_h in enumerate((1, 2, 3, 30, 40, 50)):
        stale = tmp_path / f"zkbroker-0.0.{n}-old.zip"
        stale.write_bytes(b"old build")
        os.utime(stale, (now - age_h * 3600, now - age_h * 3600))
    recent_but_old_rank = tmp_path / "zkbroker-0.0.9-recent.zip"
    recent_but_old_rank.write_bytes(b"in use by another checkout's application")
    os.utime(recent_but_old_rank, (now - 4 * 3600, now - 4 * 3600))
    built = project_zip(tmp_path)
    left = sorted(p.name for p in tmp_path.glob("zkbroker-*.zip"))
    # The new build and the three newest stay; beyond them, the one used 4 hours ago stays too.
    assert left == sorted([built.name, "zkbroker-0.0.0-old.zip", "zkbroker-0.0.1-old.zip",
                           "zkbroker-0.0.2-old.zip", "zkbroker-0.0.9-recent.zip"])


def test_an_interpreter_with_nothing_installed_imports_our_code_and_kazoo_from_the_zip(tmp_path):
    path = project_zip(tmp_path)
    # -I -S: no PYTHONPATH, no site-packages -- only the standard library, and the zip.
    script = (f"import sys; sys.path.insert(0, {str(path)!r})\n"
              "import consumer.simple, consumer.spark.planner, zkbroker.zk.client, kazoo.client\n"
              "from zkbroker.protocol import compression\n"
              "mods = (consumer.simple, consumer.spark.planner, zkbroker.zk.client, kazoo.client, compression)\n"
              "print(all(m.__file__.startswith(sys.path[0]) for m in mods), compression.decoders())\n")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", script], capture_output=True, text=True, timeout=60,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "[]"]  # and no decoder: neither cramjam nor pyarrow is there


class RecordingContext:
    """What ship() uses of a SparkContext: addPyFile and pyspark's list of the files it added."""

    def __init__(self) -> None:
        self._python_includes: list[str] = []
        self.added: list[str] = []

    def addPyFile(self, path: str) -> None:  # pyspark's name
        self.added.append(path)
        self._python_includes.append(Path(path).name)


def test_ship_adds_the_zip_to_a_context_once():
    sc = RecordingContext()
    path = ship(sc)
    ship(sc)
    assert sc.added == [str(path)]


def test_pyspark_python_is_the_conf_then_the_environment_then_this_interpreter():
    assert pyspark_python({}, {}) == sys.executable
    assert pyspark_python({}, {"PYSPARK_PYTHON": "/opt/workers/bin/python"}) == "/opt/workers/bin/python"
    assert pyspark_python({"spark.pyspark.python": "/opt/conf/bin/python"},
                          {"PYSPARK_PYTHON": "/opt/workers/bin/python"}) == "/opt/conf/bin/python"


def ingest_args(*extra: str):
    return build_parser().parse_args(["spark-ingest", "--zookeeper", "zk:2181", "--topic", "t", "--group", "g",
                                      "--output", "/tmp/out", *extra])


def test_spark_ingest_takes_a_master_and_repeated_conf_settings():
    args = ingest_args("--master", "spark://10.0.0.1:7077", "--conf", "spark.executor.memory=512m",
                       "--conf", "spark.executorEnv.X=a=b")
    assert args.master == "spark://10.0.0.1:7077"
    assert args.conf == [("spark.executor.memory", "512m"), ("spark.executorEnv.X", "a=b")]
    assert ingest_args().master == "local[2]" and ingest_args().conf == []


@pytest.mark.parametrize("bad", ["spark.executor.memory", "=512m"])
def test_a_conf_setting_without_key_and_value_is_a_usage_error(bad, capsys):
    with pytest.raises(SystemExit) as exit_:
        ingest_args("--conf", bad)
    assert exit_.value.code == 2
    assert f"argument --conf: expected key=value, got {bad}" in capsys.readouterr().err

"""A Spark standalone cluster on 127.0.0.1 whose workers have only pyspark and pyarrow, as on a real cluster.

A master and N workers, each a JVM of its own started with the `spark-class` that pyspark ships
(org.apache.spark.deploy.master.Master / worker.Worker), one core and a small memory each by default. Their
executors run `worker_python()`: a virtual environment holding pyspark and pyarrow (the driver's versions) and
nothing else -- no zkbroker, cramjam, lz4, isal or kazoo -- built once per version under the user's cache directory.
The daemons get an environment of their own (no PYTHONPATH), and every process of the cluster, executors and
their Python workers included, lives in the process group of its daemon, which `stop` ends.

Used by the Spark integration tests and bench/spark_ingest.py; the Makefile builds the worker Python before
`make test` with::

    python -m zkbroker.lab.spark_cluster ensure-worker-python
"""

from __future__ import annotations

import argparse
import atexit
import fcntl
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from zkbroker.cache import cache_dir
from zkbroker.lab.ports import free_ports

__all__ = ["SparkClusterError", "SparkStandalone", "worker_python"]

WORKER_PACKAGES = ("pyspark", "pyarrow")
#: What the worker Python must not see: the driver's own packages, and the compiled ones a zip cannot carry.
NOT_ON_WORKERS = ("zkbroker", "consumer", "controller", "cramjam", "lz4", "isal", "kazoo")
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# The JIT and collector that start fastest (C1 only, serial GC): for JVMs that live briefly or only keep books.
QUICK_JVM_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData"
# The daemons only keep books: a small heap, and the quick JVM.
DAEMON_MEMORY = "256m"
DAEMON_JAVA_OPTS = QUICK_JVM_OPTS
_LOG4J = """rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n
logger.worker.name = org.apache.spark.deploy
logger.worker.level = info
"""


# What the master logs once bound: the ports it got, which are the ones asked for unless another process took one
# between our pick and its bind (Spark then tries the next port up).
_MASTER_PORT = re.compile(r"Starting Spark master at spark://[^:\s]+:(\d+)")
_MASTER_WEB_PORT = re.compile(r"Bound MasterWebUI to \S+, and started at https?://[^:\s]+:(\d+)")


def master_ports(log_text: str) -> tuple[int, int] | None:
    """The master's RPC port and web UI port from its log, None until it has logged both."""
    port, web = _MASTER_PORT.search(log_text), _MASTER_WEB_PORT.search(log_text)
    return (int(port.group(1)), int(web.group(1))) if port and web else None


class SparkClusterError(RuntimeError):
    """The cluster (or its worker Python) could not be made; the message says why, with the logs' tails."""


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in WORKER_PACKAGES}


def worker_python(timeout_s: float = 1800.0) -> Path:
    """The interpreter of the workers' virtual environment, built on first use (pip, from the configured index)
    with this interpreter's Python version and the pyspark and pyarrow versions installed here."""
    versions = _versions()
    name = f"py{sys.version_info[0]}.{sys.version_info[1]}-" + "-".join(f"{k}{v}" for k, v in versions.items())
    home = cache_dir("spark-worker-python", name)
    python = home / "bin" / "python"
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f".{name}.lock", "wb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; the others wait and then find it done
        if (home / ".complete").exists():
            return python
        shutil.rmtree(home, ignore_errors=True)
        env = _clean_env()
        steps = [[sys.executable, "-m", "venv", str(home)],
                 [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                  *(f"{k}=={v}" for k, v in versions.items())]]
        for step in steps:
            done = subprocess.run(step, env=env, capture_output=True, timeout=timeout_s)
            if done.returncode != 0:
                raise SparkClusterError(f"building the Spark worker Python failed: {' '.join(step)}\n"
                                        f"{done.stderr.decode(errors='replace')[-3000:]}")
        _check_worker_python(python, env)
        (home / ".complete").write_text(json.dumps(versions) + "\n")
    return python


def _check_worker_python(python: Path, env: dict[str, str]) -> None:
    script = ("import importlib.util, sys\n"
              f"missing = [m for m in {WORKER_PACKAGES!r} if importlib.util.find_spec(m) is None]\n"
              f"extra = [m for m in {NOT_ON_WORKERS!r} if importlib.util.find_spec(m) is not None]\n"
              "sys.exit(f'missing {missing}, must not see {extra}' if missing or extra else 0)\n")
    done = subprocess.run([str(python), "-c", script], env=env, capture_output=True, cwd=tempfile.gettempdir(),
                          timeout=120)
    if done.returncode != 0:
        raise SparkClusterError(f"the Spark worker Python {python} is not clean: "
                                f"{done.stderr.decode(errors='replace').strip()}")


def _clean_env(**extra: str) -> dict[str, str]:
    """An environment for the cluster's processes: the machine's basics, none of this interpreter's Python
    settings (PYTHONPATH would hand the workers our packages)."""
    keep = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "JAVA_HOME", "XDG_CACHE_HOME", "PIP_INDEX_URL",
            "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONFIG_FILE")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update(extra)
    return env


def _spark_home() -> Path:
    """The Spark that pyspark's wheel holds (bin/spark-class, jars/), found without importing pyspark."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SparkClusterError("pyspark is not installed: pip install 'zkbroker[spark]'")
    return Path(spec.origin).resolve().parent


class SparkStandalone:
    """A master and `workers` workers of `cores` cores and `memory` each, on 127.0.0.1; `start` returns once every
    worker has registered, `stop` (also at interpreter exit) ends every process of the cluster."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "512m", base_dir: Path | None = None) -> None:
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self._temp_dir = base_dir is None
        self.dir = Path(base_dir or tempfile.mkdtemp(prefix="zkbroker-spark-"))
        self.python: Path | None = None
        self.port: int | None = None
        self.web_port: int | None = None
        self._procs: list[subprocess.Popen] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def work_dirs(self) -> list[Path]:
        """Each worker's directory: a subdirectory per application it ran an executor of, named by its id."""
        return [self.dir / f"worker-{n}" for n in range(1, self.workers + 1)]

    def start(self, timeout_s: float = 180.0) -> SparkStandalone:
        self.python = worker_python()
        atexit.register(self.stop)
        conf = self.dir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "log4j2.properties").write_text(_LOG4J)
        self.port, self.web_port = free_ports(2)
        deadline = time.monotonic() + timeout_s
        master_log = self.dir / "master.log"
        logged_before = master_log.stat().st_size if master_log.exists() else 0
        try:
            self._launch("master", MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port),
                         "--webui-port", str(self.web_port))
            # The ports it bound, not the ones we picked: a worker's or another test's process may have taken one
            # in between (a status answered by that process's web UI once read as HTML, not the master's JSON).
            self.port, self.web_port = self._wait_for_master(master_log, logged_before, deadline)
            for n, work in enumerate(self.work_dirs, 1):
                work.mkdir(exist_ok=True)
                self._launch(f"worker-{n}", WORKER_CLASS, "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                             "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work),
                             self.master_url)
            self._wait_for_workers(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, name: str, main_class: str, *args: str) -> None:
        home = _spark_home()
        assert self.python is not None
        env = _clean_env(
            SPARK_HOME=str(home), SPARK_CONF_DIR=str(self.dir / "conf"), SPARK_LOG_DIR=str(self.dir),
            SPARK_LOCAL_IP="127.0.0.1", SPARK_LOCAL_DIRS=str(self.dir / "local"), SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
            SPARK_DAEMON_JAVA_OPTS=DAEMON_JAVA_OPTS,
            SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",  # its fixed port 6066 is not ours to take
            # What a worker machine has: this Python first on the PATH, and named as PySpark's interpreter.
            PYSPARK_PYTHON=str(self.python), PATH=f"{self.python.parent}{os.pathsep}{os.environ.get('PATH', '')}")
        with open(self.dir / f"{name}.log", "ab") as log:
            # A session of its own: the executors and their Python workers join the daemon's process group,
            # which stop() signals as one.
            self._procs.append(subprocess.Popen([str(home / "bin" / "spark-class"), main_class, *args], env=env,
                                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                                cwd=self.dir, start_new_session=True))

    def status(self) -> dict:
        """The master's JSON status (workers, applications)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/json/", timeout=5) as response:
            return json.loads(response.read())

    def _wait_for_master(self, log: Path, offset: int, deadline: float) -> tuple[int, int]:
        while True:
            if self._procs[0].poll() is not None:
                raise SparkClusterError(f"the master exited during start\n{self.log_tail()}")
            with open(log, "rb") as f:
                f.seek(offset)
                ports = master_ports(f.read().decode(errors="replace"))
            if ports is not None:
                return ports
            if time.monotonic() > deadline:
                raise SparkClusterError(f"the Spark master did not bind its ports in time\n{self.log_tail()}")
            time.sleep(0.2)

    def _wait_for_workers(self, deadline: float) -> None:
        while True:
            exited = [p.args[1] for p in self._procs if p.poll() is not None]
            if exited:
                raise SparkClusterError(f"{', '.join(exited)} exited during start\n{self.log_tail()}")
            try:
                if self.status().get("aliveworkers") == self.workers:
                    return
            except OSError:
                pass  # the master's web UI is not up yet
            if time.monotonic() > deadline:
                raise SparkClusterError(f"the {self.workers} Spark workers did not register in time\n{self.log_tail()}")
            time.sleep(0.25)

    def log_tail(self, lines: int = 15) -> str:
        out = []
        for log in sorted(self.dir.glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(out)

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM every daemon's process group (workers first: they end their executors), SIGKILL what is left."""
        atexit.unregister(self.stop)
        for proc in reversed(self._procs):
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for proc in reversed(self._procs):
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc, signal.SIGKILL)  # the daemon and whatever of its group outlived it
            proc.wait()
        self._procs.clear()
        if self._temp_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> SparkStandalone:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _signal_group(proc: subprocess.Popen, sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)  # its own session: the group id is its pid
    except ProcessLookupError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zkbroker.lab.spark_cluster")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("ensure-worker-python", help="build the Spark workers' Python (pyspark and pyarrow only) "
                                                     "if it is not in the cache yet, and print its path")
    parser.parse_args(argv)
    try:
        print(worker_python())
    except SparkClusterError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

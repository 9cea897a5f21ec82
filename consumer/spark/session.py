"""The SparkSession of `zkbroker spark-ingest`, the lab's demo and the tests: the zkkafka source registered, our
code shipped to Spark's Python processes (pyfiles.py), Spark's own logging down to errors."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["has_spark_context", "pyspark_python", "spark_session"]


def spark_session(master: str = "local[2]", log_path: Path | None = None, conf: Mapping[str, str] | None = None):
    """A SparkSession with the zkkafka source registered and the project's zip shipped to its Python processes
    (executors, and the driver-side worker that plans a read), which then need only pyspark and pyarrow: this
    process's session if it has one, else a new one on `master` with `conf` (spark-submit's --conf) over our
    defaults. A new one logs errors only; with `log_path` the JVM's own output goes to that file instead of this
    process's stderr.

    Spark's Python processes run PYSPARK_PYTHON: see pyspark_python."""
    conf = dict(conf or {})
    os.environ["PYSPARK_PYTHON"] = pyspark_python(conf, os.environ)
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    from .pyfiles import project_zip, ship
    from .source import ZkKafkaDataSource

    if not has_spark_context():
        # The driver-side Python process that runs a *stream's* source (Spark's streaming source runner) gets no
        # files from addPyFile, unlike the batch planner: it finds our code on the PYTHONPATH it inherits from the
        # JVM, which inherits this process's environment when it is launched just below.
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(project_zip()), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)])
        if master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no warning about the host name's address
        spark_conf = (SparkConf().setMaster(master).setAppName("zkbroker spark-ingest")
                      .set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")
                      .set("spark.sql.shuffle.partitions", "4")
                      # Spark prints a source's options in its plans, redacting those whose key or value matches
                      # this or spark.redaction.regex (secret|password|token): name kafka.sasl.jaas.config's key
                      # too, so its value is never printed, whatever it holds.
                      .set("spark.sql.redaction.options.regex", r"(?i)url|sasl\.jaas\.config|password")
                      .set("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{_quiet_log4j()}")
                      .setAll(conf.items()))
        if log_path is None:
            SparkContext(conf=spark_conf)
        else:
            from pyspark.java_gateway import launch_gateway

            with open(log_path, "ab") as log_file:
                gateway = launch_gateway(spark_conf, popen_kwargs={"stdout": log_file, "stderr": log_file})
            SparkContext(conf=spark_conf, gateway=gateway)
    spark = SparkSession.builder.getOrCreate()
    ship(spark.sparkContext)  # before registering: the source's Python function captures the files shipped so far
    spark.dataSource.register(ZkKafkaDataSource)
    return spark


def pyspark_python(conf: Mapping[str, str], environ: Mapping[str, str]) -> str:
    """The interpreter of Spark's Python processes -- executors on every machine, and the driver-side worker that
    plans a read: `spark.pyspark.python` from `conf` (it takes precedence, as with spark-submit), else the
    environment's PYSPARK_PYTHON (never overridden), else this interpreter (right for local masters, and for
    clusters whose machines have it at the same path)."""
    return conf.get("spark.pyspark.python") or environ.get("PYSPARK_PYTHON") or sys.executable


_LOG4J = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
"""


def _quiet_log4j() -> Path:
    """A log4j2 configuration that lets only errors through, written once per machine."""
    import tempfile

    path = Path(tempfile.gettempdir()) / "zkbroker-spark-log4j2.properties"
    if not path.exists() or path.read_text() != _LOG4J:
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(_LOG4J)
        os.replace(tmp, path)
    return path


def has_spark_context() -> bool:
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None  # what SparkContext.getOrCreate itself checks


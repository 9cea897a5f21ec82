"""Spark for the Spark tests, each made by the first test that needs it and stopped at the end of the run:

* `spark`: one SparkSession of this process (local[2], workers on this interpreter) with the zkkafka source
  registered;
* `spark_cluster`: a Spark standalone master and two workers (separate JVMs, one core and 512 MiB each) whose
  executors run a Python holding only pyspark and pyarrow (zkbroker/lab/spark_cluster.py). Drivers on it run as
  processes of their own (see cluster_driver.py), since this one may already have its local SparkContext.
"""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from consumer.spark.session import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_cluster():
    from zkbroker.lab.spark_cluster import SparkStandalone

    cluster = SparkStandalone(workers=2, cores=1, memory="512m")
    cluster.start(timeout_s=180)
    try:
        yield cluster
    finally:
        cluster.stop()

"""One SparkSession (local[2], workers on this interpreter) for every Spark test of the run, with the zkkafka
source registered; it is created by the first test that needs it and stopped at the end of the run."""

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

"""Spark over a ZooKeeper-era cluster: the PySpark data source `zkkafka` and the `zkbroker spark-ingest` job.

* `options.py` -- the read's options, checked with Spark's messages;
* `planner.py` -- offset ranges per partition from ZooKeeper and the leaders, split into tasks;
* `arrow.py` -- fetched message sets into Arrow record batches;
* `source.py` -- the data source itself (`ZkKafkaDataSource`) and the task that reads one range;
* `streaming.py` -- its stream reader (`spark.readStream.format("zkkafka")`): micro-batches planned from ZooKeeper;
* `ingest.py`, `output.py`, `session.py` -- the exactly-once ingest job, its output directory, its SparkSession.

The only modules of the project that import pyspark. Names are loaded on first use, so
`from consumer.spark import ZkKafkaDataSource` works while `zkbroker --help` imports no Spark at all.
"""

from __future__ import annotations

import importlib

_HOMES = {
    "EARLIEST": "options", "LATEST": "options", "SourceOptions": "options", "ZkKafkaOptionError": "options",
    "parse_options": "options", "parse_stream_options": "options",
    "DataLossError": "planner", "OffsetRange": "planner", "plan_ranges": "planner", "split_ranges": "planner",
    "message_set_batch": "arrow",
    "ZkKafkaDataSource": "source", "ZkKafkaPartition": "source", "ZkKafkaReader": "source",
    "kafka_schema": "source", "ZkKafkaStreamReader": "streaming", "rate_limit": "streaming",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)

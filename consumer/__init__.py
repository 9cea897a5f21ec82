"""Consumers: the ZooKeeper high-level consumer, assignors, the simple consumer and the Spark source."""

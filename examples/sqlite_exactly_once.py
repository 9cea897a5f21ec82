"""Exactly-once with the ZooKeeper consumer: the data and the offsets in one transaction of your own store.

Seed 003's pattern, with SQLite: each message is stored together with its partition's next offset in one
transaction, so after any crash the store holds exactly the messages up to its recorded offset. The rebalance
listener makes a new owner of a partition start at the offset the *store* recorded, not the one in ZooKeeper
(which this consumer never writes). Two owners of one partition can overlap for a moment in the 0.8 design (an
old owner may still be processing a message it was handed before the rebalance), so the transaction also
checks the recorded offset: a message below it was stored already and is skipped. Nothing is lost, nothing
is stored twice.

    python examples/sqlite_exactly_once.py --zookeeper 127.0.0.1:2181/kafka --group g --topic t --db sink.db

SIGTERM or Ctrl-C stops cleanly. `--config key=value` passes consumer settings (repeatable).
"""

from __future__ import annotations

import logging
import sqlite3
import sys

from example_consumer import messages, parse_args

from consumer.assignors import TopicPartition
from consumer.connector import EARLIEST, ZookeeperConsumerConnector

log = logging.getLogger("sqlite_exactly_once")

SCHEMA = """
CREATE TABLE IF NOT EXISTS records (topic TEXT, partition INTEGER, offset INTEGER, key BLOB, value BLOB,
                                    PRIMARY KEY (topic, partition, offset));
CREATE TABLE IF NOT EXISTS offsets (topic TEXT, partition INTEGER, next_offset INTEGER,
                                    PRIMARY KEY (topic, partition));
"""


def connect(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=60, isolation_level=None)  # we BEGIN and COMMIT ourselves
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(SCHEMA)
    return db


class SqliteSink:
    """Stores a message and its partition's next offset atomically; the listener reads the offsets back."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.db = connect(path)

    def store(self, message) -> bool:
        """True if stored, False if an earlier owner stored it already."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")  # one writer at a time, across processes
        try:
            row = db.execute("SELECT next_offset FROM offsets WHERE topic = ? AND partition = ?",
                             (message.topic, message.partition)).fetchone()
            if row is not None and message.offset < row[0]:
                db.execute("ROLLBACK")
                return False
            if row is not None and message.offset > row[0]:
                log.warning("[%s,%d]: offset %d follows the stored %d", message.topic, message.partition,
                            message.offset, row[0])
            db.execute("INSERT INTO records VALUES (?, ?, ?, ?, ?)",
                       (message.topic, message.partition, message.offset, message.key, message.value))
            db.execute("INSERT OR REPLACE INTO offsets VALUES (?, ?, ?)",
                       (message.topic, message.partition, message.offset + 1))
            db.execute("COMMIT")
            return True
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    # The rebalance listener (called on the consumer's rebalance thread, hence its own connection).

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        pass  # every message is committed with its own transaction: nothing is pending

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        db = connect(self.path)
        try:
            starts = {}
            for tp in partitions:
                row = db.execute("SELECT next_offset FROM offsets WHERE topic = ? AND partition = ?",
                                 (tp.topic, tp.partition)).fetchone()
                starts[tp] = row[0] if row is not None else EARLIEST
            return starts
        finally:
            db.close()


def main() -> int:
    args, config = parse_args(__doc__.splitlines()[0], "--db", "the SQLite file holding the records and their offsets")
    config["auto.commit.enable"] = "false"  # the offsets live in the store, not in ZooKeeper
    sink = SqliteSink(args.db)
    connector = ZookeeperConsumerConnector(config, listener=sink)
    try:
        stream = connector.create_message_streams({args.topic: 1})[args.topic][0]
        for message in messages(stream):
            sink.store(message)
    finally:
        connector.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

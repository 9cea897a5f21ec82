"""ZooKeeper: the one table of Kafka 0.8.2 paths, the exact JSON of every znode, and our ZkClient
(kazoo plus ZkClient-style re-armed watches and session listeners)."""

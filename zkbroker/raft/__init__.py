"""KIP-595 Raft for the `__cluster_metadata` quorum, sans-I/O: the epoch states, the node that drives them
(time, randomness and messages come in; messages, quorum-state writes, log flushes and timers go out), the
RPCs as plain dataclasses, the log interface with an in-memory model, and the quorum-state file format."""

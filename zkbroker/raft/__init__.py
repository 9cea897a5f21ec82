"""KIP-595 Raft for the `__cluster_metadata` quorum. Sans-I/O: the epoch states, the node that drives them
(time, randomness and messages come in; messages, quorum-state writes, log flushes and timers go out), the RPCs
as plain dataclasses, the log interface with an in-memory model, the quorum-state file. Around it: the metadata
log on disk (metadata_log.py), the asyncio driver that is also the metadata layer's RaftClient (raft_manager.py,
listener.py), and the snapshot policy the metadata layer writes snapshots by."""

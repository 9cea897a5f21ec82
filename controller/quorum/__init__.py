"""The quorum controller (KRaft mode, KIP-500/631), after Kafka's QuorumController: one event queue, managers that
answer requests with metadata records, and replay of those records as the only way its state changes."""

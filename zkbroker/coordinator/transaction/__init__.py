"""The transaction coordinator's pure parts (Kafka 2.x's kafka.coordinator.transaction): the states and
transitions of a transactional id, the coordinator's decisions, and the `__transaction_state` formats."""

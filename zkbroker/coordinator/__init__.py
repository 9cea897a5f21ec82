"""The group coordinator's pure parts (Kafka's kafka.coordinator.group): the group state machine, which broker
coordinates a group, and the key/value formats of `__consumer_offsets`. No sockets, no clock of its own; the
broker drives it from zkbroker/server/group_coordinator.py."""

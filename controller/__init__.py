"""The controller: election through /controller, the controller context and its single event queue, the partition
and replica state machines, the leader selectors, topic deletion, reassignment and the channel to the brokers."""

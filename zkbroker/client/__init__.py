"""Our Kafka client side: connections, cluster metadata, and the producer (partitioner, accumulator, sender),
used by the controller channel, the consumers, the lab and the tools."""

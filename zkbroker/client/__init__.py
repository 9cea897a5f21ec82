"""Our Kafka client side: connections, metadata and (as it lands) the producer and low-level fetches,
used by the controller channel, the consumer, the lab and the tools."""

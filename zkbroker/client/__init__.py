"""Our Kafka client side: connections (thin drivers of protocol.client_codec), cluster metadata, and the
producer (partitioner, accumulator, sender), used by the broker, the consumers, the lab and the tools."""

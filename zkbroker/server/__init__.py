"""The broker process: KafkaServer (startup/shutdown order), broker registration (health check),
the metadata cache and the asyncio network server with its request handlers."""

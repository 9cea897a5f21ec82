"""The log on disk, laid out as Kafka 0.8.2 did: segments (.log + .index) in a directory per partition, the Log
(append, reads as file ranges, roll, retention, recovery, truncation), offset checkpoints and the LogManager."""

"""Kafka's TopicAndPartition: the one name for "partition P of topic T" across the broker, the controller
and the consumers.

A NamedTuple, so it equals and hashes like the plain ``(topic, partition)`` tuple it replaces: keys built
either way find each other in a dict while code moves over to it.
"""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"[{self.topic},{self.partition}]"  # TopicAndPartition.toString in 0.8.2

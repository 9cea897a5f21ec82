"""Reading timeline events (DESIGN §10) for the views: which broker and partition an event touches, and the
filters of the live timeline. Pure functions of the event dicts."""

from __future__ import annotations

from collections.abc import Iterable


def broker_of(event: dict) -> int | None:
    """The broker an event is about: its `broker` field, else the broker of `broker:N` / `controller:N`
    in its `source` or `node`."""
    if isinstance(event.get("broker"), int):
        return event["broker"]
    for key in ("node", "source"):
        value = event.get(key)
        if isinstance(value, str):
            kind, _, number = value.partition(":")
            if kind in ("broker", "controller") and number.isdigit():
                return int(number)
    return None


def partition_of(event: dict) -> tuple[str, int] | None:
    topic, partition = event.get("topic"), event.get("partition")
    if isinstance(topic, str) and isinstance(partition, int):
        return topic, partition
    return None


def matches(event: dict, broker: int | None = None, topic: str | None = None, partition: int | None = None,
            kinds: Iterable[str] | None = None, since: float | None = None,
            exclude: Iterable[str] | None = None) -> bool:
    """The live timeline's filters: by broker, by topic (and partition), by kind (or all kinds but those
    excluded), and events after `since`."""
    if since is not None and not event.get("ts", 0) > since:
        return False
    if kinds is not None and event.get("kind") not in kinds:
        return False
    if exclude is not None and event.get("kind") in exclude:
        return False
    if broker is not None and broker_of(event) != broker:
        return False
    if topic is not None:
        tp = partition_of(event)
        if tp is None or tp[0] != topic or (partition is not None and tp[1] != partition):
            return False
    return True

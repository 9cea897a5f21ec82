"""A member of a coordinator group for the failover lab's `consumer` step with `coordinator = true`: an unmodified
confluent-kafka (librdkafka) Consumer that subscribe()s with a group.id, so the broker's group coordinator, not
ZooKeeper, decides the membership (docs/group-coordinator.md).

    python -m zkbroker.lab.group_member [--command-config F] BOOTSTRAP GROUP TOPIC NAME [KEY=VALUE ...]

NAME is the member's client.id (what the coordinator's DescribeGroups names it by); KEY=VALUE pairs are
librdkafka settings; `--command-config F` is a secured lab's client properties (DIR/client.properties: the
admin's TLS and SASL settings, read from the file so that no password shows in the process list). It runs as
a process of its own, so that the runner can pause and kill it as it does a ZooKeeper consumer, and prints
one flushed line per assignment, revocation and client error (the runner's DIR/consumer-NAME.log) until it is
killed or gets SIGTERM (then it closes: a LeaveGroup).
"""

from __future__ import annotations

import signal
import sys
import threading

from zkbroker.client.security import ClientSecurity


def _say(line: str) -> None:
    print(line, flush=True)


def _names(partitions) -> str:
    return ", ".join(f"{p.topic}-{p.partition}" for p in partitions) or "nothing"


def main(argv: list[str]) -> int:
    from confluent_kafka import Consumer

    security: dict[str, str] = {}
    if argv[:1] == ["--command-config"] and len(argv) > 1:
        found = ClientSecurity.from_file(argv[1])
        security = found.librdkafka_config() if found is not None else {}
        argv = argv[2:]
    if len(argv) < 4 or any("=" not in pair for pair in argv[4:]):
        print("usage: " + __doc__.strip().splitlines()[4].strip(), file=sys.stderr)
        return 2
    bootstrap, group, topic, name = argv[:4]
    config = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
              "auto.offset.reset": "earliest", **security,
              "error_cb": lambda error: _say(f"{name}: client error: {error}"),
              **dict(pair.split("=", 1) for pair in argv[4:])}
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    consumer = Consumer(config)
    consumer.subscribe([topic],
                       on_assign=lambda _, partitions: _say(f"{name}: assigned {_names(partitions)}"),
                       on_revoke=lambda _, partitions: _say(f"{name}: revoked {_names(partitions)}"))
    _say(f"{name}: subscribed to {topic} in group {group}")
    try:
        while not stopping.is_set():
            message = consumer.poll(0.5)
            if message is not None and message.error():
                _say(f"{name}: {message.error()}")
    finally:
        consumer.close()
        _say(f"{name}: closed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

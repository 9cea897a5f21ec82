"""Timeline events in plain words, one line an event, in Kafka's (or ZooKeeper's) own log wording where
there is one (`zkbroker lab timeline`)."""

from __future__ import annotations

import time
from collections.abc import Callable

_ZOOKEEPER_STATES = {"leader": "LEADING", "follower": "FOLLOWING", "looking": "LOOKING", "observer": "OBSERVING"}


def format_line(event: dict) -> str:
    """`12:00:03.412 broker:2      Truncating log t-0 to offset 41 ...`"""
    return f"{clock(event['ts'])} {event.get('source', '?'):<13} {describe(event)}"


def clock(ts_ms: float) -> str:
    """Local wall-clock time of an epoch-milliseconds timestamp, to the millisecond."""
    seconds, millis = divmod(int(ts_ms), 1000)
    return time.strftime("%H:%M:%S", time.localtime(seconds)) + f".{millis:03d}"


def describe(event: dict) -> str:
    """The event's words; an unknown kind (or one missing a field) is shown as its kind and fields."""
    fields = {k: v for k, v in event.items() if k not in ("ts", "source", "kind")}
    words = _WORDS.get(event.get("kind", ""))
    if words is not None:
        try:
            return words(fields)
        except (KeyError, TypeError, ValueError):
            pass
    return " ".join([str(event.get("kind", "?"))] + [f"{k}={_value(v)}" for k, v in fields.items()])


def _value(v: object) -> str:
    return ",".join(map(str, v)) if isinstance(v, list) else str(v)


def _tp(f: dict) -> str:
    return f"[{f['topic']},{f['partition']}]"


def _session(f: dict) -> str:
    session = f.get("session")
    return f" (session 0x{session:x})" if isinstance(session, int) else ""


def _isr_changed(f: dict) -> str:
    old, new = f.get("from"), f["isr"]
    on = f" on broker {f['broker']}" if "broker" in f else ""
    if old is None:
        return f"Partition {_tp(f)}{on}: ISR is now {_value(new)}"
    verb = "Shrinking" if len(new) < len(old) else "Expanding"
    return f"Partition {_tp(f)}{on}: {verb} ISR for partition {_tp(f)} from {_value(old)} to {_value(new)}"


def _zookeeper_role(f: dict) -> str:
    role = f["role"]
    state = _ZOOKEEPER_STATES.get(role)
    if state:
        return f"ZooKeeper server {f['server']} is {role} ({state})"
    if role == "down":
        return f"ZooKeeper server {f['server']} is down (does not answer)"
    return f"ZooKeeper server {f['server']} is {role}"


def _fault(verb: str) -> Callable[[dict], str]:
    def words(f: dict) -> str:
        if f.get("fault") != "partition":
            return f"{verb} {f['fault']}: " + ", ".join(f"{k}={_value(v)}" for k, v in f.items() if k != "fault")
        how = "what it sends is dropped" if f.get("one_way") else "both directions"
        return f"{verb} partition: {f['node']} cut off from {_value(f['peers'])} ({how})"
    return words


def _process(verb: str) -> Callable[[dict], str]:
    def words(f: dict) -> str:
        how = f" with {f['signal']}" if "signal" in f and verb != "started" else ""
        return f"{f['node']} {verb}{how} (pid {f['pid']})"
    return words


_WORDS: dict[str, Callable[[dict], str]] = {
    # KafkaController.onControllerFailover / ControllerEpochListener wording
    "controller_elected": lambda f: (f"[Controller {f['broker']}]: Broker {f['broker']} starting become controller "
                                     f"state transition; Controller {f['broker']} incremented epoch to {f['epoch']}"),
    "controller_resigned": lambda f: f"[Controller {f['broker']}]: Broker {f['broker']} resigning as the controller",
    # ZkUtils.registerBrokerInZk
    "broker_registered": lambda f: (f"Registered broker {f['broker']} at path /brokers/ids/{f['broker']}"
                                    + (f" with address {f['host']}:{f['port']}." if "host" in f else ".")
                                    + _session(f)),
    "broker_expired": lambda f: (f"zookeeper state changed (Expired): broker {f['broker']}'s session ended and "
                                 f"/brokers/ids/{f['broker']} is gone{_session(f)}"),
    "leader_changed": lambda f: (f"Partition {_tp(f)}: leader {f['leader']}, leader epoch {f['leader_epoch']}, "
                                 f"ISR {_value(f['isr'])}, zkVersion {f['zk_version']}"),
    "isr_changed": _isr_changed,  # Partition.scala's "Shrinking ISR" / "Expanding ISR"
    "hw_moved": lambda f: (f"Partition {_tp(f)}" + (f" on broker {f['broker']}" if "broker" in f else "")
                           + f": high watermark {f['from']} -> {f['to']}"),
    # Log.truncateTo
    "truncated": lambda f: (f"Truncating log {f['topic']}-{f['partition']} to offset {f['to']} "
                            f"(from {f['from']}): {f['reason']}"),
    "leader_and_isr_sent": lambda f: (f"Sending LeaderAndIsr for {_tp(f)} to broker {f['broker']}: leader "
                                      f"{f['leader']}, leader epoch {f['leader_epoch']}, ISR {_value(f['isr'])}"),
    "leader_and_isr_applied": lambda f: (f"Applied LeaderAndIsr for {_tp(f)}: leader {f['leader']}, leader epoch "
                                         f"{f['leader_epoch']}, ISR {_value(f['isr'])}"),
    "produce_acked": lambda f: f"Partition {_tp(f)}: offset {f['offset']} acknowledged (acks={f['acks']})",
    "fault_applied": _fault("Applied"),
    "fault_healed": _fault("Healed"),
    "zookeeper_role": _zookeeper_role,
    "process_started": _process("started"),
    "process_killed": _process("killed"),
    "process_paused": _process("paused"),
    "process_resumed": _process("resumed"),
    "process_stopped": _process("stopped"),
    "network_created": lambda f: f"Lab network {f['subnet']} created (a namespace per node)",
    "lab_down": lambda f: "Lab stopped (every process, namespace and rule removed)",
}

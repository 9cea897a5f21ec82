"""Timeline events in plain words, one line an event, in Kafka's (or ZooKeeper's) own log wording where
there is one (`zkbroker lab timeline`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from zkbroker import fault_points

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


def _offsets(f: dict) -> str:
    """A produce request's offsets: "offset 41", or "offsets 41-45"."""
    last = f.get("last_offset", f["offset"])
    return f"offsets {f['offset']}-{last}" if last != f["offset"] else f"offset {f['offset']}"


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
        fault = f["fault"]
        if fault == "partition":
            how = "what it sends is dropped" if f.get("one_way") else "both directions"
            return f"{verb} partition: {f['node']} cut off from {_value(f['peers'])} ({how})"
        if fault in fault_points.POINTS or fault == "all":
            if verb == "Healed":
                what = "every fault point" if fault == "all" else f"fault point {fault}"
                return f"Healed {what} on {f['node']}"
            when = " from its next start" if f.get("at_start") else ""
            point = {"point": fault, **{k: v for k, v in f.items() if k not in ("fault", "node", "at_start")}}
            return f"Applied fault point {fault} on {f['node']}{when}: {fault_points.describe(point)}"
        return f"{verb} {fault}: " + ", ".join(f"{k}={_value(v)}" for k, v in f.items() if k != "fault")
    return words


def _fault_fired(f: dict) -> str:
    point = f["point"]
    if point == "stop_before_txn_markers":
        how = "SIGKILL" if f.get("action", "kill") == "kill" else "SIGSTOP"
        return (f"Fault point {point}: the transaction coordinator stops itself with {how} between the PrepareCommit "
                f"of {f.get('transactional_id')} and its markers")
    if point.startswith("stop_"):
        when = "before" if point.startswith("stop_before") else "after"
        how = "SIGKILL" if f.get("action", "kill") == "kill" else "SIGSTOP"
        return f"Fault point {point}: stopping itself with {how} right {when} the ZooKeeper write {f['write']}"
    if point == "hold_offset_out_of_range":
        how = f"{f['ms']} ms" if f.get("ms") is not None else "until released"
        return (f"Fault point {point}: fetch offset {f['offset']} of partition {_tp(f)} is out of range at leader "
                f"{f['leader']}; the fetcher waits {how} before asking the leader for its offsets")
    if point == "hold_cleaner_at":
        return (f"Fault point {point}: a log cleaner thread stopped at phase {f.get('phase')} of a cleaning; it "
                "waits there until released")
    if point == "hold_transactional_produce":
        return (f"Fault point {point}: a Produce request of transactional id {f.get('transactional_id')} for "
                f"{', '.join(f.get('partitions') or [])} waits unanswered until released")
    if point == "hold_group_loading":
        return (f"Fault point {point}: the loading of offsets partition {_tp(f)} waits until released (its "
                "groups answer COORDINATOR_LOAD_IN_PROGRESS)")
    if point == "hold_heartbeats":
        return (f"Fault point {point}: the broker's {f.get('request', 'heartbeat')} to the active controller waits "
                "unsent until released")
    if point == "hold_metadata":
        return (f"Fault point {point}: the broker's fetches of the metadata log wait unsent until released; it "
                "applies nothing the controller decides meanwhile")
    kind, request = point.split("_next_", 1)
    name = (fault_points.REQUESTS[request] + " request" if request in fault_points.REQUESTS
            else fault_points.RESPONSES.get(request, request))
    what = f"dropped a {name}" if kind == "drop" else f"holding a {name} {f.get('ms')} ms"
    return f"Fault point {point}: {what} ({f.get('remaining', 0)} more to come)"


def _leader_and_isr(f: dict) -> str:
    """0.8.2's state change log: `(Leader:1,ISR:1,2,LeaderEpoch:3,ControllerEpoch:2)`."""
    return (f"(Leader:{f['leader']},ISR:{_value(f['isr'])},LeaderEpoch:{f['leader_epoch']},"
            f"ControllerEpoch:{f['controller_epoch']},zkVersion:{f['zk_version']})")


def _transition(f: dict, broker: int) -> str:
    return "become-leader" if f["leader"] == broker else "become-follower"


def _leader_and_isr_sent(f: dict) -> str:
    head = f"Controller {f['controller']} epoch {f['controller_epoch']} sending"
    if "count" in f:
        return (f"{head} LeaderAndIsr request with {f['count']} partition states ({f['leading']} to lead) to broker "
                f"{f['broker']}")
    return (f"{head} {_transition(f, f['broker'])} LeaderAndIsr request {_leader_and_isr(f)} to broker {f['broker']} "
            f"for partition {_tp(f)}")


def _leader_and_isr_applied(f: dict) -> str:
    if "count" in f:
        return (f"Broker {f['broker']} completed LeaderAndIsr request from controller {f['controller']} epoch "
                f"{f['controller_epoch']} for {f['count']} partitions ({f['leading']} to lead, {f['ignored']} ignored)")
    return (f"Broker {f['broker']} completed LeaderAndIsr request {_leader_and_isr(f)} from controller "
            f"{f['controller']} epoch {f['controller_epoch']} for the {_transition(f, f['broker'])} transition for "
            f"partition {_tp(f)}")


def _admin_request(f: dict) -> str:
    """The Admin API (server/admin_manager.py): the request, its outcome, and the znodes it wrote for the
    controller (and every broker) to act on."""
    only = " (validate only)" if f.get("validate_only") else ""
    outcome = f["error"] + (f": {f['message']}" if f.get("message") else "")
    wrote = f"; wrote {', '.join(f['znodes'])}" if f.get("znodes") else ""
    return f"{f['api']}{only} for {f['resource_type']} {f['resource']!r}: {outcome}{wrote}"


def _config_changed(f: dict) -> str:
    """DynamicConfigManager: a /config/changes notification applied by a broker."""
    logs = f" (logs of {', '.join(f['topics'])} updated)" if f.get("topics") else ""
    return f"Processed config change for {f['entity_type']}/{f['entity_name']}{logs}"


def _kafka_offsets(offsets: dict) -> str:
    """Spark's Kafka offsets JSON as `t-0 41, t-1 7`."""
    return ", ".join(f"{t}-{p} {o}" for t, parts in sorted(offsets.items())
                     for p, o in sorted(parts.items(), key=lambda item: int(item[0]))) or "none"


def _stream_batch(f: dict) -> str:
    """A streaming ingest's progress line (`spark-ingest --stream`), with the offsets the batch covered."""
    start = f" from {_kafka_offsets(f['start'])}" if f.get("start") else ""
    rate = f.get("rows_per_s", 0)
    rate_words = f"{rate:,.{1 if rate < 10 else 0}f}"
    return (f"Stream {f['stream']} batch {f['batch']}: {f['rows']} rows, {rate_words} rows/s{start} "
            f"to {_kafka_offsets(f['end'])}; {f['behind']} offsets behind the latest ({_kafka_offsets(f['latest'])})")


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
    "leader_changed": lambda f: (f"Partition {_tp(f)}: leader {f['leader']}"
                                 + (f" (was {f['previous_leader']})" if f.get("previous_leader") is not None else "")
                                 + f", leader epoch {f['leader_epoch']}, ISR {_value(f['isr'])}, "
                                 + (f"partition epoch {f['partition_epoch']}" if "partition_epoch" in f  # KRaft's
                                    else f"zkVersion {f['zk_version']}")),
    # SimpleAclAuthorizer's authorizer log line for a denial
    "acl_denied": lambda f: (f"Principal = {f['principal']} is Denied Operation = {f['operation']} from host = "
                             f"{f['host']} on resource = {f['resource_type']}:{f['resource']}"
                             + (f" (listener {f['listener']})" if f.get("listener") else "")),
    "isr_changed": _isr_changed,  # Partition.scala's "Shrinking ISR" / "Expanding ISR"
    # Partition.scala's (debug) "High watermark for partition [t,0] updated to 41"; sampled a few times a second
    "hw_moved": lambda f: (f"High watermark for partition {_tp(f)} updated to {f['to']} (from {f['from']}"
                           + (f", as {f['role']})" if "role" in f else ")")),
    # Log.truncateTo
    "truncated": lambda f: (f"Truncating log {f['topic']}-{f['partition']} to offset {f['to']} "
                            f"(from {f['from']}): {f['reason']}"),
    "leader_and_isr_sent": _leader_and_isr_sent,  # the state change log of 0.8.2's ControllerBrokerRequestBatch
    "leader_and_isr_applied": _leader_and_isr_applied,  # and of its ReplicaManager.becomeLeaderOrFollower
    "produce_appended": lambda f: (f"Partition {_tp(f)}: {_offsets(f)} appended from request "
                                   f"{f.get('correlation_id')} of client {f.get('client')!r} on connection "
                                   f"{f.get('connection')}"),
    "produce_acked": lambda f: f"Partition {_tp(f)}: {_offsets(f)} acknowledged (acks={f['acks']})",
    "fault_applied": _fault("Applied"),
    "fault_healed": _fault("Healed"),
    "fault_fired": _fault_fired,
    # KRaft: the active controller's fencing decisions (ClusterControlManager), and a broker's own view of them
    "broker_fenced": lambda f: (f"Broker {f['broker']} registered under broker epoch {f['epoch']}, fenced until it "
                                f"has caught up" if f.get("registered")
                                else f"Broker {f['broker']} fenced (broker epoch {f['epoch']})"),
    "broker_unfenced": lambda f: f"Broker {f['broker']} unfenced (broker epoch {f['epoch']})",
    # KafkaController.onBrokerStartup / onBrokerFailure
    "broker_started": lambda f: f"New broker startup callback for {f['broker']} (controller epoch {f['epoch']})",
    "broker_failed": lambda f: f"Broker failure callback for {f['broker']} (controller epoch {f['epoch']})",
    "zookeeper_role": _zookeeper_role,
    "process_started": _process("started"),
    "process_killed": _process("killed"),
    "process_paused": _process("paused"),
    "process_resumed": _process("resumed"),
    "process_stopped": _process("stopped"),
    "network_created": lambda f: f"Lab network {f['subnet']} created (a namespace per node)",
    "lab_down": lambda f: "Lab stopped (every process, namespace and rule removed)",
    "admin_request": _admin_request,
    "config_changed": _config_changed,
    # the lab's streaming ingest (zkbroker/lab/spark_stream.py)
    "stream_started": lambda f: (f"Stream {f['stream']}: a streaming ingest of {f['topic']} into Parquet started "
                                 f"(group {f['group']}, trigger {f['trigger']}, checkpoint {f['checkpoint']})"),
    "stream_batch": _stream_batch,
    "stream_stopped": lambda f: (f"Stream {f['stream']} stopped after its running batch: {f['rows']} rows in "
                                 f"{f['batches']} batches"),
    "stream_failed": lambda f: f"Stream {f['stream']} failed: {f['error']}",
}

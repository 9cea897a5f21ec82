"""`zkbroker lab ...`: the lab commands (docs/lab.md, docs/scenarios.md) and their terminal output."""

from __future__ import annotations

import argparse
import json

from zkbroker import fault_points, timeline
from zkbroker.lab.cluster import ENSEMBLE_SIZES, JAAS_FILE, LabCluster, LabError
from zkbroker.lab.lesson_cli import add_lesson_commands
from zkbroker.lab.narration import format_line
from zkbroker.lab.processes import process_state
from zkbroker.lab.scenario_cli import add_scenario_commands
from zkbroker.zk.security import JAAS_CONFIG_ENV


def add_lab_commands(commands: argparse._SubParsersAction) -> None:
    lab = commands.add_parser("lab", help="run a local cluster for failover scenarios and teaching")
    actions = lab.add_subparsers(dest="lab_command", metavar="ACTION", required=True)

    def action(name: str, help_text: str, run, process: bool = False) -> argparse.ArgumentParser:
        p = actions.add_parser(name, help=help_text)
        p.add_argument("--dir", required=True, help="the lab's directory (holds cluster.json and logs)")
        if process:
            which = p.add_mutually_exclusive_group(required=True)
            which.add_argument("--broker", type=_broker_id, metavar="ID|controller",
                               help="a broker id, or controller: the broker /controller names now")
            which.add_argument("--zookeeper", type=int, metavar="N", help="a ZooKeeper server, by its myid")
            which.add_argument("--controller", type=_controller_id, metavar="ID|active",
                               help="a KRaft lab's controller by node id, or active: the quorum's leader now")
        p.set_defaults(run=run)
        return p

    up = action("up", "start ZooKeeper and brokers (or, with --kraft, a controller quorum); return when the "
                "cluster is usable", _up)
    up.add_argument("--brokers", type=int, default=3, metavar="N",
                    help="how many brokers (default 3; with --kraft process.roles=broker nodes, 0: the quorum alone)")
    up.add_argument("--kraft", action="store_true",
                    help="KRaft mode (DESIGN §17): controller processes 3001.. elect a quorum leader; no ZooKeeper")
    up.add_argument("--controllers", type=int, default=3, choices=(1, 3, 5), metavar="1|3|5",
                    help="--kraft: how many controllers (voters of the metadata quorum)")
    up.add_argument("--directory-ids", action="store_true",
                    help="--kraft: name the voters with their log dirs' directory ids (KIP-853, Kafka 3.8+): "
                         "controller.quorum.voters=ID@HOST:PORT:DIRECTORY_ID, so a controller whose disk was "
                         "replaced is no voter until added again")
    up.add_argument("--zookeeper", default="auto", metavar="auto|HOST:PORT",
                    help="auto starts a real ZooKeeper; otherwise use this one (a fresh chroot is added)")
    up.add_argument("--zookeepers", type=int, default=1, choices=ENSEMBLE_SIZES, metavar="1|3|5",
                    help="how many ZooKeeper servers the lab runs (3 or 5: a real ensemble)")
    up.add_argument("--network", action="store_true",
                    help="each broker and ZooKeeper server in a network namespace of its own on a lab bridge, "
                         "so `lab partition` can cut links (needs root)")
    up.add_argument("--subnet", metavar="CIDR", help="the lab network's addresses (default: a free 10.213.N.0/24)")
    up.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                    help="a server.properties setting for every broker (repeatable)")
    up.add_argument("--base-port", type=int, default=None, metavar="P",
                    help="brokers listen on P, P+1, ... (default 9092..., or free ports if those are taken)")
    up.add_argument("--secure", action="store_true",
                    help="ZooKeeper with a SASL login for the brokers, and znodes with Kafka's secure ACLs "
                         "(zookeeper.set.acl=true); tools log in with DIR/jaas.conf")
    up.add_argument("--security", default="plaintext", metavar="PROTOCOL",
                    help="the brokers' listener: plaintext (default), ssl, sasl_plaintext or sasl_ssl, with the "
                         "lab's CA and certificates, an admin super user and inter-broker credentials; tools "
                         "reach it with --command-config DIR/client.properties")
    action("env", "print the lab's addresses as shell variables: eval \"$(zkbroker lab env --dir DIR)\"", _env)
    status = action("status", "show the controller and epoch, brokers and partitions", _status)
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    action("kill", "SIGKILL one broker or ZooKeeper server", _signal_command, process=True)
    action("pause", "SIGSTOP one broker or ZooKeeper server (a broker paused past its session timeout looks "
           "dead, like a long GC pause)", _signal_command, process=True)
    action("resume", "SIGCONT a paused broker or ZooKeeper server", _signal_command, process=True)
    action("start", "start a stopped or killed broker or ZooKeeper server again", _start, process=True)
    action("stop", "stop one broker cleanly (SIGTERM), or one ZooKeeper server", _signal_command, process=True)
    partition = action("partition", "drop traffic between NODE and each --from node (needs lab up --network)",
                       _partition)
    partition.add_argument("node", metavar="NODE", help=NODE_HELP)
    partition.add_argument("--from", dest="peers", required=True, metavar="NODE[,NODE...]")
    partition.add_argument("--one-way", action="store_true", help="drop only what NODE sends to them")
    heal = action("heal", "remove the partitions involving NODE (every partition without NODE)", _heal)
    heal.add_argument("node", metavar="NODE", nargs="?", help=NODE_HELP)
    state = action("state", "a broker's own view: each partition's applied LeaderAndIsr, HW and LEO, its "
                   "metadata cache, ZooKeeper session and controller epoch (its lab control socket)", _state)
    which = state.add_mutually_exclusive_group(required=True)
    which.add_argument("--broker", type=int, metavar="ID")
    which.add_argument("--controller", type=_controller_id, metavar="ID|active",
                       help="a KRaft lab's controller: its Raft state and metadata log offsets")
    state.add_argument("--json", action="store_true", help="print the broker's `state` answer as JSON")
    fault = action("fault", "put a fault point in force inside a broker (or --heal it); a broker that is down "
                   "gets it from the first instant of its next start", _fault)
    which = fault.add_mutually_exclusive_group(required=True)
    which.add_argument("--broker", type=int, metavar="ID")
    which.add_argument("--controller", type=_controller_id, metavar="ID|active",
                       help="a KRaft lab's controller (hold_fetchers, drop_next_vote_response, ...)")
    fault.add_argument("point", metavar="POINT", nargs="?", help=", ".join(fault_points.POINTS))
    fault.add_argument("--count", type=int, metavar="N", help="drop_next_* / delay_next_*: how many requests")
    fault.add_argument("--ms", type=int, metavar="MS", help="delay_next_*: how long each request is held; "
                       "hold_offset_out_of_range: how long each hold lasts (default: until released)")
    fault.add_argument("--write", choices=tuple(fault_points.ZOOKEEPER_WRITES), metavar="WRITE",
                       help="stop_*_zookeeper_write: which write (" + ", ".join(fault_points.ZOOKEEPER_WRITES) + ")")
    fault.add_argument("--phase", choices=tuple(fault_points.CLEANER_PHASES), metavar="PHASE",
                       help="hold_cleaner_at: the phase of a cleaning the log cleaner stops at ("
                       + ", ".join(fault_points.CLEANER_PHASES) + ")")
    fault.add_argument("--action", choices=fault_points.STOP_ACTIONS,
                       help="stop_*_zookeeper_write: kill (SIGKILL) or pause (SIGSTOP; `lab resume` goes on)")
    fault.add_argument("--heal", action="store_true", help="heal POINT, or every fault point of the broker")
    fault.add_argument("--json", action="store_true", help="print the fault points in force as JSON")
    timeline_ = action("timeline", "print the lab's timeline (DIR/timeline.jsonl), one line an event", _timeline)
    timeline_.add_argument("--follow", action="store_true", help="keep printing events as they are appended")
    timeline_.add_argument("--json", action="store_true", help="print the events as JSON, one object a line")
    ui = action("ui", "serve the teaching dashboard: a live web view of the lab (docs/dashboard.md)", _ui)
    ui.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: loopback only)")
    ui.add_argument("--port", type=int, default=8080, help="the port (0: any free one)")
    action("down", "stop every broker and the lab's ZooKeeper servers; remove the lab network", _down)
    add_scenario_commands(actions)
    add_lesson_commands(actions)


NODE_HELP = ("broker:ID, zookeeper (every server), zookeeper:N, controller:ID (a KRaft lab's), or clients "
             "(everything outside the lab, this shell included)")


def _up(args: argparse.Namespace) -> int:
    lab = LabCluster(args.dir)
    cluster = lab.up(brokers=args.brokers, zookeeper=args.zookeeper, config=args.config, base_port=args.base_port,
                     zookeepers=args.zookeepers, network=args.network, subnet=args.subnet, secure=args.secure,
                     kraft=args.kraft, controllers=args.controllers, security=args.security,
                     directory_ids=args.directory_ids)
    status = lab.status()
    if cluster.kraft:
        for c in cluster.controllers:
            print(f"Controller {c.id}: {c.host}:{c.port} (pid {c.pid})")
        quorum = status["quorum"]
        print(f"Quorum leader: controller {quorum['leader']} at epoch {quorum['epoch']}")
        for b in status["brokers"]:
            print(f"Broker {b['id']}: {b['host']}:{b['port']} (pid {b['pid']}), "
                  f"{'fenced' if b['fenced'] else 'unfenced'} at broker epoch {b['broker_epoch']}")
        if not cluster.brokers:
            print("No brokers (--brokers 0): this lab is its quorum.")
        if status["network"]:
            print(f"Lab network: {status['network']['subnet']} on bridge {status['network']['bridge']}")
        print(f"Cluster description: {lab.cluster_file}")
        return 0
    print(f"ZooKeeper: {cluster.zookeeper}" + (f" (pid {cluster.zookeeper_pid})" if cluster.zookeeper_pid else ""))
    if len(status["zookeepers"]) > 1:
        for z in status["zookeepers"]:
            print(f"ZooKeeper server {z['id']}: {z['host']}:{z['port']} (pid {z['pid']}), {z['role']}")
    for b in cluster.brokers:
        print(f"Broker {b.id}: {b.host}:{b.port} (pid {b.pid})")
    print(f"Controller: broker {status['controller']} at epoch {status['controller_epoch']}")
    if status["network"]:
        print(f"Lab network: {status['network']['subnet']} on bridge {status['network']['bridge']} "
              f"(clients reach it from {status['network']['clients']})")
    print(f"Cluster description: {lab.cluster_file}")
    if lab.secure:
        print(f"ZooKeeper login for tools: export {JAAS_CONFIG_ENV}={lab.dir / JAAS_FILE}")
    if cluster.security:
        print(f"Listeners: {cluster.security['protocol']}; the admin's client configuration for tools: "
              f"--command-config {cluster.security['client_properties']}")
    return 0


def _env(args: argparse.Namespace) -> int:
    """ZK (the connect string, chroot included) and BROKERS (a bootstrap list), for the tools' --zookeeper and
    --broker-list; a --secure lab's login too. Nothing is asked of the cluster: cluster.json says it all."""
    import shlex

    lab = LabCluster(args.dir)
    cluster = lab.load()
    if cluster.kraft:
        print(f"CONTROLLERS={shlex.quote(','.join(f'{c.host}:{c.port}' for c in cluster.controllers))}")
        print(f"BROKERS={shlex.quote(','.join(f'{b.host}:{b.port}' for b in cluster.brokers))}")
        return 0
    print(f"ZK={shlex.quote(cluster.zookeeper)}")
    print(f"BROKERS={shlex.quote(','.join(f'{b.host}:{b.port}' for b in cluster.brokers))}")
    if lab.secure:
        print(f"export {JAAS_CONFIG_ENV}={shlex.quote(str(lab.dir / JAAS_FILE))}")
    if cluster.security:  # a secured lab's admin, for --command-config "$COMMAND_CONFIG"
        print(f"COMMAND_CONFIG={shlex.quote(cluster.security['client_properties'])}")
    return 0


def _status(args: argparse.Namespace) -> int:
    status = LabCluster(args.dir).status()
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        print(format_status(status))
    return 0


def format_kraft_status(status: dict) -> str:
    quorum = status["quorum"]
    lines = ["Mode:       KRaft (no ZooKeeper)",
             "Quorum:     " + (f"controller {quorum['leader']} leads epoch {quorum['epoch']}, high watermark "
                              f"{quorum['high_watermark']}" if quorum["leader"] is not None else "no leader known")]
    rows = [("CONTROLLER", "HOST", "PORT", "PID", "PROCESS", "STATE", "EPOCH", "LEADER", "VOTED-FOR", "LOG-END",
             "HW")]
    for c in status["controllers"]:
        raft = dict(c["raft"] or {})
        if raft.get("voter") is False:  # formatted again under --directory-ids: no longer the voter it was named
            raft["state"] = f"observer ({raft['state']})"
        rows.append((str(c["id"]), c["host"], str(c["port"]), str(c["pid"] or "-"), c["process"],
                     *(("-" if raft.get(k) is None else str(raft[k]))
                       for k in ("state", "epoch", "leader", "voted_for", "log_end_offset", "high_watermark"))))
    lines += [""] + _table(rows)
    if status["brokers"]:
        # LIFECYCLE and METADATA-OFFSET are the broker's own; FENCED and CONTROLLER-SEES what the active
        # controller believes (the metadata offset of the broker's last heartbeat)
        rows = [("BROKER", "HOST", "PORT", "PID", "PROCESS", "REGISTERED", "FENCED", "EPOCH", "LIFECYCLE",
                 "METADATA-OFFSET", "CONTROLLER-SEES")]
        for b in status["brokers"]:
            rows.append((str(b["id"]), b["host"], str(b["port"]), str(b["pid"] or "-"), b["process"],
                         {True: "yes", False: "no", None: "unknown"}[b["registered"]],
                         {True: "fenced", False: "unfenced", None: "-"}[b["fenced"]],
                         *("-" if b[k] is None else str(b[k]) for k in ("broker_epoch", "lifecycle", "metadata_offset",
                                                                         "controller_metadata_offset"))))
        lines += [""] + _table(rows)
    else:
        lines += ["", "Brokers: none (--brokers 0: this lab is its quorum)"]
    faults = [f"controller {c['id']}: " + "; ".join(map(fault_points.describe, c["faults"]))
              for c in status["controllers"] if c.get("faults")]
    faults += [f"controller {c['id']} (at its next start): "
               + "; ".join(map(fault_points.describe, c["faults_at_start"]))
               for c in status["controllers"] if c.get("faults_at_start")]
    faults += [f"broker {b['id']}: " + "; ".join(map(fault_points.describe, b["faults"]))
               for b in status["brokers"] if b.get("faults")]
    faults += [f"broker {b['id']} (at its next start): " + "; ".join(map(fault_points.describe, b["faults_at_start"]))
               for b in status["brokers"] if b.get("faults_at_start")]
    lines += ["", *(f"Fault point: {f}" for f in faults)] if faults else ["", "Fault points: none"]
    if status["network"]:
        lines += ["", f"Network: {status['network']['subnet']} (clients: {status['network']['clients']})"]
        lines += [f"Partition: {p}" for p in status["network"]["partitions"]] or ["Partitions: none"]
    return "\n".join(lines + _topics_table(status["topics"]))


def format_status(status: dict) -> str:
    if status.get("mode") == "kraft":
        return format_kraft_status(status)
    controller = status["controller"]
    lines = [f"ZooKeeper:  {status['zookeeper']}"]
    if status["zookeeper_reachable"]:
        lines.append("Controller: " + (f"broker {controller} (epoch {status['controller_epoch']})"
                                       if controller is not None else "none elected"))
    else:
        lines.append("Controller: unknown (no ZooKeeper quorum answers)")
    if status["zookeepers"]:
        rows = [("ZOOKEEPER", "HOST", "PORT", "PID", "PROCESS", "ROLE")]
        for z in status["zookeepers"]:
            rows.append((str(z["id"]), z["host"], str(z["port"]), str(z["pid"] or "-"), z["process"], z["role"]))
        lines += [""] + _table(rows)
    rows = [("BROKER", "HOST", "PORT", "PID", "PROCESS", "REGISTERED", "ROLE")]
    for b in status["brokers"]:
        registered = {True: "yes", False: "no", None: "unknown"}[b["registered"]]
        rows.append((str(b["id"]), b["host"], str(b["port"]), str(b["pid"] or "-"), b["process"],
                     registered, "controller" if b["id"] == controller else ""))
    lines += [""] + _table(rows)
    faults = [f"broker {b['id']}: " + "; ".join(map(fault_points.describe, b["faults"]))
              for b in status["brokers"] if b.get("faults")]
    faults += [f"broker {b['id']} (at its next start): " + "; ".join(map(fault_points.describe, b["faults_at_start"]))
               for b in status["brokers"] if b.get("faults_at_start")]
    lines += ["", *(f"Fault point: {f}" for f in faults)] if faults else ["", "Fault points: none"]
    if status["network"]:
        lines += ["", f"Network: {status['network']['subnet']} (clients: {status['network']['clients']})"]
        lines += [f"Partition: {p}" for p in status["network"]["partitions"]] or ["Partitions: none"]
    return "\n".join(lines + _topics_table(status["topics"]))


def _topics_table(topics: list[dict]) -> list[str]:
    if not topics:
        return []
    rows = [("TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR")]
    for t in topics:
        for p in t["partitions"]:
            leader = p["leader"]
            rows.append((t["topic"], str(p["partition"]), "none" if leader in (None, -1) else str(leader),
                         "-" if p["leader_epoch"] is None else str(p["leader_epoch"]),
                         ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"]))))
    return [""] + _table(rows)


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def _signal_command(args: argparse.Namespace) -> int:
    """kill, pause, resume and stop, of a broker or a ZooKeeper server."""
    on_broker, on_zookeeper, done, how = _SIGNAL_COMMANDS[args.lab_command]
    lab = LabCluster(args.dir)
    if args.zookeeper is not None:
        z = on_zookeeper(lab, args.zookeeper)
        print(f"{done} ZooKeeper server {z.id} (pid {z.pid}){how}.")
    elif args.controller is not None:
        c = on_broker(lab, _resolve_controller(lab, args.controller))
        print(f"{done} controller {c.id} (pid {c.pid}){how}.")
    else:
        which = _resolve_broker(lab, args.broker)
        b = on_broker(lab, which)
        print(f"{done} {'controller' if isinstance(which, str) else 'broker'} {b.id} (pid {b.pid}){how}.")
    return 0


def _broker_id(text: str) -> int | str:
    if text == "controller":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a broker id or controller, not {text!r}") from None


def _controller_id(text: str) -> int | str:
    if text == "active":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a controller's node id or active, not {text!r}") from None


def _resolve_controller(lab: LabCluster, controller: int | str) -> str:
    """`--controller ID` as the member "controller:ID"; `active`: the quorum's leader now."""
    if controller == "active":
        controller = lab.status()["controller"]
        if controller is None:
            raise LabError("The quorum has no leader now")
    return f"controller:{controller}"


def _resolve_broker(lab: LabCluster, broker: int | str) -> int:
    """`--broker controller`: the broker /controller names now (a lesson or a tour need not know its id)."""
    if broker != "controller":
        return broker
    if lab.load().kraft:  # in KRaft mode the controller is the quorum's leader, a controller process
        return _resolve_controller(lab, "active")
    controller = lab.status()["controller"]
    if controller is None:
        raise LabError("There is no controller now (/controller is empty)")
    return controller


_SIGNAL_COMMANDS = {
    "kill": (LabCluster.kill, LabCluster.kill_zookeeper, "Killed", " with SIGKILL"),
    "pause": (LabCluster.pause, LabCluster.pause_zookeeper, "Paused", " with SIGSTOP"),
    "resume": (LabCluster.resume, LabCluster.resume_zookeeper, "Resumed", " with SIGCONT"),
    "stop": (LabCluster.stop, LabCluster.stop_zookeeper, "Stopped", ""),
}


def _start(args: argparse.Namespace) -> int:
    lab = LabCluster(args.dir)
    if args.zookeeper is not None:
        z, serving = lab.start_zookeeper(args.zookeeper)
        print(f"Started ZooKeeper server {z.id} on {z.host}:{z.port} (pid {z.pid}); "
              + ("it serves." if serving else "it waits for a majority of the ensemble to run."))
    elif args.controller is not None:
        c = lab.start(_resolve_controller(lab, args.controller))
        print(f"Started controller {c.id} on {c.host}:{c.port} (pid {c.pid}); it rejoins the quorum.")
    else:
        which = _resolve_broker(lab, args.broker)
        b = lab.start(which)
        print(f"Started {'controller' if isinstance(which, str) else 'broker'} {b.id} on {b.host}:{b.port} "
              f"(pid {b.pid}); " + ("it rejoins the quorum." if isinstance(which, str) else
                                    "the active controller has unfenced it." if lab.load().kraft else
                                    "it is registered."))
    return 0


def _partition(args: argparse.Namespace) -> int:
    peers = [peer.strip() for peer in args.peers.split(",") if peer.strip()]
    partition = LabCluster(args.dir).partition(args.node, peers, args.one_way)
    print(f"Partitioned: {partition.describe()}.")
    return 0


def _heal(args: argparse.Namespace) -> int:
    healed = LabCluster(args.dir).heal(args.node)
    for partition in healed:
        print(f"Healed: {partition.describe()}.")
    if not healed:
        print("Nothing to heal.")
    return 0


def _ui(args: argparse.Namespace) -> int:
    import asyncio
    import ipaddress
    import sys

    try:
        from zkbroker.lab.dashboard.server import serve
    except ImportError as e:
        raise LabError(f"The dashboard needs aiohttp ({e}): pip install 'zkbroker[dashboard]'") from None

    from pathlib import Path

    Path(args.dir).mkdir(parents=True, exist_ok=True)  # a lab may start there later, or a scenario's below it
    try:
        loopback = ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = args.host == "localhost"
    if not loopback:
        print(f"Warning: the dashboard listens on {args.host}, beyond this machine; anyone who can reach it can "
              "see the lab, and anyone who can load its page can use its fault buttons", file=sys.stderr)
    try:
        asyncio.run(serve(args.dir, args.host, args.port, announce=lambda line: print(line, flush=True)))
    except KeyboardInterrupt:
        pass
    except OSError as e:
        raise LabError(f"The dashboard cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
    return 0


def _state(args: argparse.Namespace) -> int:
    lab = LabCluster(args.dir)
    which = _resolve_controller(lab, args.controller) if args.controller is not None else args.broker
    state = lab.broker_state(which)
    print(json.dumps(state, indent=2) if args.json else format_state(state))
    return 0


def format_controller_state(state: dict) -> str:
    """`lab state --controller`: a KRaft controller's Raft state and metadata log offsets."""
    raft = state.get("raft")
    if raft is None:
        return f"Controller {state['node']} (pid {state['pid']}): its Raft node has not started"
    snapshot = raft.get("snapshot")
    lines = [f"Controller {state['node']} (pid {state['pid']}): {raft['state']} in epoch {raft['epoch']}, leader "
             f"{'none known' if raft['leader'] is None else raft['leader']}, voted for "
             f"{'nobody' if raft['voted_for'] is None else raft['voted_for']}",
             f"Metadata log: start {raft['log_start_offset']}, end {raft['log_end_offset']}, high watermark "
             f"{'unknown' if raft['high_watermark'] is None else raft['high_watermark']}, latest snapshot "
             + ("none" if snapshot is None else f"{snapshot['end_offset']} (epoch {snapshot['epoch']})"),
             f"Voters: {','.join(map(str, raft['voters']))}"]
    lines += ["", "Fault points: " + ("; ".join(map(fault_points.describe, state["faults"])) or "none")]
    return "\n".join(lines)


def format_state(state: dict) -> str:
    """`lab state`: a broker's own view in words and tables."""
    if state.get("role") == "controller":
        return format_controller_state(state)
    controller = state["controller"]
    if state.get("role") == "broker":  # a KRaft broker: its lifecycle with the active controller, no session
        lifecycle, raft = state["lifecycle"] or {}, state["raft"] or {}
        lines = [f"Broker {state['broker']} (pid {state['pid']}, KRaft): {lifecycle.get('state', 'starting')}, "
                 + ("fenced" if lifecycle.get("fenced", True) else "unfenced")
                 + f" at broker epoch {lifecycle.get('broker_epoch', -1)}; metadata offset applied "
                 f"{state['metadata_offset']}, quorum leader {raft.get('leader')} (epoch {raft.get('epoch')})"]
    else:
        lines = [f"Broker {state['broker']} (pid {state['pid']}): ZooKeeper session {state['session'] or 'none'}"
                 f" ({'connected' if state['zookeeper_connected'] else 'disconnected'}); controller epoch seen "
                 f"{state['controller_epoch_seen']}; " + (f"the controller (epoch {controller['epoch']})"
                                                          if controller else "not the controller")]
    metadata = state["metadata"]
    lines.append(f"Metadata cache: controller {metadata['controller']}, live brokers "
                 f"{','.join(map(str, metadata['live_brokers'])) or 'none'}")
    rows = [("TOPIC", "PARTITION", "ROLE", "LEADER", "EPOCH", "ISR", "ZKVERSION", "HW", "LEO", "METADATA-LEADER")]
    for p in state["partitions"]:
        rows.append((p["topic"], str(p["partition"]), p["role"], str(p["leader"]), str(p["leader_epoch"]),
                     ",".join(map(str, p["isr"])), str(p["zk_version"]), str(p["hw"]), str(p["leo"]),
                     "-" if p["metadata_leader"] is None else str(p["metadata_leader"])))
    lines += [""] + (_table(rows) if len(rows) > 1 else ["No partitions on this broker."])
    if controller:
        lines += ["", f"Controller: epoch {controller['epoch']} (zkVersion {controller['epoch_zk_version']}), live "
                      f"brokers {','.join(map(str, controller['live_brokers'])) or 'none'}, event queue "
                      f"{'HELD' if controller['queue_held'] else 'running'} ({controller['queued_events']} queued)"]
        rows = [("TOPIC", "PARTITION", "LEADER", "EPOCH", "ISR", "ZKVERSION")]
        for p in controller["partitions"]:
            rows.append((p["topic"], str(p["partition"]), str(p["leader"]), str(p["leader_epoch"]),
                         ",".join(map(str, p["isr"])), str(p["zk_version"])))
        if len(rows) > 1:
            lines += _table(rows)
    lines += ["", "Fault points: " + ("; ".join(map(fault_points.describe, state["faults"])) or "none")]
    return "\n".join(lines)


def _fault(args: argparse.Namespace) -> int:
    lab = LabCluster(args.dir)
    which = _resolve_controller(lab, args.controller) if args.controller is not None else args.broker
    name = which.replace(":", " ") if isinstance(which, str) else f"broker {which}"
    down = False
    if args.heal:
        in_force = lab.heal_faults(which, args.point)
        said = f"Healed {args.point or 'every fault point'} on {name}."
    else:
        if args.point is None:
            raise LabError(f"Name a fault point ({', '.join(fault_points.POINTS)}), or --heal")
        entry = lab.load().member(which)
        down = entry.pid is None or process_state(entry.pid) == "dead"
        in_force = lab.fault(which, args.point, count=args.count, ms=args.ms, write=args.write,
                             action=args.action, phase=args.phase)
        said = (f"Fault point {args.point} armed for {name}'s next start (it is not running)."
                if down else f"Fault point {args.point} in force on {name}.")
    if args.json:
        print(json.dumps(in_force))
        return 0
    print(said)
    print(("Armed: " if down else "In force: ")
          + ("; ".join(map(fault_points.describe, in_force)) or "nothing"))
    return 0


def _timeline(args: argparse.Namespace) -> int:
    path = timeline.path_in(args.dir)
    if not path.exists() and not args.follow:
        raise LabError(f"No timeline in {args.dir} (no {timeline.FILE_NAME}); a lab writes one from `lab up` on")
    events = timeline.follow(path) if args.follow else timeline.read(path)
    try:
        for event in events:
            print(json.dumps(event) if args.json else format_line(event), flush=args.follow)
    except KeyboardInterrupt:
        pass
    return 0


def _down(args: argparse.Namespace) -> int:
    LabCluster(args.dir).down()
    print("Lab cluster stopped.")
    return 0

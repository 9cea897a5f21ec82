"""`zkbroker lab ...`: the lab commands of DESIGN §7 and their terminal output."""

from __future__ import annotations

import argparse
import json

from zkbroker.lab.cluster import JAAS_FILE, LabCluster
from zkbroker.zk.security import JAAS_CONFIG_ENV


def add_lab_commands(commands: argparse._SubParsersAction) -> None:
    lab = commands.add_parser("lab", help="run a local cluster for failover scenarios and teaching")
    actions = lab.add_subparsers(dest="lab_command", metavar="ACTION", required=True)

    def action(name: str, help_text: str, run, broker: bool = False) -> argparse.ArgumentParser:
        p = actions.add_parser(name, help=help_text)
        p.add_argument("--dir", required=True, help="the lab's directory (holds cluster.json and logs)")
        if broker:
            p.add_argument("--broker", type=int, required=True, metavar="ID")
        p.set_defaults(run=run)
        return p

    up = action("up", "start ZooKeeper and brokers; return when the cluster is usable", _up)
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument("--zookeeper", default="auto", metavar="auto|HOST:PORT",
                    help="auto starts a real ZooKeeper; otherwise use this one (a fresh chroot is added)")
    up.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                    help="a server.properties setting for every broker (repeatable)")
    up.add_argument("--base-port", type=int, default=None, metavar="P",
                    help="brokers listen on P, P+1, ... (default 9092..., or free ports if those are taken)")
    up.add_argument("--secure", action="store_true",
                    help="ZooKeeper with a SASL login for the brokers, and znodes with Kafka's secure ACLs "
                         "(zookeeper.set.acl=true); tools log in with DIR/jaas.conf")
    status = action("status", "show the controller and epoch, brokers and partitions", _status)
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    action("kill", "SIGKILL one broker", _kill, broker=True)
    action("pause", "SIGSTOP one broker (past the session timeout it looks dead, like a long GC pause)",
           _pause, broker=True)
    action("resume", "SIGCONT a paused broker", _resume, broker=True)
    action("start", "start a stopped or killed broker again", _start, broker=True)
    action("stop", "stop one broker cleanly (SIGTERM)", _stop, broker=True)
    action("down", "stop every broker and the lab's ZooKeeper", _down)


def _up(args: argparse.Namespace) -> int:
    lab = LabCluster(args.dir)
    cluster = lab.up(brokers=args.brokers, zookeeper=args.zookeeper, config=args.config, base_port=args.base_port,
                     secure=args.secure)
    status = lab.status()
    print(f"ZooKeeper: {cluster.zookeeper}" + (f" (pid {cluster.zookeeper_pid})" if cluster.zookeeper_pid else ""))
    for b in cluster.brokers:
        print(f"Broker {b.id}: {b.host}:{b.port} (pid {b.pid})")
    print(f"Controller: broker {status['controller']} at epoch {status['controller_epoch']}")
    print(f"Cluster description: {lab.cluster_file}")
    if lab.secure:
        print(f"ZooKeeper login for tools: export {JAAS_CONFIG_ENV}={lab.dir / JAAS_FILE}")
    return 0


def _status(args: argparse.Namespace) -> int:
    status = LabCluster(args.dir).status()
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        print(format_status(status))
    return 0


def format_status(status: dict) -> str:
    controller = status["controller"]
    lines = [f"ZooKeeper:  {status['zookeeper']}",
             "Controller: " + (f"broker {controller} (epoch {status['controller_epoch']})"
                               if controller is not None else "none elected")]
    rows = [("BROKER", "HOST", "PORT", "PID", "PROCESS", "REGISTERED", "ROLE")]
    for b in status["brokers"]:
        rows.append((str(b["id"]), b["host"], str(b["port"]), str(b["pid"] or "-"), b["process"],
                     "yes" if b["registered"] else "no", "controller" if b["id"] == controller else ""))
    lines += [""] + _table(rows)
    if status["topics"]:
        rows = [("TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR")]
        for t in status["topics"]:
            for p in t["partitions"]:
                leader = p["leader"]
                rows.append((t["topic"], str(p["partition"]), "none" if leader in (None, -1) else str(leader),
                             "-" if p["leader_epoch"] is None else str(p["leader_epoch"]),
                             ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"]))))
        lines += [""] + _table(rows)
    return "\n".join(lines)


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def _kill(args: argparse.Namespace) -> int:
    b = LabCluster(args.dir).kill(args.broker)
    print(f"Killed broker {b.id} (pid {b.pid}) with SIGKILL.")
    return 0


def _pause(args: argparse.Namespace) -> int:
    b = LabCluster(args.dir).pause(args.broker)
    print(f"Paused broker {b.id} (pid {b.pid}) with SIGSTOP.")
    return 0


def _resume(args: argparse.Namespace) -> int:
    b = LabCluster(args.dir).resume(args.broker)
    print(f"Resumed broker {b.id} (pid {b.pid}) with SIGCONT.")
    return 0


def _start(args: argparse.Namespace) -> int:
    b = LabCluster(args.dir).start(args.broker)
    print(f"Started broker {b.id} on {b.host}:{b.port} (pid {b.pid}); it is registered.")
    return 0


def _stop(args: argparse.Namespace) -> int:
    b = LabCluster(args.dir).stop(args.broker)
    print(f"Stopped broker {b.id} (pid {b.pid}).")
    return 0


def _down(args: argparse.Namespace) -> int:
    LabCluster(args.dir).down()
    print("Lab cluster stopped.")
    return 0

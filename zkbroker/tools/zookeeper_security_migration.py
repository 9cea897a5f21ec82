"""`zkbroker zookeeper-security-migration`: Kafka 0.9's zookeeper-security-migration.sh
(kafka.admin.ZkSecurityMigrator), for clusters turning `zookeeper.set.acl` on or off.

Sets the ACL of every Kafka znode -- the chroot node itself (when the connect string has one) and the trees
under /brokers, /admin, /config, /controller, /controller_epoch and /consumers -- to Kafka's secure ACL
(`--zookeeper.acl secure`: the login's identity may do everything, the world may read; /consumers stays
world-writable) or to the world-writable one (`unsecure`). Changing an ACL needs the ADMIN permission its
creator holds, so the tool logs in with the JAAS file named by $ZKBROKER_JAAS_CONFIG, as Kafka's needs
java.security.auth.login.config. Prints how many znodes it changed.
"""

from __future__ import annotations

import argparse

from kazoo.exceptions import NoNodeError

from zkbroker.tools.common import ToolError, integer
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.security import JAAS_CONFIG_ENV, OPEN_ACL, acl_for, sasl_options

# The trees a Kafka cluster owns under its chroot; a chroot-less cluster shares the root with others.
KAFKA_ROOTS = ("/brokers", "/admin", "/config", paths.CONTROLLER, paths.CONTROLLER_EPOCH, paths.CONSUMERS)


def add_command(commands) -> None:
    p = commands.add_parser("zookeeper-security-migration",
                            help="set Kafka's secure or open ACLs on every Kafka znode "
                                 "(zookeeper-security-migration.sh)",
                            description="Sets the ACLs of the Kafka znodes in ZooKeeper to secure or unsecure, "
                                        f"logged in with the JAAS file named by ${JAAS_CONFIG_ENV}.")
    p.add_argument("--zookeeper.acl", dest="acl", required=True, choices=("secure", "unsecure"),
                   help="make the Kafka znodes secure (creator all, world read; /consumers open) or unsecure")
    p.add_argument("--zookeeper.connect", dest="connect", default="localhost:2181", metavar="URLS",
                   help="the ZooKeeper connection string host:port[,host:port][/chroot] (default localhost:2181)")
    p.add_argument("--zookeeper.session.timeout", dest="session_timeout", default="30000", metavar="MS")
    p.add_argument("--zookeeper.connection.timeout", dest="connection_timeout", default="30000", metavar="MS")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    secure = args.acl == "secure"
    session_ms = integer(args, "session_timeout", "zookeeper.session.timeout")
    connection_ms = integer(args, "connection_timeout", "zookeeper.connection.timeout")
    if sasl_options() is None:
        raise ToolError(f"No JAAS configuration file has been specified: set {JAAS_CONFIG_ENV} to a JAAS file "
                        "whose Client section logs in as the brokers do")
    zk = ZkClient(args.connect, session_ms, connection_ms, name="security-migration", secure_acls=secure)
    zk.start()
    try:
        changed = migrate(zk, secure)
    finally:
        zk.close()
    print(f"Set {args.acl} ACLs on {changed} znodes" + (" (those under /consumers stay world-writable)."
                                                          if secure else "."))
    return 0


def migrate(zk: ZkClient, secure: bool) -> int:
    """Set the ACL of every Kafka znode; returns how many were set. Nodes deleted meanwhile are skipped."""
    kazoo = zk.kazoo
    todo = [path for path in KAFKA_ROOTS if kazoo.exists(path)]
    changed = 0
    if zk.chroot:
        kazoo.set_acls("/", acl_for("/", secure))  # "/" is the chroot node: the same ACL whoever created it
        changed += 1
    while todo:
        path = todo.pop()
        try:
            kazoo.set_acls(path, acl_for(path, secure) if secure else OPEN_ACL)
            todo += [f"{path}/{child}" for child in kazoo.get_children(path)]
        except NoNodeError:
            continue
        changed += 1
    return changed

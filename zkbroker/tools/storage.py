"""`zkbroker storage`: Kafka 3.7's kafka-storage.sh (kafka.tools.StorageTool), for KRaft mode.

    zkbroker storage random-uuid                      prints a new cluster id
    zkbroker storage format -t ID -c server.properties [--ignore-formatted]

`format` writes meta.properties (server/meta_properties.py) in every log directory of the node (log.dirs and
metadata.log.dir), and in the metadata log's directory the `bootstrap.checkpoint` Kafka 3.7 writes there: a
snapshot holding the FeatureLevelRecord of metadata.version 3.7-IV4 (level 19), which the quorum controller
(issue 24, part 2) writes first into a new cluster's log.
"""

from __future__ import annotations

import argparse
import os

from zkbroker.config import KafkaConfig
from zkbroker.protocol.metadata_records import build_snapshot
from zkbroker.server import meta_properties
from zkbroker.tools.common import ToolError

BOOTSTRAP_FILE = "bootstrap.checkpoint"
METADATA_VERSION = "3.7-IV4"
METADATA_VERSION_LEVEL = 19
FEATURE_LEVEL_RECORD = 12


def add_command(commands) -> None:
    p = commands.add_parser("storage", help="format a KRaft node's log directories (kafka-storage.sh)",
                            description="The Kafka storage tool.")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    verbs.add_parser("random-uuid", help="print a random UUID to use as a cluster id").set_defaults(run=run_random_uuid)
    fmt = verbs.add_parser("format", help="format the log directories of a KRaft node")
    fmt.add_argument("-t", "--cluster-id", required=True, metavar="ID", help="the cluster id (storage random-uuid)")
    fmt.add_argument("-c", "--config", required=True, metavar="FILE", help="the node's server.properties")
    fmt.add_argument("-g", "--ignore-formatted", action="store_true",
                     help="skip a directory that is already formatted instead of failing")
    fmt.set_defaults(run=run_format)


def run_random_uuid(args: argparse.Namespace) -> int:
    print(meta_properties.random_uuid())
    return 0


def run_format(args: argparse.Namespace) -> int:
    config = KafkaConfig.load(args.config)
    if not config.is_kraft:
        raise ToolError("The kafka configuration file appears to be for a legacy cluster. Formatting is only "
                        "supported for clusters in KRaft mode (set process.roles).")
    try:
        meta_properties.parse_uuid(args.cluster_id)
    except ValueError as exc:
        raise ToolError(f"Cluster ID {args.cluster_id!r} is not valid: {exc}") from None
    directories = list(dict.fromkeys([*config.log_dirs, config.metadata_log_dir]))
    formatted = []
    for directory in directories:
        if os.path.exists(os.path.join(directory, meta_properties.FILE_NAME)):
            if args.ignore_formatted:
                continue
            raise ToolError(f"Log directory {directory} is already formatted. Use --ignore-formatted to ignore "
                            f"this directory and format the others.")
        formatted.append(directory)
    if not formatted:
        print("All of the log directories are already formatted.")
    for directory in formatted:
        os.makedirs(directory, exist_ok=True)
        if directory == config.metadata_log_dir:
            _write_bootstrap(directory)
        meta_properties.write(directory, meta_properties.MetaProperties(args.cluster_id, config.node_id,
                                                                        meta_properties.random_uuid()))
        print(f"Formatting {directory} with metadata.version {METADATA_VERSION}.")
    return 0


def _write_bootstrap(directory: str) -> None:
    record = (FEATURE_LEVEL_RECORD, 0, {"name": "metadata.version", "feature_level": METADATA_VERSION_LEVEL})
    data = build_snapshot([[record]], epoch=0, timestamp=0, last_contained_log_timestamp=0)
    path = os.path.join(directory, BOOTSTRAP_FILE)
    with open(path + ".tmp", "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)

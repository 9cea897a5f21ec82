"""`zkbroker delete-records`: Kafka 2.x's kafka-delete-records.sh (kafka.admin.DeleteRecordsCommand) through the
Admin API: reads `{"partitions": [{"topic": T, "partition": P, "offset": O}, ...], "version": 1}` (offset -1:
up to the high watermark) and prints, per partition, the low watermark its leader reached or the error, as
Kafka prints them:

    Executing records delete operation
    Records delete operation completed:
    partition: T-0	low_watermark: 5
    partition: T-1	error: org.apache.kafka.common.errors.OffsetOutOfRangeException: The requested offset ...
"""

from __future__ import annotations

import argparse
import json

from zkbroker.client.admin_client import AdminClient
from zkbroker.protocol.errors import ErrorCode
from zkbroker.tools.common import ToolError, add_command_config, command_config, java_exception

SUPPORTED_VERSIONS = (1,)

_FORMAT = '{"partitions":\n  [{"topic": "foo", "partition": 1, "offset": 1}],\n "version":1\n}'


def add_command(commands) -> None:
    p = commands.add_parser("delete-records", help="delete records below an offset (kafka-delete-records.sh)",
                            description="Delete the records of the given partitions below the offsets given")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                   help="REQUIRED: The server to connect to.")
    add_command_config(p)
    p.add_argument("--offset-json-file", required=True, metavar="FILE",
                   help="REQUIRED: The JSON file with offset per partition. The format to use is:\n" + _FORMAT)
    p.set_defaults(run=run)


def parse_offsets(text: str) -> list[tuple[tuple[str, int], int]]:
    """The file's (topic, partition) and offset pairs, in its order; Kafka's messages for a bad file."""
    try:
        data = json.loads(text) if text.strip() else None
    except json.JSONDecodeError as e:
        raise ToolError(f"The offset json file is not JSON: {e}") from None
    if data is None:
        raise ToolError("Delete records data is empty")
    if not isinstance(data, dict):
        raise ToolError("The offset json file must hold a JSON object")
    version = data.get("version", 1)
    if version not in SUPPORTED_VERSIONS:
        raise ToolError(f"Not supported version field value {version}")
    out = []
    for entry in data.get("partitions") or []:
        try:
            topic, partition, offset = entry["topic"], entry["partition"], entry["offset"]
        except (KeyError, TypeError):
            raise ToolError(f"Each partition needs topic, partition and offset: {json.dumps(entry)}") from None
        if not isinstance(topic, str) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                  for v in (partition, offset)):
            raise ToolError(f"A topic is a string, a partition and an offset integers: {json.dumps(entry)}")
        out.append(((topic, partition), offset))
    seen: set[tuple[str, int]] = set()
    duplicates = list(dict.fromkeys(tp for tp, _ in out if tp in seen or seen.add(tp)))
    if duplicates:
        raise ToolError("Offset json file contains duplicate topic partitions: "
                        + ",".join(f"{t}-{p}" for t, p in duplicates))
    return out


def run(args: argparse.Namespace) -> int:
    try:
        with open(args.offset_json_file, encoding="utf-8") as f:
            offsets = parse_offsets(f.read())
    except OSError as e:
        raise ToolError(f"Cannot read {args.offset_json_file}: {e.strerror}") from None
    print("Executing records delete operation")
    try:
        with AdminClient(args.bootstrap_server, client_id="zkbroker-delete-records",
                         security=command_config(args)) as client:
            results = client.delete_records(dict(offsets))
    except (OSError, ConnectionError) as e:
        raise ToolError(f"Cannot reach the cluster at {args.bootstrap_server}: {e}") from None
    print("Records delete operation completed:")
    for (topic, partition), (low, error) in results.items():
        if error == ErrorCode.NONE:
            print(f"partition: {topic}-{partition}\tlow_watermark: {low}")
        else:
            print(f"partition: {topic}-{partition}\terror: {java_exception(error)}")
    return 0

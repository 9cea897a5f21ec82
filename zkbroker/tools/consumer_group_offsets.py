"""`zkbroker consumer-groups --reset-offsets` and `--delete-offsets`: Kafka 2.x's kafka-consumer-groups.sh moving or
forgetting a group's committed offsets, at its coordinator (DESIGN §12), with Kafka's output.

--reset-offsets takes the partitions of `--topic T` (`T:0,2` for some of them; repeatable) or `--all-topics` (those
the group has offsets for), a target (`--to-earliest`, `--to-latest`, `--to-current`, `--to-offset N`,
`--shift-by N`, `--to-datetime YYYY-MM-DDTHH:mm:SS.sss[Z|+hh:mm]`, `--by-duration PnDTnHnMnS`) and `--dry-run` or
`--execute` (neither: a dry run, with Kafka's warning); an offset outside the log is set to its nearest end, with
Kafka's warning on stderr. Only a group without members is reset. It prints

    GROUP                          TOPIC                          PARTITION  NEW-OFFSET

and `--execute` commits the new offsets (OffsetCommit, as a client outside the group). --delete-offsets sends
OffsetDelete (KIP-496) and prints each partition's status.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
import time

from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode
from zkbroker.tools.common import ToolError, default_message

TARGETS = ("to_earliest", "to_latest", "to_current", "to_offset", "shift_by", "to_datetime", "by_duration")
EARLIEST, LATEST = -2, -1
_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+(?:\.\d+)?)S)?)?",
                       re.IGNORECASE)
_FORMAT = "%-30s %-30s %-10s %-15s"
_STATUS = "%-30s %-15s %-15s"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic", action="append", metavar="TOPIC[:P,...]",
                   help="The topic whose offsets to reset or delete, with partitions after a colon (repeatable).")
    p.add_argument("--all-topics", action="store_true", help="With --reset-offsets: every topic the group has "
                   "offsets for.")
    p.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    p.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    p.add_argument("--to-current", action="store_true", help="Reset offsets to current offset.")
    p.add_argument("--to-offset", metavar="OFFSET", help="Reset offsets to a specific offset.")
    p.add_argument("--shift-by", metavar="N", help="Reset offsets shifting current offset by 'n' (may be negative).")
    p.add_argument("--to-datetime", metavar="DATETIME",
                   help="Reset offsets to offset from datetime. Format: 'YYYY-MM-DDTHH:mm:SS.sss'")
    p.add_argument("--by-duration", metavar="DURATION",
                   help="Reset offsets to offset by duration from current timestamp. Format: 'PnDTnHnMnS'")
    p.add_argument("--dry-run", action="store_true", help="Only show results without executing changes.")
    p.add_argument("--execute", action="store_true", help="Execute this operation.")


# ---- pure parsing ------------------------------------------------------------------------------------------------

def parse_datetime(text: str) -> int:
    """Kafka's Utils.getDateTime: 'yyyy-MM-ddTHH:mm:ss[.SSS]' with an optional zone (Z, +hh:mm); local time
    without one. Milliseconds since the epoch."""
    raw = text.strip()
    if raw.endswith(("Z", "z")):
        raw = raw[:-1] + "+00:00"
    try:
        parsed = datetime.datetime.fromisoformat(raw)
    except ValueError:
        raise ToolError(f"Error parsing timestamp '{text}': use the format yyyy-MM-dd'T'HH:mm:ss.SSS, with an "
                        "optional zone (Z or +hh:mm)") from None
    if "T" not in raw:
        raise ToolError(f"Error parsing timestamp '{text}': use the format yyyy-MM-dd'T'HH:mm:ss.SSS")
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()  # the local zone, as Kafka's tool
    return int(parsed.timestamp() * 1000)


def parse_duration_ms(text: str) -> int:
    """Java's Duration.parse for 'PnDTnHnMnS' (each part optional, signed), in milliseconds."""
    m = _DURATION.fullmatch(text.strip())
    if m is None or not any(m.group(i) for i in range(2, 6)):
        raise ToolError(f"Text cannot be parsed to a Duration: {text}")
    sign = -1 if m.group(1) == "-" else 1
    days, hours, minutes = (int(m.group(i) or 0) for i in (2, 3, 4))
    seconds = float(m.group(5) or 0)
    return sign * int(round(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000))


def parse_topic_arguments(values: list[str]) -> list[tuple[str, list[int] | None]]:
    """`T` (every partition) or `T:0,2`."""
    out = []
    for value in values:
        topic, colon, partitions = value.partition(":")
        if not colon:
            out.append((topic, None))
            continue
        try:
            out.append((topic, [int(p) for p in partitions.split(",") if p.strip()]))
        except ValueError:
            raise ToolError(f"Invalid partitions in --topic {value}: expected TOPIC:P,P,...") from None
    return out


def clamp(tp: tuple[str, int], offset: int, earliest: int, latest: int) -> int:
    """Kafka's checkOffsetRange: an offset outside [earliest, latest] is set to the nearer end, with a warning."""
    if offset > latest:
        print(f"New offset ({offset}) is higher than latest offset for topic partition {tp[0]}-{tp[1]}. Value will "
              f"be set to {latest}", file=sys.stderr)
        return latest
    if offset < earliest:
        print(f"New offset ({offset}) is lower than earliest offset for topic partition {tp[0]}-{tp[1]}. Value will "
              f"be set to {earliest}", file=sys.stderr)
        return earliest
    return offset


def format_reset(group: str, offsets: dict[tuple[str, int], int]) -> list[str]:
    """printOffsetsToReset: a blank line, the header, a row per partition."""
    rows = [_FORMAT % (group, t, p, o) for (t, p), o in sorted(offsets.items())]
    return (["", _FORMAT % ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")] if rows else []) + rows


# ---- against the cluster -----------------------------------------------------------------------------------------

def reset_offsets(cluster, args: argparse.Namespace) -> None:
    targets = [t for t in TARGETS if getattr(args, t) not in (None, False)]
    if len(targets) != 1:
        raise ToolError("Option [reset-offsets] takes exactly one of these options: [to-datetime], [by-duration], "
                        "[to-earliest], [to-latest], [shift-by], [to-current], [to-offset]")
    if bool(args.topic) == bool(args.all_topics):
        raise ToolError("Option [reset-offsets] takes one of these options: [all-topics], [topic]")
    if args.dry_run and args.execute:
        raise ToolError("Option [reset-offsets] takes at most one of these options: [dry-run], [execute]")
    if not args.dry_run and not args.execute:
        print("WARN: No action will be performed as the --execute option is missing.In a future major release, the "
              "default behavior of this command will be to prompt the user before executing the reset rather than "
              "doing a dry run. You should add the --dry-run option explicitly if you are scripting this command and "
              "want to keep the current default behavior without prompting.")
    group = args.group
    coordinator = cluster.coordinator(group)
    described = coordinator.send(ApiKey.DESCRIBE_GROUPS, 0, {"group_ids": [group]}).groups[0]
    if described.error_code == ErrorCode.NONE and described.state not in ("Empty", "Dead"):
        raise ToolError(f"Assignments can only be reset if the group '{group}' is inactive, but the current state is "
                        f"{described.state}.")
    committed = cluster.committed(coordinator, group)
    if args.all_topics:
        partitions = sorted(committed)
    else:
        partitions = []
        for topic, wanted in parse_topic_arguments(args.topic):
            known = sorted(p for t, p in cluster.leaders if t == topic)
            if not known:
                raise ToolError(f"The topic {topic} does not exist")
            partitions += [(topic, p) for p in (known if wanted is None else wanted)]
    target = targets[0]
    earliest = cluster.offsets_for(partitions, EARLIEST)
    latest = cluster.offsets_for(partitions, LATEST)
    missing = [tp for tp in partitions if tp not in earliest or tp not in latest]
    if missing:
        raise ToolError("No leader answered for partition(s) " + ",".join(f"{t}-{p}" for t, p in missing))
    new: dict[tuple[str, int], int] = {}
    if target in ("to_datetime", "by_duration"):
        stamp = (parse_datetime(args.to_datetime) if target == "to_datetime"
                 else int(time.time() * 1000) - parse_duration_ms(args.by_duration))
        found = cluster.offsets_for(partitions, stamp)
        new = {tp: found[tp] if found.get(tp, -1) >= 0 else latest[tp] for tp in partitions}
    for tp in partitions:
        if target == "to_earliest":
            new[tp] = earliest[tp]
        elif target == "to_latest":
            new[tp] = latest[tp]
        elif target == "to_current":
            new[tp] = committed.get(tp, latest[tp])
        elif target in ("to_offset", "shift_by"):
            try:
                amount = int(getattr(args, target))
            except ValueError:
                raise ToolError(f'Option "[{target.replace("_", "-")}]" needs an integer, not '
                                f'"{getattr(args, target)}"') from None
            if target == "to_offset":
                new[tp] = clamp(tp, amount, earliest[tp], latest[tp])
            elif tp not in committed:
                raise ToolError(f"Expected a valid current offset for topic partition: {tp[0]}-{tp[1]}")
            else:
                new[tp] = clamp(tp, committed[tp] + amount, earliest[tp], latest[tp])
    if args.execute:
        cluster.commit(coordinator, group, new)
    for line in format_reset(group, new):
        print(line)


def delete_offsets(cluster, args: argparse.Namespace) -> None:
    if not args.topic:
        raise ToolError("Option [delete-offsets] takes the following options: [topic]")
    group = args.group
    rows: dict[tuple[str, int], int] = {}
    asked: dict[str, list[int]] = {}
    for topic, wanted in parse_topic_arguments(args.topic):
        known = sorted(p for t, p in cluster.leaders if t == topic)
        if not known and wanted is None:
            rows[(topic, -1)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        asked.setdefault(topic, []).extend(known if wanted is None else wanted)
    coordinator = cluster.coordinator(group)
    response = coordinator.send(ApiKey.OFFSET_DELETE, 0, {"group_id": group, "topics": [
        {"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in asked.items()]})
    for t in response.topics:
        for p in t.partitions:
            rows[(t.name, p.partition_index)] = p.error_code
    top = response.error_code
    if top == ErrorCode.NONE and any(code != ErrorCode.NONE for code in rows.values()):
        top = next(code for code in rows.values() if code != ErrorCode.NONE)
    if top == ErrorCode.NONE:
        topics = ", ".join(t for t, _ in parse_topic_arguments(args.topic))
        print(f"Request succeed for deleting offsets with topic {topics} group {group}")
    elif top == ErrorCode.INVALID_GROUP_ID:
        print(f"\nError: '{group}' is not valid.")
    elif top == ErrorCode.GROUP_ID_NOT_FOUND:
        print(f"\nError: '{group}' does not exist.")
    elif top == ErrorCode.NON_EMPTY_GROUP:
        print(f"\nError: Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty.")
    elif top in (ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        print("\nError: Encounter some partition level error, see the follow-up details:")
    else:
        print(f"\nError: Encounter some unknown error: {ErrorCode(top).name}")
    print("\n" + _STATUS % ("TOPIC", "PARTITION", "STATUS"))
    for (topic, partition), code in sorted(rows.items(), key=lambda r: r[0][0] + str(r[0][1])):
        status = "Successful" if code == ErrorCode.NONE else f"Error: {default_message(code)}"
        print(_STATUS % (topic, partition if partition >= 0 else "Not Provided", status))

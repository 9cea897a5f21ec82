"""Scenarios as data: the TOML schema of a failover-lab scenario and its loader (DESIGN §10).

A scenario names its source, gives the cluster's shape, a configuration and an expected verdict per mode
(`0.8` and `fixed`), and a list of steps, each with a narration line:

    name = "kafka-1211"
    source = "KAFKA-1211"
    summary = "An acknowledged write lost by high-watermark truncation"

    [cluster]
    brokers = 2
    config = { "zookeeper.session.timeout.ms" = "3000" }

    [modes."0.8"]
    config = { "replication.truncation" = "high-watermark" }
    expect = "lost"

    [modes.fixed]
    config = { "replication.truncation" = "leader-epoch" }
    expect = "ok"

    [[steps]]
    action = "produce"
    topic = "t"
    count = 2
    acks = "all"
    narrate = "m1 and m2 are acknowledged once both replicas have them"

A scenario with one mode says why in `why_one_mode`. Anything the schema does not know fails to load with
the file, the line and the names allowed there: a misspelt field must never be silently ignored.
"""

from __future__ import annotations

import importlib.resources
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from consumer.spark.stream_ingest import parse_trigger  # the trigger's words only: no Spark is loaded
from zkbroker.fault_points import POINTS, FaultPointError
from zkbroker.fault_points import check as check_parameters

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, before it joined the standard library
    import tomli as tomllib

MODES = ("0.8", "fixed", "kraft", "kraft-fixed")
#: The modes run on a KRaft lab (DESIGN §17): Kafka 3.7's quorum, and with a later fix switched on.
KRAFT_MODES = ("kraft", "kraft-fixed")
QUORUM_SIZES = (1, 3, 5)
VERDICTS = ("ok", "lost", "aborted_read", "torn", "divergent", "duplicated", "stuck", "unavailable", "slow")
# A transactional produce step's records are one transaction, ended so ("abandon": left open, as by a dead producer).
TRANSACTION_ENDS = ("commit", "abort", "abandon")
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
ENSEMBLE_SIZES = (1, 3, 5)

_INT = (int,)
_STR = (str,)
_TARGET = (int, str)  # an id, or "controller" / "leader:TOPIC-PARTITION" / "not:A,B" / a broker named with `as`


@dataclass(frozen=True)
class Shape:
    """What one kind of step (or condition) may contain: each field and its types, the fields it needs, and a
    group of fields of which it names exactly one. The checker's table below is the one home of these rules:
    the runner takes a step's fields as keyword arguments and trusts them."""

    fields: dict[str, tuple[type, ...]]
    required: tuple[str, ...] = ()
    one_of: tuple[str, ...] = ()


# What a wait or expect step can test: ZooKeeper's state, a process, a broker's log, the timeline, or a produce
# step's outcome. condition -> (required fields, optional fields, one of); `negate` is allowed everywhere.
_CONDITION_TYPES = {"broker": _TARGET, "topic": _STR, "partition": _INT, "size": _INT, "pattern": _STR, "of": _STR,
                    "consumer": _STR, "group": _STR}
_TP = ("partition",)  # a condition on one partition: partition 0 unless named
_CONDITION_RULES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "registered": (("broker",), (), ()),
    "unregistered": (("broker",), (), ()),
    "controller_elected": ((), ("broker",), ()),
    "controller_changed": (("broker",), (), ()),  # from the broker named: who was controller before
    "controller_epoch": (("size",), (), ()),  # /controller_epoch holds `size`
    "leader": (("topic",), ("broker", *_TP), ()),
    "no_leader": (("topic",), _TP, ()),
    "isr_contains": (("topic", "broker"), _TP, ()),
    "isr_excludes": (("topic", "broker"), _TP, ()),
    "isr_size": (("topic", "size"), _TP, ()),
    "isr_shrinks": (("topic", "size"), _TP, ()),
    "isr_expansions": (("topic", "size"), _TP, ()),
    "topic_exists": (("topic",), (), ()),
    "topic_deleted": (("topic",), (), ()),
    "deletion_pending": (("topic",), (), ()),
    "zookeeper_quorum": ((), (), ()),
    "zookeeper_quorum_lost": ((), (), ()),
    "running": (("broker",), (), ()),
    "log_contains": (("pattern",), (), ("broker", "consumer")),
    "log_end": (("broker", "topic", "size"), _TP, ()),
    "believes_leader": (("broker", "topic"), _TP, ()),
    "hw": (("broker", "topic", "size"), _TP, ()),
    "stable": (("broker", "topic"), _TP, ()),  # its last stable offset is its high watermark: no transaction open
    "leads_all": (("broker", "topic"), (), ()),
    "transactions_at_most": (("topic", "size"), (), ()),
    "acked": (("of",), (), ()),
    "refused": (("of",), (), ()),
    "owns": (("consumer", "group", "topic", "size"), (), ()),
    "owners": (("group", "topic", "size"), (), ()),
    "rebalancing": (("group",), (), ()),
    "read_tasks_running": (("of", "size"), (), ()),
    "read_tasks_done": (("of", "size"), (), ()),
    "stream_offset": (("of", "topic", "size"), _TP, ()),  # its committed batches reach offset `size`
    "stream_caught_up": (("of",), (), ()),  # ... the high watermark of every partition it reads
    "stream_batches": (("of", "size"), (), ()),  # at least `size` batches committed (since it last started)
}
CONDITIONS: dict[str, Shape] = {
    name: Shape({**{f: _CONDITION_TYPES[f] for f in (*required, *optional, *one_of)}, "negate": (bool,)},
                required, one_of)
    for name, (required, optional, one_of) in _CONDITION_RULES.items()}
# Which kind of named step an `of` refers to, by condition.
_OF = {"acked": "produce", "refused": "produce", "read_tasks_running": "spark_read", "read_tasks_done": "spark_read",
       "stream_offset": "spark_stream", "stream_caught_up": "spark_stream", "stream_batches": "spark_stream"}
# The lab control interface's fault points (zkbroker/fault_points.py).
FAULT_POINTS = POINTS

_PROCESS = {"broker": _TARGET, "zookeeper": _TARGET, "controller": _TARGET, "consumer": _STR, "as": _STR}
_ONE_PROCESS = ("broker", "zookeeper", "controller", "consumer")
# start and stop: a consumer starts with its step
_SERVER = {"broker": _TARGET, "zookeeper": _TARGET, "controller": _TARGET, "as": _STR}
# A spark_stream step's stream can be killed (SIGKILL), stopped (SIGTERM: its running batch finishes) and started
# again on its checkpoint; `stream` names it.
_STREAM = {"stream": _STR}
# `mode`: the step runs in that mode only, or (a list) in those modes only
_COMMON = {"action": _STR, "narrate": _STR, "mode": (str, list)}
# Fields a wait or expect step has beside its condition's.
_WAIT = {"condition": _STR, "timeout_ms": _INT, "slow_ms": _INT}
_EXPECT = {"condition": _STR}

# action -> what its step may contain (beside action, narrate and mode). A wait or expect step's other fields are
# its condition's (CONDITIONS).
STEPS: dict[str, Shape] = {
    "create_topic": Shape({"topic": _STR, "partitions": _INT, "replication_factor": _INT, "replicas": (list,),
                           "config": (dict,), "wait": (bool,)}, ("topic",)),
    "delete_topic": Shape({"topic": _STR}, ("topic",)),
    "consumer": Shape({"name": _STR, "group": _STR, "topic": _STR, "config": (dict,), "coordinator": (bool,)},
                      ("name", "group", "topic")),
    "spark_read": Shape({"topic": _STR, "partition": _INT, "start": _INT, "end": _INT, "options": (dict,),
                         "background": (bool,), "timeout_ms": _INT, "master": _STR, "as": _STR}, ("topic", "end")),
    "spark_stream": Shape({"topic": _STR, "trigger": _STR, "options": (dict,), "master": _STR, "as": _STR},
                          ("topic", "as")),
    "choose": Shape({"broker": _TARGET, "controller": _TARGET, "as": _STR}, ("as",), ("broker", "controller")),
    "produce": Shape({"topic": _STR, "partition": _INT, "count": _INT, "acks": (int, str), "timeout_ms": _INT,
                      "interval_ms": _INT, "background": (bool,), "until_end": (bool,), "as": _STR,
                      "transactional_id": _STR, "transaction": _STR, "transaction_timeout_ms": _INT,
                      "via": _TARGET},
                     ("topic", "count")),
    # what a consumer of the partition reads at an isolation level, from its start to its end (the LSO for
    # read_committed): the checker's aborted_read and torn verdicts judge it (DESIGN §18)
    # via (produce and read): the client knows that one broker only (its bootstrap), and so the cluster as that
    # broker's metadata tells it, stale or not
    "read": Shape({"topic": _STR, "partition": _INT, "isolation_level": _STR, "as": _STR, "via": _TARGET},
                  ("topic",)),
    "kill": Shape({**_PROCESS, **_STREAM}, (), (*_ONE_PROCESS, "stream")),
    "pause": Shape(_PROCESS, (), _ONE_PROCESS),
    "resume": Shape(_PROCESS, (), _ONE_PROCESS),
    "start": Shape({**_SERVER, **_STREAM, "wait": (bool,)}, (), (*_ONE_PROCESS[:3], "stream")),
    "stop": Shape({**_SERVER, **_STREAM}, (), (*_ONE_PROCESS[:3], "stream")),
    "partition": Shape({"node": _STR, "from": (str, list), "one_way": (bool,)}, ("node", "from")),
    "heal": Shape({"node": _STR}),
    "fault": Shape({"point": _STR, "broker": _TARGET, "count": _INT, "ms": _INT, "write": _STR, "stop": _STR,
                    "phase": _STR}, ("point", "broker")),
    "heal_faults": Shape({"broker": _TARGET, "point": _STR}, ("broker",)),
    # a controller's log dir lost and formatted again (it must be down): an empty voter (KIP-853's case)
    "lose_disk": Shape({"controller": _TARGET}, ("controller",)),
    "cut_log": Shape({"broker": _TARGET, "topic": _STR, "partition": _INT, "keep": _INT}, ("broker", "topic", "keep")),
    "wait": Shape(_WAIT, ("condition",)),
    "expect": Shape(_EXPECT, ("condition",)),
    "sleep": Shape({"ms": _INT}, ("ms",)),
}

_TOP = {"name": _STR, "source": _STR, "summary": _STR, "why_one_mode": _STR, "faithful": _STR, "no_kraft": _STR,
        "cluster": (dict,),
        "modes": (dict,), "steps": (list,)}
CLUSTER_FIELDS = {"brokers": _INT, "zookeepers": _INT, "controllers": _INT, "network": (bool,), "config": (dict,),
                  "settle_ms": _INT}
# directory_ids (KRaft modes): the lab names its voters with their log dirs' directory ids (KIP-853, Kafka 3.8+)
_MODE = {"config": (dict,), "expect": _STR, "max_unavailable_ms": _INT, "why": _STR, "directory_ids": (bool,)}


# The catalogue shipped in the package (zkbroker/lab/scenarios/NAME.toml), in the order `lab scenario list` shows.
CATALOGUE = ("kafka-1211", "kip-101-divergence", "jepsen-2013", "unclean-election", "kafka-6082-zombie-controller",
             "kafka-2729-stuck-isr", "kafka-1120-fast-bounce", "kafka-7165-lingering-ephemeral",
             "kafka-5642-many-partitions", "zk-consumer-herd", "stuck-topic-deletion", "kafka-1546-isr-flapping",
             "kafka-2143-truncate-to-start", "zookeeper-quorum-loss", "spark-read-during-failover",
             "spark-stream-during-failover", "zombie-producer", "coordinator-failover-mid-commit",
             "producer-dies-mid-transaction", "kafka-12671-hanging-transaction", "controller-failover",
             "raft-check-quorum-resign", "raft-pre-vote-disruption", "raft-lost-disk", "raft-fenced-broker-serves")


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message starts with `FILE:LINE:`."""


@dataclass(frozen=True)
class Step:
    action: str
    fields: dict[str, Any]
    narrate: str = ""
    mode: tuple[str, ...] | None = None  # a step of these modes only (None: of every mode)
    line: int = 0

    def runs_in(self, mode: str) -> bool:
        return self.mode is None or mode in self.mode


@dataclass(frozen=True)
class ModeSpec:
    config: dict[str, str]
    expect: str
    max_unavailable_ms: int | None = None
    why: str = ""  # what happens in this mode, and which switch makes the difference
    directory_ids: bool = False  # a KRaft mode's voters known by their directory ids too (KIP-853)


@dataclass(frozen=True)
class Scenario:
    name: str
    source: str
    summary: str
    brokers: int
    zookeepers: int
    network: bool
    config: dict[str, str]
    modes: dict[str, ModeSpec]
    steps: list[Step] = field(default_factory=list)
    why_one_mode: str | None = None
    file: str = ""
    faithful: str | None = None  # where the run departs from what 0.8.2 did, said plainly
    settle_ms: int = 10000  # how long the end of a run waits for leaders and ISRs to settle before reading
    controllers: int = 3  # the KRaft modes' quorum ([cluster] controllers, DESIGN §17)
    no_kraft: str | None = None  # why the failure has no KRaft form (no kraft mode), said plainly

    @property
    def fault_points(self) -> bool:
        """Whether a step needs the brokers' lab control interface."""
        return any(step.action == "fault" for step in self.steps)


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read the scenario ({e.strerror})") from None
    return parse_scenario(text, str(path))


def catalogue() -> list[Scenario]:
    """Every scenario shipped in the package, in CATALOGUE's order (any other file after them, by name)."""
    folder = importlib.resources.files("zkbroker.lab") / "scenarios"
    files = {entry.name.removesuffix(".toml"): entry for entry in folder.iterdir() if entry.name.endswith(".toml")}
    order = [n for n in CATALOGUE if n in files] + sorted(n for n in files if n not in CATALOGUE)
    return [parse_scenario(files[name].read_text(), f"zkbroker/lab/scenarios/{name}.toml") for name in order]


def find_scenario(name: str) -> Scenario:
    """A catalogue scenario by name; the error lists the names there are."""
    scenarios = catalogue()
    for scenario in scenarios:
        if scenario.name == name:
            return scenario
    raise ScenarioError(f"No scenario {name!r} in the catalogue; there are: "
                        f"{', '.join(s.name for s in scenarios)} (or run your own with --file)")


def parse_scenario(text: str, filename: str = "<scenario>") -> Scenario:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line = re.search(r"at line (\d+)", str(e))
        raise ScenarioError(f"{filename}:{line.group(1) if line else 1}: not valid TOML: {e}") from None
    check = Checker(text, filename)

    check.fields(doc, _TOP, ())
    for key in ("name", "source", "summary"):
        check.require(doc, key, ())
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]*", doc["name"]):
        check.fail((), "name", f"name {doc['name']!r} must be lower-case letters, digits, dots and dashes")

    cluster = doc.get("cluster", {})
    check.fields(cluster, CLUSTER_FIELDS, ("cluster",))
    zookeepers = cluster.get("zookeepers", 1)
    if zookeepers not in ENSEMBLE_SIZES:
        check.fail(("cluster",), "zookeepers", f"zookeepers must be one of {', '.join(map(str, ENSEMBLE_SIZES))}")
    modes_doc = doc.get("modes", {})
    kraft_only = bool(modes_doc) and all(m in KRAFT_MODES for m in modes_doc)
    if cluster.get("brokers", 3) < (0 if kraft_only else 1):
        check.fail(("cluster",), "brokers", "a scenario needs at least one broker (a KRaft-only one may have none)")
    if cluster.get("controllers", 3) not in QUORUM_SIZES:
        check.fail(("cluster",), "controllers", f"controllers must be one of {', '.join(map(str, QUORUM_SIZES))}")

    unknown = [m for m in modes_doc if m not in MODES]
    if unknown:
        check.fail(("modes", unknown[0]), None, f"unknown mode {unknown[0]!r}; allowed: {', '.join(MODES)}")
    if not modes_doc:
        check.fail((), None, "a scenario needs at least one of [modes.\"0.8\"] and [modes.fixed]")
    modes = {}
    for mode, spec in modes_doc.items():
        check.fields(spec, _MODE, ("modes", mode))
        check.require(spec, "expect", ("modes", mode))
        if spec["expect"] not in VERDICTS:
            check.fail(("modes", mode), "expect", f"unknown verdict {spec['expect']!r}; allowed: {', '.join(VERDICTS)}")
        if spec.get("directory_ids") and mode not in KRAFT_MODES:
            check.fail(("modes", mode), "directory_ids", "directory_ids names KRaft voters: a kraft mode's only")
        modes[mode] = ModeSpec(server_settings(spec.get("config", {})), spec["expect"],
                               spec.get("max_unavailable_ms"), spec.get("why", ""), spec.get("directory_ids", False))
    if "no_kraft" in doc and any(m in KRAFT_MODES for m in modes):
        check.fail((), "no_kraft", "no_kraft says why a scenario has no KRaft mode; this one has one")
    if len(modes) == 1 and "why_one_mode" not in doc:
        check.fail((), None, "a scenario with one mode says why in why_one_mode")

    steps = []
    names = Names(modes)
    for index, step in enumerate(doc.get("steps", [])):
        steps.append(check_step(check, ("steps", index), step, modes, names, cluster.get("brokers", 3), zookeepers,
                                cluster.get("controllers", 3)))
    needs_network = [s for s in steps if s.action in ("partition", "heal")]
    if needs_network and not cluster.get("network", False):
        check.fail_at(needs_network[0].line, f"a {needs_network[0].action} step needs network = true in [cluster]")
    return Scenario(doc["name"], doc["source"], doc["summary"], cluster.get("brokers", 3), zookeepers,
                    cluster.get("network", False), server_settings(cluster.get("config", {})), modes, steps,
                    doc.get("why_one_mode"), filename, doc.get("faithful"), cluster.get("settle_ms", 10000),
                    cluster.get("controllers", 3), doc.get("no_kraft"))


class Names:
    """The names steps give (`as` of a broker, a produce or a Spark read; a consumer's `name` and its group), and
    in which modes each is given: a step of mode "0.8" only names nothing for the steps of mode "fixed"."""

    def __init__(self, modes: dict[str, ModeSpec]) -> None:
        self.all_modes = frozenset(modes)
        self.given: dict[tuple[str, str], frozenset[str]] = {}  # (kind, name) -> modes

    def give(self, kind: str, name: str, modes: frozenset[str]) -> bool:
        """False when the name is taken already in one of these modes."""
        taken = self.given.get((kind, name), frozenset())
        self.given[(kind, name)] = taken | modes
        return not taken & modes

    def known(self, kind: str, name: str, modes: frozenset[str]) -> bool:
        return modes <= self.given.get((kind, name), frozenset())


def check_step(check: Checker, where: tuple, step: Any, modes: dict[str, ModeSpec], names: Names, brokers: int,
               zookeepers: int, controllers: int = 3) -> Step:
    """One step checked against STEPS and CONDITIONS, its names against those given before it (`names` learns
    the ones it gives); `where` locates its table for the error's line."""
    if not isinstance(step, dict):
        check.fail(where, None, "each step is a [[steps]] table")
    check.require(step, "action", where)
    action = step["action"]
    if not isinstance(action, str) or action not in STEPS:
        check.fail(where, "action", f"unknown step {action!r}; allowed: {', '.join(STEPS)}")
    shape = STEPS[action]
    if action in ("start", "stop") and "consumer" in step:
        check.fail(where, "consumer", f"a consumer is started with a consumer step; {action} takes a broker or a "
                                      f"ZooKeeper server")
    if action in ("wait", "expect"):
        check.require(step, "condition", where)
        condition = step["condition"]
        if not isinstance(condition, str) or condition not in CONDITIONS:
            check.fail(where, "condition", f"unknown condition {condition!r}; allowed: {', '.join(CONDITIONS)}")
        check.fields(step, {**_COMMON, **shape.fields}, where, more=CONDITIONS[condition].fields,
                     more_what=f"field of a {condition} condition")
        _shape(check, where, step, CONDITIONS[condition], f"the {condition} condition")
    else:
        check.fields(step, {**_COMMON, **shape.fields}, where, what=f"field of a {action} step")
    _shape(check, where, step, shape, f"a {action} step")
    only = step_only_in(step.get("mode"))
    if only is not None and (not only or any(m not in modes for m in only)):
        check.fail(where, "mode", f"mode {step['mode']!r} is not one of this scenario's: {', '.join(modes)}")
    step_modes = frozenset(only) if only is not None else names.all_modes
    if action in ("fault", "heal_faults") and "point" in step and step["point"] not in FAULT_POINTS:
        check.fail(where, "point", f"unknown fault point {step['point']!r}; allowed: {', '.join(FAULT_POINTS)}")
    if action == "spark_stream" and "trigger" in step:
        try:
            parse_trigger(step["trigger"])
        except ValueError:
            check.fail(where, "trigger", f"trigger must be available-now or processing-time=<N>s|<N>ms, not "
                                         f"{step['trigger']!r}")
    if action == "produce" and ("transactional_id" in step) != ("transaction" in step):
        check.fail(where, "transaction" if "transaction" in step else "transactional_id" if "transactional_id" in step
                   else None, "a transactional produce names both transactional_id and transaction")
    if action == "produce" and "transaction" in step and step["transaction"] not in TRANSACTION_ENDS:
        check.fail(where, "transaction", f"transaction must be one of {', '.join(TRANSACTION_ENDS)}, not "
                                         f"{step['transaction']!r}")
    if action == "produce" and "transaction" in step and "via" in step:
        check.fail(where, "via", "via goes with plain produce: a transaction's producer finds its coordinator itself")
    if action == "produce" and "transaction" in step and step.get("until_end"):
        check.fail(where, "until_end", "a transaction's records are a fixed count: until_end goes with plain produce")
    if action == "read" and step.get("isolation_level", "read_committed") not in ISOLATION_LEVELS:
        check.fail(where, "isolation_level", f"isolation_level must be one of {', '.join(ISOLATION_LEVELS)}, not "
                                             f"{step['isolation_level']!r}")
    if action == "fault":
        try:
            check_parameters(step["point"], fault_parameters(step))
        except FaultPointError as e:
            check.fail(where, "point", str(e))
    _references(check, where, step, names, step_modes, brokers, zookeepers, controllers)
    _give_names(check, where, step, names, step_modes)
    return Step(action, {k: v for k, v in step.items() if k not in _COMMON}, step.get("narrate", ""),
                only, check.line(where, "action"))


def step_only_in(mode: str | list | None) -> tuple[str, ...] | None:
    """A step's `mode` field as the modes it runs in (None: every mode)."""
    if mode is None:
        return None
    return (mode,) if isinstance(mode, str) else tuple(m if isinstance(m, str) else repr(m) for m in mode)


def _shape(check: Checker, where: tuple, step: dict, shape: Shape, what: str) -> None:
    for key in shape.required:
        if key not in step:
            check.fail(where, None, f"{what} needs {key!r}")
    if shape.one_of and sum(key in step for key in shape.one_of) != 1:
        named = [key for key in shape.one_of if key in step]
        check.fail(where, named[1] if len(named) > 1 else None,
                   f"{what} names one of {', '.join(shape.one_of)}" + (f" (not {' and '.join(named)})" if named
                                                                      else ""))


def _references(check: Checker, where: tuple, step: dict, names: Names, modes: frozenset[str], brokers: int,
                zookeepers: int, controllers: int = 3) -> None:
    """Every name a step uses is a broker or ZooKeeper server of the cluster, or was given by an earlier step that
    runs in each mode this one runs in."""
    def broker(key: str, target: Any) -> None:
        if isinstance(target, bool) or not isinstance(target, (int, str)):
            check.fail(where, key, f"{key} must be a broker id or name, not {target!r}")
        if isinstance(target, int) and not 1 <= target <= brokers:
            check.fail(where, key, f"there is no broker {target}: the cluster's brokers are 1 to {brokers}")
        if isinstance(target, str) and not _target_known(target, names, modes, brokers):
            check.fail(where, key, f"{key} {target!r} is not an id, \"controller\", \"leader:TOPIC-PARTITION\", "
                                   f"\"not:NAME[,NAME]\" or a name given earlier with as = ..."
                                   + _only_in(names, "broker", target))

    action = step["action"]
    for key in ("broker", "via"):
        if key in step:
            broker(key, step[key])
    for row in step.get("replicas", []) if action == "create_topic" else []:
        for target in row if isinstance(row, list) else [row]:
            broker("replicas", target)
    if "zookeeper" in step:
        server = step["zookeeper"]
        if server != "leader" and (isinstance(server, bool) or not isinstance(server, int)
                                   or not 1 <= server <= zookeepers):
            check.fail(where, "zookeeper", f"zookeeper {server!r} is not a server of the ensemble (1 to {zookeepers}) "
                                           f"or \"leader\"")
    if "controller" in step and not _controller_known(step["controller"], names, modes, controllers):
        check.fail(where, "controller", f"controller {step['controller']!r} is not a controller of the quorum "
                                        f"(3001 to {3000 + controllers}), \"active\", \"follower\" or a name "
                                        f"given earlier with as = ...")
    if "controller" in step and not modes <= frozenset(KRAFT_MODES):
        check.fail(where, "controller", "a controller step runs in the KRaft modes only (mode = \"kraft\" ...)")
    if "consumer" in step and not names.known("consumer", step["consumer"], modes):
        check.fail(where, "consumer", f"no earlier consumer step is named {step['consumer']!r}"
                   + _only_in(names, "consumer", step["consumer"]))
    if "stream" in step and not names.known("spark_stream", step["stream"], modes):
        check.fail(where, "stream", f"no earlier spark_stream step is named {step['stream']!r}"
                   + _only_in(names, "spark_stream", step["stream"]))
    if "group" in step and action != "consumer" and not names.known("group", step["group"], modes):
        check.fail(where, "group", f"no earlier consumer step joins group {step['group']!r}"
                   + _only_in(names, "group", step["group"]))
    if "of" in step:
        kind = _OF[step["condition"]]
        if not names.known(kind, step["of"], modes):
            check.fail(where, "of", f"no earlier {kind} step is named {step['of']!r} (with as = ...)"
                       + _only_in(names, kind, step["of"]))
    for key in ("node", "from") if action in ("partition", "heal") else ():
        nodes = step.get(key, [])
        for node in nodes if isinstance(nodes, list) else [nodes]:
            if not isinstance(node, str) or not _node_known(node, names, modes, brokers, zookeepers, controllers):
                check.fail(where, key, f"{key} {node!r} is not a node: broker:ID, broker:NAME, zookeeper, "
                                       f"zookeeper:N, controller:ID, controller:NAME or clients")


def _only_in(names: Names, kind: str, name: str) -> str:
    given = names.given.get((kind, name))
    return f" (it is named only in mode {', '.join(sorted(given))})" if given else ""


def _give_names(check: Checker, where: tuple, step: dict, names: Names, modes: frozenset[str]) -> None:
    action = step["action"]
    if action == "consumer":
        if not names.give("consumer", step["name"], modes):
            check.fail(where, "name", f"there is already a consumer called {step['name']!r}")
        names.give("group", step["group"], modes)
    if "as" not in step:
        return
    if action in ("produce", "spark_read", "spark_stream", "read"):
        if not names.give(action, step["as"], modes):
            check.fail(where, "as", f"an earlier {action} step is named {step['as']!r} already")
    elif "broker" in step:  # choose, or a process step: the name is the broker's
        names.give("broker", step["as"], modes)
    elif "controller" in step:
        names.give("controller", step["as"], modes)
    else:
        check.fail(where, "as", f"as names a broker, a produce, a read, a spark_read or a spark_stream; this "
                                f"{action} step has none")


def _target_known(target: str, names: Names, modes: frozenset[str], brokers: int) -> bool:
    """A broker named by a string: "controller", "leader:TOPIC-PARTITION", a name given earlier with `as`, or
    "not:A,B" (the lowest broker id that is none of those)."""
    if target.startswith("not:"):
        return all(_target_known(part, names, modes, brokers) or (part.isdigit() and 1 <= int(part) <= brokers)
                   for part in target[4:].split(","))
    return target == "controller" or re.fullmatch(r"leader:.+-\d+", target) is not None \
        or names.known("broker", target, modes)


def _controller_known(target: Any, names: Names, modes: frozenset[str], controllers: int) -> bool:
    """A controller by node id (3001...), "active" (the quorum's leader then), "follower" (a voter that does not
    lead then), "not:A,B" (the lowest running one that is none of those), or a name given earlier with `as` (by a
    controller step, or a choose of broker "controller")."""
    if isinstance(target, bool):
        return False
    if isinstance(target, int):
        return 3001 <= target <= 3000 + controllers
    if isinstance(target, str) and target.startswith("not:"):  # the lowest running controller that is none of those
        return all(_controller_known(int(part) if part.isdigit() else part, names, modes, controllers)
                   for part in target[4:].split(","))
    return isinstance(target, str) and (target in ("active", "follower") or names.known("controller", target, modes)
                                        or names.known("broker", target, modes))


def _node_known(node: str, names: Names, modes: frozenset[str], brokers: int, zookeepers: int,
                controllers: int = 3) -> bool:
    kind, colon, rest = node.partition(":")
    if kind == "controller" and not colon:
        return True  # every controller
    if kind == "controller" and colon:
        return _controller_known(int(rest) if rest.isdigit() else rest, names, modes, controllers)
    if kind in ("zookeeper", "clients") and not colon:
        return True
    if kind == "zookeeper":
        return rest.isdigit() and 1 <= int(rest) <= zookeepers
    if kind == "broker" and rest.isdigit():
        return 1 <= int(rest) <= brokers
    return kind == "broker" and _target_known(rest, names, modes, brokers)


def fault_parameters(fields: dict) -> dict:
    """A fault step's parameters as the fault point takes them (`stop` is the stop's `action`, a name a step's
    own `action` already has)."""
    names = {"count": "count", "ms": "ms", "write": "write", "stop": "action", "phase": "phase"}
    return {names[k]: v for k, v in fields.items() if k in names}


def server_settings(config: dict) -> dict[str, str]:
    """server.properties values as the lab's --config takes them (TOML's true/3000 become "true"/"3000")."""
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in config.items()}


_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY_PART = re.compile(r"\"[^\"]*\"|'[^']*'|[^.\s]+")  # a dotted key's parts; "0.8" stays whole


class Checker:
    """Schema checks that fail with FILE:LINE: and the allowed names. tomllib keeps no positions, so the line
    is found in the text: the table's header (the i-th for an array of tables), then the key within it."""

    def __init__(self, text: str, filename: str) -> None:
        self.lines = text.splitlines()
        self.filename = filename

    def fields(self, table: dict, allowed: dict[str, tuple[type, ...]], where: tuple, what: str = "field",
               more: dict[str, tuple[type, ...]] | None = None, more_what: str = "") -> None:
        """Each key of `table` is allowed and of its type; `more` is a second set of allowed fields (a condition's,
        in a wait or expect step), named apart in the error."""
        for key, value in table.items():
            if key not in allowed and key not in (more or {}):
                listed = f"allowed: {', '.join(allowed)}" + (f"; and for {more_what.split(' of ')[-1]}: "
                                                              f"{', '.join(more)}" if more is not None else "")
                self.fail(where, key, f"unknown {more_what if more is not None else what} {key!r}; {listed}")
            types = allowed[key] if key in allowed else more[key]
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                names = " or ".join(_TYPE_NAMES[t] for t in types)
                self.fail(where, key, f"{key} must be {names}, not {value!r}")

    def require(self, table: dict, key: str, where: tuple) -> None:
        if key not in table:
            self.fail(where, None, f"missing {key!r}")

    def fail(self, where: tuple, key: str | None, message: str) -> None:
        self.fail_at(self.line(where, key), message)

    def fail_at(self, line: int, message: str) -> None:
        raise ScenarioError(f"{self.filename}:{line}: {message}")

    def line(self, where: tuple, key: str | None) -> int:
        start, end = self._block(where)
        if key is not None:
            pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
            for number in range(start, end):
                if pattern.match(self.lines[number]):
                    return number + 1
        return max(start, 1) if where else 1  # the header's own line (1-based: the block starts after it)

    def _block(self, where: tuple) -> tuple[int, int]:
        """[first line, end) of the table at `where` (0-based), after its header; the top level before any."""
        names = tuple(str(part) for part in where if not isinstance(part, int))
        occurrence = next((part for part in where if isinstance(part, int)), 0)
        start = 0 if not where else None
        seen = 0
        for number, text in enumerate(self.lines):
            match = _HEADER.match(text)
            if not match:
                continue
            if start is not None:
                return start, number
            header = tuple(part.strip("\"'") for part in _KEY_PART.findall(match.group(2)))
            if header == names:
                if seen == occurrence:
                    start = number + 1
                seen += 1
        return (start if start is not None else 0), len(self.lines)


_TYPE_NAMES = {int: "an integer", str: "a string", bool: "true or false", list: "a list", dict: "a table"}

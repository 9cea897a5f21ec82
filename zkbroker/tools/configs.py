"""`zkbroker configs`: Kafka 2.x's kafka-configs.sh (kafka.admin.ConfigCommand) for topics and brokers, with its
flags and its output, in both of its forms:

- `--zookeeper ZK` writes `/config/<type>/<name>` and Kafka 2.x's version 2 notification itself, as Kafka's tool
  did: `Completed Updating config for entity: topic 'T'.`; `--describe` prints `Configs for topic 'T' are k=v,...`.
  Dynamic broker configs go through ZooKeeper only while the brokers concerned are down (Kafka's rule: a running
  broker must validate them), else the tool asks for --bootstrap-server.
- `--bootstrap-server B` goes through the Admin API (IncrementalAlterConfigs for topics, AlterConfigs for
  brokers, DescribeConfigs): `Completed updating config for topic T.`, `Completed updating config for broker 1.`,
  `Completed updating default config for brokers in the cluster.`; `--describe` prints `Dynamic configs for topic
  T are:` (`All configs` with --all; `Default configs for brokers in the cluster are:` for --entity-default) and
  one line per entry: `  name=value sensitive=false synonyms={SOURCE:name=value, ...}`.

Users (DESIGN §19) with `--zookeeper`, as Kafka 2.x: `--add-config 'SCRAM-SHA-256=[iterations=8192,password=p]'`
stores the SCRAM credential derived from the password (never the password), `--delete-config SCRAM-SHA-256`
removes it; `Completed Updating config for entity: user-principal 'alice'.`. Users over --bootstrap-server
(DescribeUserScramCredentials, AlterUserScramCredentials) is not built yet. Clients (`--entity-type clients`, a
client id or `--entity-default`) take the quotas producer_byte_rate, consumer_byte_rate, request_percentage, over
--zookeeper.
"""

from __future__ import annotations

import argparse
import re

from zkbroker import admin
from zkbroker.client.admin_client import BROKER, TOPIC, AdminClient, AdminError
from zkbroker.config import ConfigError, validate_topic_config
from zkbroker.protocol.schemas import describe_configs as dc
from zkbroker.security import scram
from zkbroker.tools.common import ToolError, add_command_config, command_config, zookeeper
from zkbroker.zk import paths

ENTITY_TYPES = ("topics", "clients", "users", "brokers")
USER_QUOTAS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
SOURCES = {dc.SOURCE_UNKNOWN: "UNKNOWN", dc.SOURCE_TOPIC_CONFIG: "DYNAMIC_TOPIC_CONFIG",
           dc.SOURCE_DYNAMIC_BROKER_CONFIG: "DYNAMIC_BROKER_CONFIG",
           dc.SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           dc.SOURCE_STATIC_BROKER_CONFIG: "STATIC_BROKER_CONFIG", dc.SOURCE_DEFAULT_CONFIG: "DEFAULT_CONFIG"}


def add_command(commands) -> None:
    p = commands.add_parser("configs", help="describe or change topic and broker configs (kafka-configs.sh)",
                            description="Add/Remove entity config for a topic, client, user or broker")
    p.add_argument("--zookeeper", metavar="URLS", help="the ZooKeeper connection string host:port[/chroot]")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="the brokers to connect to, through the Admin API")
    add_command_config(p)
    p.add_argument("--alter", action="store_true", help="Alter the configuration for the entity.")
    p.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    p.add_argument("--all", action="store_true", help="with --describe and --bootstrap-server: every config")
    p.add_argument("--entity-type", metavar="TYPE", help="Type of entity (topics/clients/users/brokers)")
    p.add_argument("--entity-name", metavar="NAME", help="Name of entity (topic name/broker id)")
    p.add_argument("--entity-default", action="store_true", help="the default entity (the cluster's brokers)")
    p.add_argument("--add-config", metavar="K=V,...",
                   help="Key Value pairs of configs to add; square brackets group values containing commas")
    p.add_argument("--delete-config", action="append", metavar="K,...", help="config keys to remove 'k1,k2'")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    added, deleted = parse_configs_to_add(args.add_config), _configs_to_delete(args)
    if args.bootstrap_server:
        try:
            with AdminClient(args.bootstrap_server, client_id="zkbroker-configs",
                             security=command_config(args)) as client:
                return (_alter_admin if args.alter else _describe_admin)(client, args, added, deleted)
        except AdminError as e:
            raise ToolError(str(e)) from None
        except ConnectionError as e:
            raise ToolError(f"Cannot reach the cluster at {args.bootstrap_server}: {e}") from None
    with zookeeper(args.zookeeper) as zk:
        return (_alter_zk if args.alter else _describe_zk)(zk, args, added, deleted)


# ---- arguments (ConfigCommandOptions.checkArgs) ----------------------------------------------------------------

def _check_args(args: argparse.Namespace) -> None:
    if args.alter == args.describe:
        raise ToolError("Command must include exactly one action: --describe, --alter")
    if bool(args.zookeeper) == bool(args.bootstrap_server):
        raise ToolError("Only one of --bootstrap-server or --zookeeper must be specified")
    if args.describe and (args.add_config or args.delete_config):
        raise ToolError('Option "[describe]" can\'t be used with option "[add-config]" or "[delete-config]"')
    if not args.entity_type:
        raise ToolError("At least one --entity-type must be specified")
    if args.entity_type not in ENTITY_TYPES:
        raise ToolError(f"Invalid entity-type {args.entity_type}, --entity-type must be one of "
                        f"{', '.join(ENTITY_TYPES)}")
    if args.entity_type in ("users", "clients") and args.bootstrap_server and any(
            k in scram.MECHANISMS for k in [*parse_configs_to_add(args.add_config), *_configs_to_delete(args)]):
        raise ToolError("SCRAM credentials go through --zookeeper here (DescribeUserScramCredentials and "
                        "AlterUserScramCredentials are not built yet)")
    if args.entity_name and args.entity_default:
        raise ToolError("Only one of --entity-name or --entity-default may be specified")
    if args.entity_default and args.entity_type == "topics":
        raise ToolError("--entity-default is only for brokers, clients and users")
    if args.all and not (args.describe and args.bootstrap_server):
        raise ToolError('Option "[all]" can only be used with "[describe]" and "[bootstrap-server]"')
    if args.alter:
        if args.entity_type == "brokers" and not (args.entity_name or args.entity_default):
            raise ToolError("--entity-name or --entity-default must be specified with --alter of users, clients or "
                            "brokers")
        if args.entity_type == "topics" and not args.entity_name:
            raise ToolError("--entity-name must be specified with --alter of topics")
        if args.entity_type in ("users", "clients") and not (args.entity_name or args.entity_default):
            raise ToolError("--entity-name or --entity-default must be specified with --alter of users, clients or "
                            "brokers")
        if not args.add_config and not args.delete_config:
            raise ToolError("At least one of --add-config or --delete-config must be specified with --alter")
    if args.entity_type == "brokers" and args.entity_name and not args.entity_name.isdigit():
        raise ToolError(f"The entity name for brokers must be a valid integer broker id, found: {args.entity_name}")


def parse_configs_to_add(text: str | None) -> dict[str, str]:
    """`k1=v1,k2=[v1,v2],k3=v3`: commas inside square brackets belong to the value; the brackets go."""
    if not text:
        return {}
    out = {}
    for pair in re.split(r",(?=[^\]]*(?:\[|$))", text):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ToolError('Invalid entity config: all configs to be added must be in the format "key=val".')
        out[key.strip()] = re.sub(r"[\[\]]", "", value).strip()
    return out


def _configs_to_delete(args: argparse.Namespace) -> list[str]:
    return [name.strip() for entry in args.delete_config or () for name in entry.split(",") if name.strip()]


def _entity(args: argparse.Namespace) -> str:
    """The entity's name in ZooKeeper: the topic, the broker id, or `<default>`."""
    return paths.DEFAULT_ENTITY if args.entity_default else args.entity_name


def _entity_text(entity_type: str, name: str) -> str:
    """ConfigCommand's Entity.toString: `topic 'T'`, `brokers '1'`, `default brokers`, `user-principal 'alice'`."""
    type_name = {"topics": "topic", "users": "user-principal", "clients": "client-id"}.get(entity_type, entity_type)
    return f"default {type_name}" if name == paths.DEFAULT_ENTITY else f"{type_name} '{name}'"


# ---- --zookeeper ---------------------------------------------------------------------------------------------

def _alter_zk(zk, args: argparse.Namespace, added: dict[str, str], deleted: list[str]) -> int:
    entity_type, name = args.entity_type, _entity(args)
    if entity_type == "topics":
        if not admin.topic_exists(zk, name):
            raise ToolError(f'Topic "{name}" does not exist.')
        try:
            validate_topic_config(added)
        except ConfigError as e:
            raise ToolError(str(e)) from None
    elif entity_type in ("users", "clients"):
        added = _user_configs(added, scram_allowed=entity_type == "users")
    else:
        running = set(admin.live_broker_ids(zk))
        if (running and name == paths.DEFAULT_ENTITY) or (name != paths.DEFAULT_ENTITY and int(name) in running):
            when = "for default cluster if any broker is running" if name == paths.DEFAULT_ENTITY else \
                f"when broker {name} is running"
            raise ToolError(f"--bootstrap-server option must be specified to update broker configs "
                            f"{', '.join(sorted(added))} {when}.")
    configs = admin.fetch_entity_config(zk, entity_type, name)
    missing = [k for k in deleted if k not in configs]
    if missing:
        raise ToolError(f"Invalid config(s): {','.join(missing)}")
    configs.update(added)
    for key in deleted:
        configs.pop(key, None)
    admin.change_entity_config(zk, entity_type, name, configs)
    print(f"Completed Updating config for entity: {_entity_text(entity_type, name)}.")
    return 0


def _user_configs(added: dict[str, str], scram_allowed: bool = True) -> dict[str, str]:
    """A user's configs as stored: each SCRAM mechanism's `[iterations=N,]password=P` becomes its credential
    (ConfigCommand.parseConfigsToBeAdded's SCRAM step); quotas are checked as numbers."""
    out = {}
    for key, value in added.items():
        if key in scram.MECHANISMS and scram_allowed:
            options = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
            if "password" not in options:
                raise ToolError(f"Invalid config(s): {key} needs password=... (and optionally iterations=N)")
            try:
                iterations = int(options.get("iterations", scram.DEFAULT_ITERATIONS))
                out[key] = str(scram.make_credential(key, options["password"], iterations))
            except (ValueError, scram.ScramError) as e:
                raise ToolError(f"Invalid config(s): {key}: {e}") from None
        elif key in USER_QUOTAS:
            try:
                float(value)
            except ValueError:
                raise ToolError(f"Invalid config(s): {key} must be a number, got {value!r}") from None
            out[key] = value
        else:
            known = [*scram.MECHANISMS, *USER_QUOTAS] if scram_allowed else list(USER_QUOTAS)
            raise ToolError(f"Invalid config(s): {key} (known: {', '.join(known)})")
    return out


def _describe_zk(zk, args: argparse.Namespace, added: dict[str, str], deleted: list[str]) -> int:
    entity_type = args.entity_type
    if args.entity_name or args.entity_default:
        names = [_entity(args)]
    else:
        names = sorted(zk.get_children(paths.entity_configs_path(entity_type)))
    for name in names:
        configs = admin.fetch_entity_config(zk, entity_type, name)
        print(f"Configs for {_entity_text(entity_type, name)} are {','.join(f'{k}={v}' for k, v in configs.items())}")
    return 0


# ---- --bootstrap-server --------------------------------------------------------------------------------------

def _quota_entity(args: argparse.Namespace) -> list[dict]:
    return [{"entity_type": "user" if args.entity_type == "users" else "client-id",
             "entity_name": None if args.entity_default else args.entity_name}]


def _alter_admin(client: AdminClient, args: argparse.Namespace, added: dict[str, str], deleted: list[str]) -> int:
    if args.entity_type in ("users", "clients"):  # quotas, through AlterClientQuotas (Kafka 2.6+)
        added = _user_configs(added, scram_allowed=False)
        client.alter_client_quotas(_quota_entity(args), [{"key": k, "value": float(v), "remove": False}
                                                         for k, v in added.items()]
                                   + [{"key": k, "value": 0.0, "remove": True} for k in deleted])
        print(f"Completed updating config for {_entity_text(args.entity_type, _entity(args))}.")
        return 0
    if args.entity_type == "topics":
        topic = args.entity_name
        present = {e.name for e in client.describe_configs(TOPIC, topic, synonyms=False)
                   if e.config_source == dc.SOURCE_TOPIC_CONFIG}
        missing = [k for k in deleted if k not in present]
        if missing:
            raise ToolError(f"Invalid config(s): {','.join(missing)}")
        ops = {**dict.fromkeys(added, 0), **dict.fromkeys(deleted, 1)}  # SET, DELETE
        client.alter_configs(TOPIC, topic, added, incremental_ops=ops)
        print(f"Completed updating config for topic {topic}.")
        return 0
    name = "" if args.entity_default else args.entity_name
    source = dc.SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG if not name else dc.SOURCE_DYNAMIC_BROKER_CONFIG
    old = {e.name: e.value for e in client.describe_configs(BROKER, name, synonyms=False) if e.config_source == source}
    missing = [k for k in deleted if k not in old]
    if missing:
        raise ToolError(f"Invalid config(s): {','.join(missing)}")
    new = {k: v for k, v in {**old, **added}.items() if k not in deleted}
    client.alter_configs(BROKER, name, new)
    print(f"Completed updating config for broker {name}." if name
          else "Completed updating default config for brokers in the cluster.")
    return 0


def _describe_admin(client: AdminClient, args: argparse.Namespace, added: dict[str, str], deleted: list[str]) -> int:
    if args.entity_type in ("users", "clients"):  # quotas, through DescribeClientQuotas (Kafka 2.6+)
        kind = "user" if args.entity_type == "users" else "client-id"
        # match types: 0 the name, 1 the default, 2 every named entity (then the default too)
        matches = [(1, None)] if args.entity_default else [(0, args.entity_name)] if args.entity_name else \
            [(2, None), (1, None)]
        entries = [e for match_type, match in matches for e in client.describe_client_quotas(
            [{"entity_type": kind, "match_type": match_type, "match": match}], strict=True)]
        for entry in entries:
            name = entry.entity[0].entity_name
            values = ",".join(f"{v.key}={v.value}" for v in entry.values)
            print(f"Quota configs for {_entity_text(args.entity_type, name or paths.DEFAULT_ENTITY)} are {values}")
        return 0
    if args.entity_type == "topics":
        names = [args.entity_name] if args.entity_name else sorted(client.metadata().topics)
        entities = [(TOPIC, n, dc.SOURCE_TOPIC_CONFIG, f"configs for topic {n} are:") for n in names]
    elif args.entity_default:
        entities = [(BROKER, "", dc.SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG, None)]
    else:
        names = [args.entity_name] if args.entity_name else [str(b) for b in sorted(client.metadata([]).brokers)]
        entities = [(BROKER, n, dc.SOURCE_DYNAMIC_BROKER_CONFIG, f"configs for broker {n} are:") for n in names]
        if not args.entity_name:
            entities.append((BROKER, "", dc.SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG, None))
    for rtype, name, source, title in entities:
        print(f"{'All' if args.all else 'Dynamic'} {title}" if title else
              "Default configs for brokers in the cluster are:")
        for entry in client.describe_configs(rtype, name, synonyms=True):
            if not args.all and entry.config_source != source:
                continue
            synonyms = ", ".join(f"{SOURCES.get(s.source, s.source)}:{s.name}={s.value}" for s in entry.synonyms)
            sensitive = "true" if entry.is_sensitive else "false"
            print(f"  {entry.name}={entry.value} sensitive={sensitive} synonyms={{{synonyms}}}")
    return 0


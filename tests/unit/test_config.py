"""The config table (KafkaConfig / LogConfig): 0.8.2 defaults, the .properties syntax, and error messages."""

import dataclasses
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkbroker import config
from zkbroker.config import (
    REQUIRED,
    SERVER_CONFIGS,
    TOPIC_CONFIGS,
    ConfigError,
    KafkaConfig,
    parse_properties,
    validate_topic_config,
)

MINIMAL = {"broker.id": "0", "zookeeper.connect": "localhost:2181"}


def make(**props: str) -> KafkaConfig:
    return KafkaConfig.from_props(MINIMAL | {k.replace("_", "."): v for k, v in props.items()})


def make_with(props: dict[str, str]) -> KafkaConfig:
    return KafkaConfig.from_props(MINIMAL | props)


# --- parse_properties --------------------------------------------------------------------------------------

def test_properties_separators_and_comments():
    text = (
        "# a comment\n"
        "! another comment\n"
        "\n"
        "   \t\n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "  d   =   4\n"
        "e\t:\tfive six\n"
        "f\n"
        "g=\n"
        "h==x\n"
        "i = a=b:c\n"
    )
    assert parse_properties(text) == {
        "a": "1", "b": "2", "c": "3", "d": "4", "e": "five six", "f": "", "g": "", "h": "=x", "i": "a=b:c",
    }


def test_properties_value_keeps_trailing_blanks_and_later_keys_win():
    assert parse_properties("port=1\nport = 9092  \n") == {"port": "9092  "}


def test_properties_continuation_lines():
    text = "log.dirs=/a,\\\n    /b,\\\n\t/c\nnext=1\n"
    assert parse_properties(text) == {"log.dirs": "/a,/b,/c", "next": "1"}


def test_properties_even_backslashes_do_not_continue():
    assert parse_properties("a=x\\\\\nb=y\n") == {"a": "x\\", "b": "y"}


def test_properties_comment_ending_in_backslash_does_not_continue():
    assert parse_properties("# comment \\\na=1\n") == {"a": "1"}


def test_properties_continued_line_starting_with_hash_is_not_a_comment():
    assert parse_properties("a=1,\\\n  #2\n") == {"a": "1,#2"}


def test_properties_continuation_at_end_of_file():
    assert parse_properties("a=1\\") == {"a": "1"}


def test_properties_line_endings():
    assert parse_properties("a=1\r\nb=2\rc=3") == {"a": "1", "b": "2", "c": "3"}


def test_properties_escapes():
    text = r"my\ key\:x\=y = tab\there\nnl \u0041\u00e9 \q\#" + "\n"
    assert parse_properties(text) == {"my key:x=y": "tab\there\nnl Aé q#"}


def test_properties_surrogate_pair_escape():
    assert parse_properties("a=\\ud83d\\ude00\n") == {"a": "\U0001f600"}


def test_properties_malformed_unicode_escape():
    with pytest.raises(ConfigError, match="Malformed"):
        parse_properties("a=\\u12x4\n")


def _escape(text: str, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch == "\\" or ch in "=:#!" or (ch == " " and (is_key or i == 0)):
            out.append("\\" + ch)
        elif not (" " <= ch <= "~"):
            utf16 = ch.encode("utf-16-be", "surrogatepass")
            out.extend(f"\\u{utf16[j]:02x}{utf16[j + 1]:02x}" for j in range(0, len(utf16), 2))
        else:
            out.append(ch)
    return "".join(out)


@given(st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=12), max_size=5))
def test_properties_round_trip(props):
    text = "".join(f"{_escape(k, True)}={_escape(v, False)}\n" for k, v in props.items())
    assert parse_properties(text) == props


# --- The table ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "value"), [
    ("port", 9092),
    ("host.name", ""),
    ("advertised.port", 9092),
    ("log.dirs", ("/tmp/kafka-logs",)),
    ("zookeeper.session.timeout.ms", 6000),
    ("zookeeper.connection.timeout.ms", 6000),
    ("zookeeper.sync.time.ms", 2000),
    ("num.partitions", 1),
    ("default.replication.factor", 1),
    ("log.segment.bytes", 1073741824),
    ("log.roll.hours", 168),
    ("log.roll.ms", 168 * 3_600_000),
    ("log.retention.hours", 168),
    ("log.retention.ms", 168 * 3_600_000),
    ("log.retention.bytes", -1),
    ("log.retention.check.interval.ms", 300000),
    ("log.index.interval.bytes", 4096),
    ("log.index.size.max.bytes", 10485760),
    ("log.flush.interval.messages", 2**63 - 1),
    ("log.flush.interval.ms", 2**63 - 1),
    ("log.flush.offset.checkpoint.interval.ms", 60000),
    ("log.cleanup.policy", "delete"),
    ("log.cleaner.enable", False),
    ("message.max.bytes", 1000012),
    ("socket.request.max.bytes", 104857600),
    ("socket.send.buffer.bytes", 102400),
    ("socket.receive.buffer.bytes", 102400),
    ("num.network.threads", 3),
    ("num.io.threads", 8),
    ("queued.max.requests", 500),
    ("delete.topic.enable", False),
    ("unclean.leader.election.enable", True),
    ("min.insync.replicas", 1),
    ("auto.leader.rebalance.enable", True),
    ("leader.imbalance.per.broker.percentage", 10),
    ("leader.imbalance.check.interval.seconds", 300),
    ("controlled.shutdown.enable", True),
    ("controlled.shutdown.max.retries", 3),
    ("controlled.shutdown.retry.backoff.ms", 5000),
    ("controller.socket.timeout.ms", 30000),
    ("controller.message.queue.size", 2**31 - 1),
    ("replica.lag.time.max.ms", 10000),
    ("replica.lag.max.messages", 4000),
    ("replica.socket.timeout.ms", 30000),
    ("replica.fetch.max.bytes", 1048576),
    ("replica.fetch.wait.max.ms", 500),
    ("replica.fetch.min.bytes", 1),
    ("replica.high.watermark.checkpoint.interval.ms", 5000),
    ("num.replica.fetchers", 1),
    ("auto.create.topics.enable", True),
    ("offsets.topic.replication.factor", 3),
    ("offsets.topic.num.partitions", 50),
    ("offsets.retention.minutes", 1440),
    ("offsets.commit.required.acks", -1),
    ("max.connections.per.ip.overrides", {}),
    ("listeners", ()),
    ("replication.truncation", "high-watermark"),
    ("replica.lag.rule", "time-or-messages"),
    ("replica.lag.check.interval.ms", 10000),
    ("replica.out.of.range.reset", "leader-start"),
])
def test_defaults_match_0_8_2(name, value):
    assert make()[name] == value


def test_every_key_has_a_value_and_its_default_passes_its_own_check():
    cfg = make()
    for key in SERVER_CONFIGS.values():
        assert cfg[key.name] is not None, key.name
        if key.default not in (None, REQUIRED) and key.validator:
            assert key.validator(key.default) == key.default, key.name


def test_every_key_has_a_one_line_doc():
    for key in (*SERVER_CONFIGS.values(), *TOPIC_CONFIGS.values()):
        assert key.doc and "\n" not in key.doc, key.name


def test_a_fallback_is_listed_before_the_key_that_uses_it():
    names = list(SERVER_CONFIGS)
    for key in SERVER_CONFIGS.values():
        assert (key.default is None) == (key.fallback is not None), key.name
        if key.fallback:
            assert names.index(key.fallback) < names.index(key.name), key.name


def test_every_topic_key_falls_back_to_a_broker_key():
    for key in TOPIC_CONFIGS.values():
        assert key.fallback in SERVER_CONFIGS, key.name


def test_extensions_say_so():
    for name in ("listeners", "advertised.listeners", "replication.truncation", "log.cleaner.keyless.messages",
                 "replica.lag.rule", "replica.lag.check.interval.ms",
                 "replica.out.of.range.reset"):
        assert SERVER_CONFIGS[name].doc.startswith("Extension"), name


def test_the_cleaner_is_off_and_stops_at_keyless_messages_by_default_as_in_0_8_2():
    cfg = make_with({})
    assert cfg["log.cleaner.enable"] is False
    assert cfg["log.cleaner.keyless.messages"] == "stop-cleaner"
    assert cfg["log.cleaner.delete.retention.ms"] == 86_400_000
    assert cfg["log.cleaner.min.cleanable.ratio"] == 0.5
    assert cfg["log.cleaner.backoff.ms"] == 15_000


# --- KafkaConfig -------------------------------------------------------------------------------------------

def test_given_values_are_typed():
    cfg = make_with({
        "port": "9093", "log.dirs": " /a , /b ,, ", "delete.topic.enable": "TRUE",
        "log.retention.bytes": "10000000000", "log.cleaner.min.cleanable.ratio": "0.25",
        "max.connections.per.ip.overrides": "host1:5, 10.0.0.1 : 7",
        "replication.truncation": "Leader-Epoch",
    })
    assert cfg.port == 9093
    assert cfg.log_dirs == ("/a", "/b")
    assert cfg["delete.topic.enable"] is True
    assert cfg["log.retention.bytes"] == 10_000_000_000
    assert cfg["log.cleaner.min.cleanable.ratio"] == 0.25
    assert cfg["max.connections.per.ip.overrides"] == {"host1": 5, "10.0.0.1": 7}
    assert cfg["replication.truncation"] == "leader-epoch"


def test_the_isr_check_follows_replica_lag_time_max_ms_unless_its_own_interval_is_given():
    assert make_with({"replica.lag.time.max.ms": "30000"})["replica.lag.check.interval.ms"] == 30000
    cfg = make_with({"replica.lag.time.max.ms": "30000", "replica.lag.check.interval.ms": "500",
                     "replica.lag.rule": "Caught-Up-Time"})
    assert (cfg["replica.lag.check.interval.ms"], cfg["replica.lag.rule"]) == (500, "caught-up-time")


def test_convenience_properties():
    cfg = make_with({
        "broker.id": "3", "zookeeper.connect": "zk1:2181,zk2:2181/kafka", "host.name": "10.0.0.3",
        "zookeeper.session.timeout.ms": "9000", "log.dir": "/data",
    })
    assert cfg.broker_id == 3
    assert cfg.zk_connect == "zk1:2181,zk2:2181/kafka"
    assert cfg.zk_session_timeout_ms == 9000
    assert cfg.zk_connection_timeout_ms == 9000  # 0.8.2: defaults to the session timeout
    assert (cfg.host, cfg.port) == ("10.0.0.3", 9092)
    assert (cfg.advertised_host, cfg.advertised_port) == ("10.0.0.3", 9092)
    assert cfg.log_dirs == ("/data",)


def test_advertised_keys_win_over_host_and_port():
    cfg = make_with({"host.name": "0.0.0.0", "port": "9093", "advertised.host.name": "broker1",
                     "advertised.port": "19093", "zookeeper.connection.timeout.ms": "1000"})
    assert (cfg.advertised_host, cfg.advertised_port) == ("broker1", 19093)
    assert cfg.zk_connection_timeout_ms == 1000


def test_advertised_host_falls_back_to_the_canonical_host_name(monkeypatch):
    monkeypatch.setattr(config.socket, "getfqdn", lambda: "box.example.com")
    assert make().advertised_host == "box.example.com"
    assert make_with({"advertised.host.name": " "}).advertised_host == "box.example.com"


def test_originals_are_the_raw_strings_and_read_only():
    cfg = make_with({"port": "9093", "foo.bar": "x"})
    assert cfg.originals == MINIMAL | {"port": "9093", "foo.bar": "x"}
    with pytest.raises(TypeError):
        cfg.originals["port"] = "1"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.warnings = ()  # type: ignore[misc]


def test_unknown_keys_are_warned_about_not_ignored():
    cfg = make_with({"foo.bar": "1", "log.cleanup.interval.mins": "10"})
    assert cfg.warnings == ("Property foo.bar is not valid", "Property log.cleanup.interval.mins is not valid")
    assert make().warnings == ()


def test_unknown_key_lookup_is_a_key_error():
    with pytest.raises(KeyError, match="foo.bar"):
        make()["foo.bar"]


@pytest.mark.parametrize(("name", "value", "message"), [
    ("zookeeper.session.timeout.ms", "abc",
     "Invalid value 'abc' for configuration zookeeper.session.timeout.ms: not an integer"),
    ("port", "9092 ", "Invalid value '9092 ' for configuration port: not an integer"),
    ("num.io.threads", "1_000", "Invalid value '1_000' for configuration num.io.threads: not an integer"),
    ("socket.request.max.bytes", "3000000000",
     "Invalid value '3000000000' for configuration socket.request.max.bytes: out of range for a 32-bit integer"),
    ("offsets.topic.replication.factor", "40000",
     "Invalid value '40000' for configuration offsets.topic.replication.factor: out of range for a 16-bit integer"),
    ("delete.topic.enable", "yes",
     "Invalid value 'yes' for configuration delete.topic.enable: not a boolean (true or false)"),
    ("replication.truncation", "epoch",
     "Invalid value 'epoch' for configuration replication.truncation: must be one of high-watermark, leader-epoch"),
    ("replica.lag.rule", "time",
     "Invalid value 'time' for configuration replica.lag.rule: must be one of time-or-messages, caught-up-time"),
    ("replica.lag.check.interval.ms", "0",
     "Invalid value '0' for configuration replica.lag.check.interval.ms: must be at least 1"),
    ("log.cleanup.policy", "shred",
     "Invalid value 'shred' for configuration log.cleanup.policy: must be one of delete, compact"),
    ("broker.id", "-1", "Invalid value '-1' for configuration broker.id: must be at least 0"),
    ("num.partitions", "0", "Invalid value '0' for configuration num.partitions: must be at least 1"),
    ("port", "70000", "Invalid value '70000' for configuration port: must be between 0 and 65535"),
    ("log.dirs", " , ", "Invalid value ' , ' for configuration log.dirs: must name at least one item"),
    ("log.cleaner.io.buffer.load.factor", "high",
     "Invalid value 'high' for configuration log.cleaner.io.buffer.load.factor: not a number"),
    ("max.connections.per.ip.overrides", "host1",
     "Invalid value 'host1' for configuration max.connections.per.ip.overrides: "
     "not a comma-separated list of name:count pairs"),
    ("max.connections.per.ip.overrides", "host1:-1",
     "Invalid value 'host1:-1' for configuration max.connections.per.ip.overrides: "
     "the count for host1 must be at least 0"),
    ("max.connections.per.ip", "0", "Invalid value '0' for configuration max.connections.per.ip: must be at least 1"),
    ("connections.max.idle.ms", "0",
     "Invalid value '0' for configuration connections.max.idle.ms: must be at least 1"),
    ("queued.max.requests", "x", "Invalid value 'x' for configuration queued.max.requests: not an integer"),
    ("offsets.topic.compression.codec", "zstd",
     "Invalid value 'zstd' for configuration offsets.topic.compression.codec: "
     "must be one of none, gzip, snappy, lz4, 0, 1, 2, 3"),
])
def test_invalid_values_name_the_key(name, value, message):
    with pytest.raises(ConfigError) as e:
        make_with({name: value})
    assert str(e.value) == message


@pytest.mark.parametrize("name", ["broker.id", "zookeeper.connect"])
def test_missing_required_keys(name):
    props = dict(MINIMAL)
    del props[name]
    with pytest.raises(ConfigError) as e:
        KafkaConfig.from_props(props)
    assert str(e.value) == f'Missing required configuration "{name}" which has no default value.'


@pytest.mark.parametrize(("props", "message"), [
    ({"replica.socket.timeout.ms": "400"},
     "Invalid value '500' for configuration replica.fetch.wait.max.ms: "
     "must be at most replica.socket.timeout.ms (400)"),
    ({"replica.lag.time.max.ms": "100"},
     "Invalid value '500' for configuration replica.fetch.wait.max.ms: "
     "must be at most replica.lag.time.max.ms (100)"),
    ({"message.max.bytes": "2000000"},
     "Invalid value '1048576' for configuration replica.fetch.max.bytes: "
     "must be at least message.max.bytes (2000000)"),
    ({"offsets.commit.required.acks": "4"},
     "Invalid value '4' for configuration offsets.commit.required.acks: "
     "must be at most offsets.topic.replication.factor (3)"),
    ({"log.cleaner.threads": "600"},
     "Invalid value '524288000' for configuration log.cleaner.dedupe.buffer.size: "
     "must be more than 1 MiB per cleaner thread (log.cleaner.threads is 600)"),
])
def test_keys_that_bound_each_other(props, message):
    with pytest.raises(ConfigError) as e:
        make_with(props)
    assert str(e.value) == message


def test_log_dirs_falls_back_to_log_dir():
    assert make_with({"log.dir": "/x"}).log_dirs == ("/x",)
    assert make_with({"log.dir": "/x", "log.dirs": "/y,/z"}).log_dirs == ("/y", "/z")


# --- Retention and roll precedence ----------------------------------------------------------------------------

def test_retention_from_hours():
    assert make_with({"log.retention.hours": "1"}).log_retention_ms == 3_600_000


def test_retention_minutes_win_over_hours():
    assert make_with({"log.retention.hours": "1", "log.retention.minutes": "5"}).log_retention_ms == 300_000


def test_retention_ms_wins_over_minutes_and_hours():
    cfg = make_with({"log.retention.hours": "1", "log.retention.minutes": "5", "log.retention.ms": "1234"})
    assert cfg.log_retention_ms == 1234


def test_retention_ms_is_an_int_in_0_8_2_but_hours_may_reach_beyond():
    with pytest.raises(ConfigError, match="log.retention.ms: out of range for a 32-bit integer"):
        make_with({"log.retention.ms": str(2**31)})
    assert make_with({"log.retention.hours": "1000"}).log_retention_ms == 3_600_000_000


def test_roll_ms_wins_over_hours():
    assert make_with({"log.roll.hours": "2"})["log.roll.ms"] == 7_200_000
    assert make_with({"log.roll.hours": "2", "log.roll.ms": "60000"})["log.roll.ms"] == 60000
    assert make_with({"log.roll.jitter.hours": "1"})["log.roll.jitter.ms"] == 3_600_000


# --- listeners (our extension) ---------------------------------------------------------------------------

def test_listeners_set_host_and_port():
    cfg = make_with({"listeners": "PLAINTEXT://127.0.0.1:9093"})
    assert (cfg.host, cfg.port, cfg.advertised_host, cfg.advertised_port) == ("127.0.0.1", 9093, "127.0.0.1", 9093)
    assert cfg["listeners"] == ("PLAINTEXT://127.0.0.1:9093",)
    assert cfg.warnings == ()


def test_advertised_listeners_set_the_advertised_pair():
    cfg = make_with({"listeners": "PLAINTEXT://:9093", "advertised.listeners": "PLAINTEXT://[::1]:19093"})
    assert (cfg.host, cfg.port) == ("", 9093)
    assert (cfg.advertised_host, cfg.advertised_port) == ("::1", 19093)


def test_listeners_win_over_port_with_a_warning():
    cfg = make_with({"listeners": "PLAINTEXT://h:9093", "port": "9092", "host.name": "h"})
    assert cfg.port == 9093
    assert cfg.warnings == ("Property port is ignored because listeners is set",)
    assert cfg.originals["port"] == "9092"


@pytest.mark.parametrize(("name", "value", "reason"), [
    ("listeners", "TLS://h:9093", "listener TLS has no security protocol in listener.security.protocol.map"),
    ("listeners", "h:9093", "'h:9093' is not of the form LISTENER_NAME://host:port"),
    ("listeners", "PLAINTEXT://h:99999", "port 99999 of listener PLAINTEXT is above 65535"),
    ("listeners", "PLAINTEXT://a:1,PLAINTEXT://b:2", "listener name PLAINTEXT appears twice"),
    ("listener.security.protocol.map", "A:TLS", "unknown security protocol 'TLS'"),
])
def test_bad_listeners_name_the_key(name, value, reason):
    with pytest.raises(ConfigError, match=f"^Invalid value '{value}' for configuration {name}: {re.escape(reason)}"):
        make_with({name: value})


def test_several_listeners_with_their_protocols():
    cfg = make_with({"listeners": "PLAINTEXT://:9092,SASL_SSL://:9093,CLIENT://:9094",
                     "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CLIENT:SSL",
                     "advertised.listeners": "SASL_SSL://public:19093", "advertised.host.name": "h",
                     "ssl.keystore.location": "/k.pem", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512"})
    assert cfg.port == 9092 and cfg.inter_broker_listener_name == "PLAINTEXT"
    assert [str(e) for e in cfg.advertised_endpoints] == [
        "PLAINTEXT://h:9092", "SASL_SSL://public:19093", "CLIENT://h:9094"]
    assert [e.security_protocol.value for e in cfg.endpoints] == ["PLAINTEXT", "SASL_SSL", "SSL"]


@pytest.mark.parametrize(("props", "key", "reason"), [
    ({"listeners": "PLAINTEXT://:1,SSL://:2", "inter.broker.listener.name": "SSL",
      "security.inter.broker.protocol": "SSL"}, "security.inter.broker.protocol", "only one of"),
    ({"listeners": "PLAINTEXT://:1,SSL://:2", "security.inter.broker.protocol": "TLS"},
     "security.inter.broker.protocol", "unknown security protocol"),
    ({"listeners": "PLAINTEXT://:1,SASL_SSL://:2", "inter.broker.listener.name": "SASL_SSL",
      "ssl.keystore.location": "/k.pem", "sasl.enabled.mechanisms": "SCRAM-SHA-512"},
     "sasl.mechanism.inter.broker.protocol", "must be one of sasl.enabled.mechanisms"),
    ({"listeners": "PLAINTEXT://:1,SSL://:2", "inter.broker.listener.name": "X"}, "inter.broker.listener.name",
     "X is not one of the listeners"),
    ({"listeners": "PLAINTEXT://:1,SSL://:2"}, "ssl.keystore.location", "needs the broker's certificate"),
    ({"listeners": "PLAINTEXT://:1,SASL_PLAINTEXT://:2"}, "sasl.enabled.mechanisms", "GSSAPI is not built"),
    ({"super.users": "admin"}, "super.users", "Type:name"),
    ({"ssl.client.auth": "maybe"}, "ssl.client.auth", "must be one of"),
])
def test_bad_security_configs_name_the_key(props, key, reason):
    with pytest.raises(ConfigError, match=f"configuration {key}: .*{re.escape(reason)}"):
        make_with(props)


# --- load --------------------------------------------------------------------------------------------------

def test_load_file_then_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\nport=9092\nzookeeper.connect=localhost:2181/lab\n# log.dirs=/nope\n")
    cfg = KafkaConfig.load(str(path), ["port=9095", "log.dirs=/tmp/b1", "broker.id=2"])
    assert (cfg.broker_id, cfg.port, cfg.log_dirs, cfg.zk_connect) == (2, 9095, ("/tmp/b1",), "localhost:2181/lab")
    assert cfg.originals["port"] == "9095"


def test_override_value_may_contain_equals(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\n")
    cfg = KafkaConfig.load(str(path), ["zookeeper.connect=a:2181/x=y"])
    assert cfg.zk_connect == "a:2181/x=y"


def test_load_missing_file_names_the_path(tmp_path):
    path = tmp_path / "nope.properties"
    with pytest.raises(ConfigError, match=f"Cannot read configuration file {path}: No such file or directory"):
        KafkaConfig.load(str(path))


def test_load_rejects_an_override_without_equals(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\nzookeeper.connect=zk:2181\n")
    with pytest.raises(ConfigError, match="Invalid override 'port': expected key=value."):
        KafkaConfig.load(str(path), ["port"])


# --- Topic overrides (LogConfig) -----------------------------------------------------------------------------

def test_topic_config_is_typed():
    assert validate_topic_config({"retention.ms": "86400000", "cleanup.policy": "Compact",
                                  "unclean.leader.election.enable": "false", "min.cleanable.dirty.ratio": "0.1"}) == {
        "retention.ms": 86400000, "cleanup.policy": "compact",
        "unclean.leader.election.enable": False, "min.cleanable.dirty.ratio": 0.1,
    }


def test_topic_config_unknown_key():
    with pytest.raises(ConfigError) as e:
        validate_topic_config({"retention.hours": "1"})
    assert str(e.value) == 'Unknown configuration "retention.hours".'


@pytest.mark.parametrize(("name", "value", "reason"), [
    ("segment.bytes", "big", "not an integer"),
    ("segment.bytes", "10", "must be at least 14"),
    ("min.insync.replicas", "0", "must be at least 1"),
    ("cleanup.policy", "shred", "must be one of delete, compact"),
    ("unclean.leader.election.enable", "maybe", "not a boolean (true or false)"),
])
def test_topic_config_invalid_values_name_the_key(name, value, reason):
    with pytest.raises(ConfigError) as e:
        validate_topic_config({name: value})
    assert str(e.value) == f"Invalid value '{value}' for configuration {name}: {reason}"


def test_topic_config_defaults_come_from_the_broker():
    cfg = make_with({"log.retention.minutes": "10", "log.segment.bytes": "1048576", "min.insync.replicas": "2",
                     "unclean.leader.election.enable": "false"})
    topic = cfg.topic_config({})
    assert set(topic) == set(TOPIC_CONFIGS)
    assert topic["retention.ms"] == 600_000
    assert topic["segment.bytes"] == 1048576
    assert topic["segment.ms"] == 168 * 3_600_000
    assert topic["min.insync.replicas"] == 2
    assert topic["unclean.leader.election.enable"] is False
    assert topic["max.message.bytes"] == 1000012
    assert topic["cleanup.policy"] == "delete"


def test_topic_overrides_win_over_broker_defaults():
    topic = make().topic_config({"retention.ms": "1000", "unclean.leader.election.enable": "false"})
    assert topic["retention.ms"] == 1000
    assert topic["unclean.leader.election.enable"] is False
    assert topic["segment.bytes"] == 1073741824


# --- KRaft mode (DESIGN §17) ----------------------------------------------------------------------------------

_KRAFT = {"process.roles": "controller", "node.id": "3001", "controller.listener.names": "CONTROLLER",
          "controller.quorum.voters": "3001@localhost:9093,3002@[::1]:9094",
          "listeners": "CONTROLLER://localhost:9093"}


def test_a_controller_needs_no_zookeeper_and_listens_on_its_controller_listener():
    config = KafkaConfig.from_props(_KRAFT)
    assert config.is_kraft and config.node_id == config.broker_id == 3001
    assert (config.host, config.port) == ("localhost", 9093)
    assert config.quorum_voters == {3001: ("localhost", 9093), 3002: ("::1", 9094)}
    assert config["controller.quorum.election.timeout.ms"] == 1000
    assert not KafkaConfig.from_props({"zookeeper.connect": "zk:2181", "broker.id": "1"}).is_kraft


def test_the_later_raft_fixes_are_off_as_in_kafka_37_and_switched_on_by_their_keys():
    config = KafkaConfig.from_props(_KRAFT)
    assert config["controller.quorum.pre.vote.enable"] is False and config.quorum_voter_directories is None
    voters = "3001@localhost:9093:AAECAwQFBgcICQoLDA0ODw,3002@[::1]:9094:8PHy8_T19vf4-fr7_P3-_w"
    config = KafkaConfig.from_props({**_KRAFT, "controller.quorum.voters": voters,
                                     "controller.quorum.pre.vote.enable": "true"})
    assert config["controller.quorum.pre.vote.enable"] is True
    assert config.quorum_voters == {3001: ("localhost", 9093), 3002: ("::1", 9094)}
    assert config.quorum_voter_directories == {3001: "AAECAwQFBgcICQoLDA0ODw", 3002: "8PHy8_T19vf4-fr7_P3-_w"}
    half = KafkaConfig.from_props({**_KRAFT, "controller.quorum.voters": voters.split(",")[0] + ",3002@[::1]:9094"})
    with pytest.raises(ConfigError, match="either every voter has a directory id or none has"):
        _ = half.quorum_voter_directories


def test_a_kraft_broker_serves_clients_on_its_plaintext_listener():
    config = KafkaConfig.from_props({**_KRAFT, "process.roles": "broker", "node.id": "1",
                                     "listeners": "PLAINTEXT://127.0.0.1:9092"})
    assert config.is_kraft and config.is_kraft_broker and config.broker_id == 1
    assert (config.host, config.port) == ("127.0.0.1", 9092)
    assert not KafkaConfig.from_props(_KRAFT).is_kraft_broker


def test_a_combined_node_serves_clients_on_plaintext_and_the_quorum_on_its_controller_listener():
    config = KafkaConfig.from_props({**_KRAFT, "process.roles": "broker,controller",
                                     "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://localhost:9093"})
    assert config.is_kraft_broker and config.is_kraft_controller and config.node_id == 3001
    assert (config.host, config.port) == ("127.0.0.1", 9092)
    assert config.controller_endpoint == ("localhost", 9093)


def test_kraft_mode_defaults_unclean_leader_election_to_false_for_its_controller_and_its_brokers_logs():
    broker = {**_KRAFT, "process.roles": "broker", "node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:9092"}
    assert KafkaConfig.from_props(_KRAFT)["unclean.leader.election.enable"] is False
    assert KafkaConfig.from_props(broker).topic_config({})["unclean.leader.election.enable"] is False
    assert KafkaConfig.from_props({**broker, "unclean.leader.election.enable": "true"}).topic_config({})[
        "unclean.leader.election.enable"] is True
    zk_mode = KafkaConfig.from_props({"zookeeper.connect": "zk:2181", "broker.id": "1"})
    assert zk_mode["unclean.leader.election.enable"] is True  # 0.8.2's default stays ZooKeeper mode's


@pytest.mark.parametrize(("change", "message"), [
    ({"node.id": None}, 'required configuration "node.id"'),
    ({"zookeeper.connect": "zk:2181"}, "zookeeper.connect must not be set"),
    ({"controller.quorum.voters": "3001@localhost"}, "controller.quorum.voters"),
    ({"controller.quorum.voters": "3002@localhost:9094"}, "must include this controller's node.id 3001"),
    ({"controller.listener.names": None}, "controller.listener.names must name"),
    ({"listeners": "PLAINTEXT://localhost:9092"}, "listeners must include the controller listener CONTROLLER"),
    ({"process.roles": "broker,controller"}, "listeners must include a PLAINTEXT listener"),
    ({"process.roles": "broker"}, "node.id 3001 is one of controller.quorum.voters"),
    ({"process.roles": "broker", "node.id": "1", "broker.id": "1"}, "listeners must include a PLAINTEXT listener"),
    ({"process.roles": "controller,zookeeper"}, "process.roles"),
    ({"broker.id": "7"}, "broker.id (7) must equal node.id"),
])
def test_a_bad_kraft_configuration_names_the_key(change, message):
    props = {**_KRAFT, **change}
    props = {k: v for k, v in props.items() if v is not None}
    with pytest.raises(ConfigError, match=re.escape(message)):
        KafkaConfig.from_props(props)

"""Bad command lines of the console tools and the offset checker: one sentence on stderr, exit 1, before any
broker or ZooKeeper is contacted (the addresses here point nowhere)."""

from __future__ import annotations

import pytest

from zkbroker.cli import main

NOWHERE = "127.0.0.1:1/none"


@pytest.mark.parametrize("argv, message", [
    (["console-consumer", "--topic", "t"], 'Missing required argument "[zookeeper]".'),
    (["console-consumer", "--zookeeper", NOWHERE], "Exactly one of whitelist/blacklist/topic is required."),
    (["console-consumer", "--zookeeper", NOWHERE, "--topic", "t", "--whitelist", "t.*"],
     "Exactly one of whitelist/blacklist/topic is required."),
    (["console-consumer", "--zookeeper", NOWHERE, "--whitelist", "a(b"], "a(b is an invalid regex."),
    (["console-consumer", "--zookeeper", NOWHERE, "--topic", "t", "--max-messages", "many"],
     'Option "[max-messages]" needs an integer, not "many".'),
    (["console-consumer", "--zookeeper", NOWHERE, "--topic", "t", "--property", "print.key"],
     "Invalid command line properties: print.key (expected key=value)."),
    (["console-consumer", "--zookeeper", NOWHERE, "--topic", "t", "--group", "a b"],
     "Invalid value 'a b' for configuration group.id: only ASCII letters, digits, '.', '_' and '-' are legal."),
    (["console-consumer", "--zookeeper", NOWHERE, "--topic", "t", "--formatter", "x.Y"],
     "Only kafka.tools.DefaultMessageFormatter is supported for --formatter."),
    (["console-producer", "--topic", "t"], 'Missing required argument "[broker-list]".'),
    (["console-producer", "--broker-list", "h:1"], 'Missing required argument "[topic]".'),
    (["console-producer", "--broker-list", "h:1", "--topic", "t", "--request-required-acks", "2"],
     "--request-required-acks must be -1, 0 or 1, not 2."),
    (["console-producer", "--broker-list", "nohost", "--topic", "t"],
     "Invalid url in bootstrap.servers: nohost (expected host:port)."),
    (["console-producer", "--broker-list", "h:1", "--topic", "t", "--compression-codec", "zstd"],
     "Invalid value 'zstd' for configuration compression.type: zstd needs message.format.version 0.11.0"),
    (["consumer-offset-checker", "--zookeeper", NOWHERE], 'Missing required argument "[group]".'),
])
def test_bad_arguments_are_one_sentence(capsys, argv, message):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"zkbroker {argv[0]}: ") and message in err


def test_a_bad_consumer_config_file_value_is_named(tmp_path, capsys):
    config = tmp_path / "consumer.properties"
    config.write_text("rebalance.max.retries=often\n")
    assert main(["console-consumer", "--zookeeper", NOWHERE, "--topic", "t", "--consumer.config", str(config)]) == 1
    assert "Invalid value 'often' for configuration rebalance.max.retries: not an integer." in capsys.readouterr().err

"""Bad command lines of the admin tools: one sentence on stderr, exit 1, before any ZooKeeper is contacted (the
connect string here points nowhere)."""

from __future__ import annotations

import json

import pytest

from zkbroker.cli import main

NOWHERE = "127.0.0.1:1/none"


@pytest.mark.parametrize("argv, message", [
    (["topics", "--zookeeper", NOWHERE],
     "Command must include exactly one action: --list, --describe, --create, --alter or --delete."),
    (["topics", "--list", "--describe", "--zookeeper", NOWHERE], "Command must include exactly one action"),
    (["topics", "--list"], 'Missing required argument "[zookeeper]".'),
    (["topics", "--create", "--zookeeper", NOWHERE], 'Missing required argument "[topic]".'),
    (["topics", "--create", "--zookeeper", NOWHERE, "--topic", "t", "--partitions", "1"],
     'Missing required argument "[replication-factor]".'),
    (["topics", "--create", "--zookeeper", NOWHERE, "--topic", "t", "--partitions", "x", "--replication-factor", "1"],
     'Option "[partitions]" needs an integer, not "x".'),
    (["topics", "--create", "--zookeeper", NOWHERE, "--topic", "bad/name", "--partitions", "1",
      "--replication-factor", "1"], "topic name bad/name is illegal"),
    (["topics", "--create", "--zookeeper", NOWHERE, "--topic", "t", "--replica-assignment", "1:2,3"],
     "Partition 1 has different replication factor: 3."),
    (["topics", "--create", "--zookeeper", NOWHERE, "--topic", "t", "--replica-assignment", "1:2",
      "--partitions", "1"], 'Option "[replica-assignment]" can\'t be used with option "[partitions]".'),
    (["topics", "--alter", "--zookeeper", NOWHERE, "--topic", "t", "--replication-factor", "3"],
     'Option "[replication-factor]" can\'t be used with option "[alter]".'),
    (["topics", "--create", "--zookeeper", NOWHERE, "--topic", "t", "--partitions", "1", "--replication-factor",
      "1", "--config", "no.such.key=1"], 'Unknown configuration "no.such.key".'),
    (["topics", "--create", "--zookeeper", NOWHERE, "--topic", "t", "--partitions", "1", "--replication-factor",
      "1", "--config", "retention.ms"], 'all configs to be added must be in the format "key=val".'),
    (["topics", "--describe", "--zookeeper", NOWHERE, "--under-replicated-partitions",
      "--unavailable-partitions"],
     'Option "[under-replicated-partitions]" can\'t be used with option "[unavailable-partitions]".'),
    (["reassign-partitions", "--zookeeper", NOWHERE],
     "Command must include exactly one action: --generate, --execute or --verify."),
    (["reassign-partitions", "--zookeeper", NOWHERE, "--execute"],
     "If --execute option is used, command must include --reassignment-json-file"),
    (["reassign-partitions", "--zookeeper", NOWHERE, "--generate", "--broker-list", "1"],
     "If --generate option is used, command must include both --topics-to-move-json-file and --broker-list"),
    (["preferred-replica-election"], 'Missing required argument "[zookeeper]".'),
])
def test_bad_arguments_give_one_sentence_and_exit_1(capsys, argv, message):
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err
    assert captured.err.count("\n") == 1 and captured.err.startswith(f"zkbroker {argv[0]}: ")


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not valid JSON"),
    (json.dumps({"version": 1}), "is empty"),
    (json.dumps({"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}),
     "Partition replica lists may not contain duplicate entries: [t,0] contains multiple entries for 1."),
    (json.dumps({"partitions": [{"topic": "t", "partition": 0, "replicas": [1]},
                                {"topic": "t", "partition": 0, "replicas": [2]}]}),
     "Partition reassignment contains duplicate topic partitions: [t,0]."),
    (json.dumps({"partitions": [{"topic": "t", "partition": "zero", "replicas": [1]}]}),
     'each partition needs a "topic" string, a "partition" number and a "replicas" list of broker ids'),
])
def test_bad_reassignment_files_are_refused(tmp_path, capsys, content, message):
    path = tmp_path / "plan.json"
    path.write_text(content)
    assert main(["reassign-partitions", "--zookeeper", NOWHERE, "--execute", "--reassignment-json-file",
                 str(path)]) == 1
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("content, message", [
    (json.dumps({"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 0}]}),
     "Preferred replica election data contains duplicate partitions: [t,0]."),
    (json.dumps({"topics": []}), "Preferred replica election data is empty."),
    ("[1, 2", "is not valid JSON"),
])
def test_bad_preferred_election_files_are_refused(tmp_path, capsys, content, message):
    path = tmp_path / "election.json"
    path.write_text(content)
    assert main(["preferred-replica-election", "--zookeeper", NOWHERE, "--path-to-json-file", str(path)]) == 1
    assert message in capsys.readouterr().err


def test_a_missing_json_file_is_named(tmp_path, capsys):
    assert main(["preferred-replica-election", "--zookeeper", NOWHERE, "--path-to-json-file",
                 str(tmp_path / "nope.json")]) == 1
    assert "Cannot read" in capsys.readouterr().err


def test_every_tool_that_takes_a_bootstrap_server_takes_a_command_config():
    import argparse

    from zkbroker.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    reach_brokers = {name: {flag for action in p._actions for flag in action.option_strings}
                     for name, p in commands.choices.items()}
    reach_brokers = {name: flags for name, flags in reach_brokers.items() if "--bootstrap-server" in flags}
    assert {"topics", "configs", "consumer-groups", "acls", "delete-records", "leader-election",
            "reassign-partitions", "transactions", "metadata-quorum"} <= set(reach_brokers)
    assert [name for name, flags in reach_brokers.items() if "--command-config" not in flags] == []


def test_an_unreadable_command_config_is_one_sentence(tmp_path, capsys):
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=TLS\n")
    assert main(["topics", "--bootstrap-server", "127.0.0.1:1", "--command-config", str(path), "--list"]) == 1
    assert "Invalid value for configuration security.protocol: unknown security protocol 'TLS'" in \
        capsys.readouterr().err
    assert main(["consumer-groups", "--bootstrap-server", "127.0.0.1:1", "--command-config",
                 str(tmp_path / "missing"), "--list"]) == 1
    assert f"Cannot read --command-config {tmp_path / 'missing'}" in capsys.readouterr().err

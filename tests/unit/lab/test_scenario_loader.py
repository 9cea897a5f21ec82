"""The scenario TOML schema: a good file loads whole; anything unknown fails with the file, the line and the
names allowed there."""

from __future__ import annotations

import pytest

from zkbroker.lab.scenario import CONDITIONS, STEPS, ScenarioError, load_scenario, parse_scenario

KAFKA_1211 = '''\
name = "kafka-1211"
source = "KAFKA-1211"
summary = "An acknowledged write lost by high-watermark truncation"

[cluster]
brokers = 2
network = true
config = { "zookeeper.session.timeout.ms" = 3000 }

[modes."0.8"]
config = { "replication.truncation" = "high-watermark", "unclean.leader.election.enable" = true }
expect = "lost"

[modes.fixed]
config = { "replication.truncation" = "leader-epoch" }
expect = "ok"
max_unavailable_ms = 20000

[[steps]]
action = "create_topic"
topic = "t"
replicas = [[2, 1]]
narrate = "One partition on brokers 2 (leader) and 1"

[[steps]]
action = "produce"
topic = "t"
count = 2
acks = "all"
narrate = "m1 and m2 are acknowledged once both replicas have them"

[[steps]]
action = "kill"
broker = 1
narrate = "Broker 1 crashes before its next fetch brings it the new HW"

[[steps]]
action = "wait"
condition = "isr_excludes"
topic = "t"
partition = 0
broker = 1
timeout_ms = 20000

[[steps]]
action = "partition"
node = "broker:2"
from = ["zookeeper"]
mode = "0.8"
'''


def scenario_with_step(step: str) -> str:
    return KAFKA_1211 + "\n[[steps]]\n" + step


def fails(text: str, match: str) -> str:
    with pytest.raises(ScenarioError, match=match) as failure:
        parse_scenario(text, "s.toml")
    return str(failure.value)


def test_a_scenario_loads_with_its_cluster_modes_and_steps(tmp_path):
    path = tmp_path / "kafka-1211.toml"
    path.write_text(KAFKA_1211)
    scenario = load_scenario(path)
    assert (scenario.name, scenario.source, scenario.brokers, scenario.zookeepers) == ("kafka-1211", "KAFKA-1211",
                                                                                        2, 1)
    assert scenario.config == {"zookeeper.session.timeout.ms": "3000"}
    assert scenario.modes["0.8"].config == {"replication.truncation": "high-watermark",
                                            "unclean.leader.election.enable": "true"}
    assert (scenario.modes["0.8"].expect, scenario.modes["fixed"].expect) == ("lost", "ok")
    assert scenario.modes["fixed"].max_unavailable_ms == 20000
    assert [s.action for s in scenario.steps] == ["create_topic", "produce", "kill", "wait", "partition"]
    produce = scenario.steps[1]
    assert produce.fields == {"topic": "t", "count": 2, "acks": "all"}
    assert produce.narrate == "m1 and m2 are acknowledged once both replicas have them"
    assert produce.line == 26  # its `action =` line
    assert scenario.steps[4].mode == ("0.8",) and scenario.file == str(path)


def test_an_unknown_step_names_the_file_the_line_and_the_steps():
    message = fails(scenario_with_step('action = "explode"\nbroker = 1\n'), "unknown step 'explode'")
    line = KAFKA_1211.count("\n") + 3
    assert message.startswith(f"s.toml:{line}: ")
    assert message.endswith("allowed: " + ", ".join(STEPS))


def test_an_unknown_field_of_a_step_names_its_line_and_the_fields_of_that_step():
    message = fails(scenario_with_step('action = "kill"\nbroker = 1\nsignal = "SIGTERM"\n'),
                    "unknown field of a kill step 'signal'")
    assert message.startswith(f"s.toml:{KAFKA_1211.count(chr(10)) + 5}: ")
    assert message.endswith("allowed: action, narrate, mode, broker, zookeeper, controller, consumer, as, stream")


def test_an_unknown_top_level_or_cluster_field_names_its_line():
    message = fails(KAFKA_1211.replace("brokers = 2", "brokers = 2\nbrokres = 3"), "unknown field 'brokres'")
    assert message.startswith("s.toml:7: ")
    assert message.endswith("allowed: brokers, zookeepers, controllers, network, config, settle_ms")
    message = fails("title = 'x'\n" + KAFKA_1211, "unknown field 'title'")
    assert message.startswith("s.toml:1: ") and "allowed: name, source, summary" in message


def test_unknown_modes_verdicts_conditions_and_fault_points_list_the_allowed_ones():
    assert fails(KAFKA_1211.replace('[modes.fixed]', '[modes."0.9"]'), "unknown mode '0.9'").startswith("s.toml:14:")
    message = fails(KAFKA_1211.replace('expect = "ok"', 'expect = "fine"'), "unknown verdict 'fine'")
    assert message.startswith("s.toml:16: ")
    message = fails(scenario_with_step('action = "wait"\ncondition = "sunny"\n'), "unknown condition 'sunny'")
    assert message.endswith(", ".join(CONDITIONS))
    fails(scenario_with_step('action = "fault"\npoint = "nap"\nbroker = 1\n'), "unknown fault point 'nap'")
    fails(scenario_with_step('action = "fault"\npoint = "hold_cleaner_at"\nbroker = 1\nphase = "nap"\n'),
          "unknown log cleaner phase 'nap'")


def test_types_required_fields_and_one_process_are_checked():
    fails(scenario_with_step('action = "produce"\ntopic = "t"\ncount = "two"\n'), "count must be an integer")
    fails(scenario_with_step('action = "produce"\ntopic = "t"\n'), "a produce step needs 'count'")
    fails(scenario_with_step('action = "kill"\n'),
          "a kill step names one of broker, zookeeper, controller, consumer, stream$")
    fails(scenario_with_step('action = "kill"\nbroker = 1\nzookeeper = 2\n'),
          "names one of broker, zookeeper, controller, consumer, stream \\(not broker and zookeeper\\)")
    fails(scenario_with_step('action = "sleep"\nms = true\n'), "ms must be an integer")
    fails(scenario_with_step('action = "heal"\nmode = "fixed "\n'), "mode 'fixed ' is not one of")
    fails(KAFKA_1211.replace("brokers = 2", "zookeepers = 2"), "zookeepers must be one of 1, 3, 5")
    fails(KAFKA_1211.replace("brokers = 2", "brokers = 0"), "needs at least one broker")
    fails(KAFKA_1211.replace("brokers = 2", "controllers = 4"), "controllers must be one of 1, 3, 5")
    fails(scenario_with_step('action = "kill"\ncontroller = 3001\n'), "runs in the KRaft modes only")


def test_a_kraft_only_scenario_may_have_no_brokers_and_names_controllers_and_their_nodes():
    text = ('name = "k"\nsource = "s"\nsummary = "x"\nwhy_one_mode = "y"\n[cluster]\nbrokers = 0\nnetwork = true\n'
            '[modes.kraft]\nexpect = "ok"\nwhy = "z"\n[[steps]]\naction = "choose"\ncontroller = "follower"\n'
            'as = "cut"\n[[steps]]\naction = "partition"\nnode = "controller:cut"\nfrom = ["controller"]\n'
            '[[steps]]\naction = "kill"\ncontroller = "active"\n[[steps]]\naction = "start"\ncontroller = 3003\n')
    scenario = parse_scenario(text, "k.toml")
    assert scenario.brokers == 0 and scenario.controllers == 3 and list(scenario.modes) == ["kraft"]
    fails(text.replace("controller = 3003", "controller = 3004"), "not a controller of the quorum")
    fails(text.replace('"controller:cut"', '"controller:nobody"'), "is not a node")


def test_one_mode_needs_a_reason_and_bad_toml_names_its_line():
    one_mode = KAFKA_1211.split("[modes.fixed]")[0] + KAFKA_1211.split('max_unavailable_ms = 20000\n')[1]
    fails(one_mode, "says why in why_one_mode")
    assert parse_scenario('why_one_mode = "no fix exists"\n' + one_mode).why_one_mode == "no fix exists"
    assert fails(KAFKA_1211 + "\n[[steps]\n", "not valid TOML").startswith(f"s.toml:{KAFKA_1211.count(chr(10)) + 2}:")


def test_a_missing_file_is_one_sentence(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read the scenario"):
        load_scenario(tmp_path / "nope.toml")


def test_a_partition_step_needs_the_lab_network():
    message = fails(KAFKA_1211.replace("network = true\n", ""), "a partition step needs network = true")
    assert message.startswith(f"s.toml:{KAFKA_1211.count(chr(10)) - 4}: ")  # its `action =` line


def test_names_given_with_as_are_the_only_strings_a_target_may_be():
    named = scenario_with_step('action = "pause"\nbroker = "controller"\nas = "zombie"\n')
    scenario = parse_scenario(named + '\n[[steps]]\naction = "resume"\nbroker = "zombie"\n')
    assert scenario.steps[-1].fields == {"broker": "zombie"}
    fails(scenario_with_step('action = "resume"\nbroker = "zombie"\n'), "broker 'zombie' is not an id")
    fails(scenario_with_step('action = "wait"\ncondition = "acked"\n'), "the acked condition needs 'of'")
    fails(scenario_with_step('action = "wait"\ncondition = "acked"\nof = "nothing"\n'),
          "no earlier produce step is named 'nothing'")


def test_the_isr_change_counts_are_conditions_of_wait_and_expect_steps():
    for condition in ("isr_shrinks", "isr_expansions"):
        scenario = parse_scenario(scenario_with_step(f'action = "expect"\ncondition = "{condition}"\ntopic = "t"\n'
                                                     f'size = 3\nmode = "0.8"\n'), "s.toml")
        assert scenario.steps[-1].fields == {"condition": condition, "topic": "t", "size": 3}
    fails(scenario_with_step('action = "expect"\ncondition = "isr_shrinks"\ntopic = "t"\nsize = "many"\n'),
          "size must be an integer")


def test_transactional_produce_and_read_steps_are_checked():
    good = scenario_with_step('action = "produce"\ntopic = "t"\ncount = 3\ntransactional_id = "tx"\n'
                              'transaction = "abort"\nas = "aborted"\n') + \
        '\n[[steps]]\naction = "read"\ntopic = "t"\nisolation_level = "read_committed"\nas = "reader"\n'
    steps = parse_scenario(good, "s.toml").steps
    assert [s.action for s in steps[-2:]] == ["produce", "read"]
    assert steps[-2].fields["transaction"] == "abort" and steps[-1].fields["isolation_level"] == "read_committed"
    fails(scenario_with_step('action = "produce"\ntopic = "t"\ncount = 3\ntransaction = "commit"\n'),
          "s.toml:\\d+: a transactional produce names both transactional_id and transaction")
    fails(scenario_with_step('action = "produce"\ntopic = "t"\ncount = 3\ntransactional_id = "tx"\n'
                             'transaction = "rollback"\n'),
          "transaction must be one of commit, abort, abandon, not 'rollback'")
    fails(scenario_with_step('action = "read"\ntopic = "t"\nisolation_level = "serializable"\n'),
          "isolation_level must be one of read_committed, read_uncommitted")
    fails(KAFKA_1211.replace('expect = "lost"', 'expect = "torn-apart"'), "unknown verdict")


def test_a_step_of_several_modes_and_a_lost_disk_of_the_kraft_modes_only():
    text = """name = "x"
source = "s"
summary = "s"
why_one_mode = "w"

[cluster]
brokers = 1

[modes.kraft]
expect = "ok"
why = "w"

[modes."kraft-fixed"]
directory_ids = true
expect = "ok"
why = "w"

[[steps]]
action = "kill"
controller = "active"
as = "gone"

[[steps]]
action = "lose_disk"
controller = "gone"
mode = ["kraft", "kraft-fixed"]
"""
    scenario = parse_scenario(text)
    assert scenario.modes["kraft-fixed"].directory_ids and not scenario.modes["kraft"].directory_ids
    lose = scenario.steps[1]
    assert lose.mode == ("kraft", "kraft-fixed") and lose.runs_in("kraft") and not lose.runs_in("0.8")
    with pytest.raises(ScenarioError, match="mode \\['kraft', 'fixed'\\] is not one of this scenario's"):
        parse_scenario(text.replace('mode = ["kraft", "kraft-fixed"]', 'mode = ["kraft", "fixed"]'))
    with pytest.raises(ScenarioError, match="directory_ids names KRaft voters"):
        parse_scenario(text.replace("[modes.kraft]", '[modes.fixed]\ndirectory_ids = true'))

"""Scenario files checked at load (DESIGN §20): ten mistakes a newcomer makes, each refused with the file, the
line and what is missing or not allowed; mutated catalogue files are either refused with a line or accepted
whole, and an accepted step is one the runner can take."""

from __future__ import annotations

import importlib.resources
import inspect
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkbroker.lab.runner import ScenarioRun
from zkbroker.lab.scenario import CATALOGUE, CONDITIONS, STEPS, ScenarioError, parse_scenario

HEAD = '''\
name = "mine"
source = "a newcomer"
summary = "A failover, written from the docs"

[cluster]
brokers = 3

[modes."0.8"]
expect = "ok"

[modes.fixed]
expect = "ok"

[[steps]]
action = "create_topic"
topic = "t"
replication_factor = 3
'''
HEAD_LINES = HEAD.count("\n")

# (what is wrong, the steps after HEAD, the line (counted from the first added line) and words the error says)
MISTAKES = [
    ("a wait on controller_changed without its broker",
     '[[steps]]\naction = "kill"\nbroker = "controller"\n\n[[steps]]\naction = "wait"\n'
     'condition = "controller_changed"\n', 5, "the controller_changed condition needs 'broker'"),
    ("a produce step without its count",
     '[[steps]]\naction = "produce"\ntopic = "t"\n', 1, "a produce step needs 'count'"),
    ("a misspelt field of a step",
     '[[steps]]\naction = "produce"\ntopic = "t"\ncuont = 2\n', 4, "unknown field of a produce step 'cuont'"),
    ("a field of another condition",
     '[[steps]]\naction = "expect"\ncondition = "topic_exists"\ntopic = "t"\nbroker = 1\n', 5,
     "unknown field of a topic_exists condition 'broker'"),
    ("a name used before the step that gives it",
     '[[steps]]\naction = "kill"\nbroker = "old"\n\n[[steps]]\naction = "choose"\nbroker = "controller"\n'
     'as = "old"\n', 3, "broker 'old' is not an id"),
    ("a name given in one mode and used in both",
     '[[steps]]\naction = "choose"\nbroker = "controller"\nas = "c"\nmode = "0.8"\n\n[[steps]]\naction = "kill"\n'
     'broker = "c"\n', 9, "it is named only in mode 0.8"),
    ("an acked condition of a produce step nobody named",
     '[[steps]]\naction = "produce"\ntopic = "t"\ncount = 1\n\n[[steps]]\naction = "expect"\ncondition = "acked"\n'
     'of = "writes"\n', 9, "no earlier produce step is named 'writes'"),
    ("a step of a mode the scenario does not have",
     '[[steps]]\naction = "kill"\nbroker = 1\nmode = "0.9"\n', 4, "mode '0.9' is not one of this scenario's"),
    ("a broker the cluster does not have",
     '[[steps]]\naction = "pause"\nbroker = 4\n', 3, "there is no broker 4: the cluster's brokers are 1 to 3"),
    ("a consumer paused before it was started",
     '[[steps]]\naction = "pause"\nconsumer = "c1"\n\n[[steps]]\naction = "consumer"\nname = "c1"\ngroup = "g"\n'
     'topic = "t"\n', 3, "no earlier consumer step is named 'c1'"),
    ("a produce through a broker nobody named",
     '[[steps]]\naction = "produce"\ntopic = "t"\ncount = 1\nvia = "x"\n', 5, "via 'x' is not an id"),
    ("an unknown verdict",
     None, None, "unknown verdict 'fine'"),
]


@pytest.mark.parametrize("what, steps, line, words", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_a_mistake_is_refused_with_the_file_and_the_line(what, steps, line, words):
    if steps is None:  # a mistake outside the steps: the verdict of [modes.fixed]
        text, line = HEAD.replace('expect = "ok"\n\n[[steps]]', 'expect = "fine"\n\n[[steps]]'), 12
    else:
        text, line = HEAD + "\n" + steps, HEAD_LINES + 1 + line
    with pytest.raises(ScenarioError) as refused:
        parse_scenario(text, "mine.toml")
    message = str(refused.value)
    assert message.startswith(f"mine.toml:{line}: "), message
    assert words in message


def test_the_steps_in_the_mistakes_are_right_once_corrected():
    fixed = HEAD + '''
[[steps]]
action = "choose"
broker = "controller"
as = "old"

[[steps]]
action = "kill"
broker = "old"

[[steps]]
action = "wait"
condition = "controller_changed"
broker = "old"

[[steps]]
action = "produce"
topic = "t"
count = 2
as = "writes"

[[steps]]
action = "expect"
condition = "acked"
of = "writes"
'''
    assert [s.action for s in parse_scenario(fixed, "mine.toml").steps] == [
        "create_topic", "choose", "kill", "wait", "produce", "expect"]


def test_the_runner_has_a_method_for_every_step_and_a_branch_for_every_condition():
    for action, shape in STEPS.items():
        method = getattr(ScenarioRun, f"_{action}")
        parameters = inspect.signature(method).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
        named = set(parameters) - {"self", "step"} - {p.name for p in parameters.values() if p.kind is p.VAR_KEYWORD}
        assert named <= set(shape.fields) | {"condition", "negate"}, (action, named - set(shape.fields))
        assert takes_any or set(shape.fields) <= named, (action, set(shape.fields) - named)
    source = inspect.getsource(ScenarioRun._holds)
    assert [c for c in CONDITIONS if f'"{c}"' not in source] == []


# ---- mutated catalogue files ----------------------------------------------------------------------------------

def catalogue_texts() -> dict[str, str]:
    folder = importlib.resources.files("zkbroker.lab") / "scenarios"
    return {name: (folder / f"{name}.toml").read_text() for name in CATALOGUE}


TEXTS = catalogue_texts()
VALUES = ['1', '0', '7', '-1', 'true', '"t"', '"x"', '"controller"', '"zombie"', '"leader:t-0"', '"not:x"', '"0.8"',
          '"fixed"', '"broker:1"', '"zookeeper"', '[1, 2]', '[]', '{}', '"acked"', '"isr_size"', '"kill"', '"c1"',
          '"g"', '"lost"', '"nope"']
KEYS = sorted({*STEPS, *CONDITIONS, "broker", "topic", "size", "of", "as", "group", "consumer", "mode", "action",
               "condition", "count", "partition", "node", "from", "expect", "brokers", "zookeepers", "network"})
ASSIGNMENT = re.compile(r"^(\s*)([A-Za-z_][A-Za-z0-9_.\"-]*)(\s*=\s*)(.*)$")


@st.composite
def mutated(draw) -> tuple[str, str]:
    """A catalogue file with one to three edits: a line dropped or repeated, a value or a key replaced."""
    name = draw(st.sampled_from(CATALOGUE))
    lines = TEXTS[name].splitlines()
    for _ in range(draw(st.integers(1, 3))):
        index = draw(st.integers(0, len(lines) - 1))
        edit = draw(st.sampled_from(("drop", "repeat", "value", "key")))
        match = ASSIGNMENT.match(lines[index])
        if edit == "drop":
            del lines[index]
        elif edit == "repeat":
            lines.insert(index, lines[index])
        elif match and edit == "value":
            lines[index] = match.group(1) + match.group(2) + match.group(3) + draw(st.sampled_from(VALUES))
        elif match:
            lines[index] = match.group(1) + draw(st.sampled_from(KEYS)) + match.group(3) + match.group(4)
        if not lines:
            lines = [""]
    return name, "\n".join(lines) + "\n"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_a_mutated_catalogue_file_is_refused_with_a_line_or_runnable(case):
    name, text = case
    filename = f"{name}.toml"
    try:
        scenario = parse_scenario(text, filename)
    except ScenarioError as e:
        found = re.match(rf"{re.escape(filename)}:(\d+): \S", str(e))
        assert found, str(e)
        assert 1 <= int(found.group(1)) <= max(1, text.count("\n")), str(e)
        return
    for step in scenario.steps:  # accepted: the runner's method for the step takes its fields as they are
        method = getattr(ScenarioRun, f"_{step.action}")
        inspect.signature(method).bind(None, step, **step.fields)
        if step.action in ("wait", "expect"):
            assert step.fields["condition"] in CONDITIONS


def test_every_catalogue_step_binds_to_the_runner():
    for name, text in TEXTS.items():
        for step in parse_scenario(text, f"{name}.toml").steps:
            inspect.signature(getattr(ScenarioRun, f"_{step.action}")).bind(None, step, **step.fields)


@pytest.mark.parametrize("seed", range(6))
def test_torture_s_generated_steps_are_ones_the_checker_allows(seed):
    from zkbroker.lab.scenario import Checker, Names, check_step
    from zkbroker.lab.torture import FAULT_KINDS, plan

    scenario = plan(seed, seed, FAULT_KINDS).scenario
    names = Names(scenario.modes)
    for index, step in enumerate(scenario.steps):
        check_step(Checker("", "torture"), ("steps", index), {"action": step.action, **step.fields}, scenario.modes,
                   names, scenario.brokers, scenario.zookeepers)

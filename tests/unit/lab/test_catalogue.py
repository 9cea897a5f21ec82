"""The catalogue shipped in the package: every DESIGN §10 name, each file valid, keyed by its source, with both
modes or a reason for one, and the `lab scenario list --json` shape."""

from __future__ import annotations

import json

from zkbroker.cli import main
from zkbroker.lab.scenario import CATALOGUE, catalogue, find_scenario


def test_every_catalogue_file_loads_is_named_after_its_file_and_says_what_each_mode_does():
    scenarios = catalogue()
    assert [s.name for s in scenarios] == [n for n in CATALOGUE if n in {s.name for s in scenarios}]
    for scenario in scenarios:
        assert scenario.file.endswith(f"/{scenario.name}.toml")
        assert scenario.source and scenario.summary
        before_after = {"0.8", "fixed"} <= set(scenario.modes) or {"kraft", "kraft-fixed"} <= set(scenario.modes)
        assert before_after or scenario.why_one_mode, scenario.name
        assert all(spec.why for spec in scenario.modes.values()), scenario.name


def test_list_json_is_an_array_of_name_source_summary_and_modes(capsys):
    assert main(["lab", "scenario", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed and all(list(entry) == ["name", "source", "summary", "modes"] for entry in listed)
    assert listed[0]["name"] == catalogue()[0].name


def test_show_names_the_modes_and_the_steps_and_an_unknown_name_lists_the_catalogue(capsys):
    first = catalogue()[0]
    assert main(["lab", "scenario", "show", first.name]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith(f"{first.name}: {first.summary}") and "Steps:" in shown
    assert main(["lab", "scenario", "show", "no-such-scenario"]) == 1
    assert "there are: " + first.name in capsys.readouterr().err
    assert find_scenario(first.name) == first


def test_the_herd_makes_the_same_membership_changes_in_both_modes_through_zookeeper_then_the_coordinator():
    herd = find_scenario("zk-consumer-herd")

    def changes(mode: str) -> list[tuple]:
        return [(s.action, s.fields.get("name", s.fields.get("consumer")), s.fields.get("coordinator", False))
                for s in herd.steps if s.runs_in(mode) and s.action in ("consumer", "pause", "resume")]
    assert [c[:2] for c in changes("0.8")] == [c[:2] for c in changes("fixed")] == [
        ("consumer", "c1"), ("pause", "c1"), ("consumer", "c2"), ("resume", "c1")]
    assert [c[2] for c in changes("fixed") if c[0] == "consumer"] == [True, True]
    assert not any(c[2] for c in changes("0.8"))
    assert (herd.modes["0.8"].expect, herd.modes["fixed"].expect) == ("stuck", "ok")

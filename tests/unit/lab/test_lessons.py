"""Lessons as data (DESIGN §20): the course loads, a lesson's mistakes name their line, and the player turns
pages as the steps reach them, giving each page the claims that failed on it."""

from __future__ import annotations

import io
import threading
from types import SimpleNamespace

import pytest

from zkbroker.lab.lesson import COURSE, LessonError, course, parse_lesson
from zkbroker.lab.lesson_cli import format_teacher_page
from zkbroker.lab.lesson_runner import AutoAnswers, LessonPlayer, LessonResult, TerminalAnswers

LESSON = '''\
name = "tiny"
title = "A tiny lesson"
minutes = 10
topics = ["sessions"]
summary = "One idea"

[cluster]
brokers = 2

[[pages]]
title = "An idea"
text = "Words"

[pages.question]
kind = "choice"
ask = "Which?"
choices = ["this", "that"]
answer = 2
hint = "Not this"
why = "Because"

[[pages]]
title = "A claim"
text = "More words"

[pages.question]
kind = "predict"
ask = "Registered?"
choices = ["yes", "no"]
answer = 1
why = "Sessions"

[[pages.steps]]
action = "kill"
broker = 2

[[pages.steps]]
action = "expect"
condition = "registered"
broker = 2

[[pages]]
title = "Another claim"
text = "Last words"

[[pages.steps]]
action = "wait"
condition = "unregistered"
broker = 2
'''


def refused(text: str) -> str:
    with pytest.raises(LessonError) as e:
        parse_lesson(text, "l.toml")
    return str(e.value)


def test_the_course_loads_in_its_order_with_a_question_on_every_page_that_predicts():
    lessons = course()
    assert [lesson.name for lesson in lessons][:len(COURSE)] == list(COURSE)
    for lesson in lessons:
        assert 10 <= lesson.minutes <= 20 and lesson.topics and lesson.pages
        assert sum(len(page.steps) for page in lesson.pages) == len(lesson.scenario.steps)
        assert "Why:" in format_teacher_page(lesson)


def test_a_lesson_becomes_a_scenario_of_one_mode_with_every_page_s_steps():
    lesson = parse_lesson(LESSON, "l.toml")
    assert [page.title for page in lesson.pages] == ["An idea", "A claim", "Another claim"]
    assert [s.action for s in lesson.scenario.steps] == ["kill", "expect", "wait"]
    assert lesson.scenario.steps[1].line == LESSON.splitlines().index('condition = "registered"')  # its action
    assert lesson.pages[0].question.answer == 2 and lesson.scenario.brokers == 2
    assert lesson.as_listing() == {"name": "tiny", "title": "A tiny lesson", "minutes": 10, "topics": ["sessions"]}


def test_mistakes_in_a_lesson_name_their_line():
    lines = LESSON.splitlines()
    assert refused(LESSON.replace("answer = 2", "answer = 3")).startswith(
        f"l.toml:{lines.index('answer = 2') + 1}: answer is the number of a choice, 1 to 2")
    assert refused(LESSON.replace('kind = "predict"', 'kind = "poll"')).startswith(
        f"l.toml:{lines.index('kind = ' + chr(34) + 'predict' + chr(34)) + 1}: unknown kind of question 'poll'")
    message = refused(LESSON.replace("broker = 2\n\n[[pages]]", "broker = 3\n\n[[pages]]"))
    broker_line = lines.index('condition = "registered"') + 2  # the expect step's broker
    assert message.startswith(f"l.toml:{broker_line}: there is no broker 3")
    assert refused(LESSON.replace('title = "A claim"\n', 'title = "A claim"\ncolour = "red"\n')).startswith(
        f"l.toml:{lines.index('title = ' + chr(34) + 'A claim' + chr(34)) + 2}: unknown field of a page 'colour'")
    no_claim = LESSON.replace('[[pages.steps]]\naction = "expect"\ncondition = "registered"\nbroker = 2\n', "")
    assert "a predict question needs a wait or expect step on its page" in refused(no_claim)


class FakeRun:
    def __init__(self) -> None:
        self.result = SimpleNamespace(failures=[], stuck=[])


def play(lesson, fail_at: dict[int, str], answers=None) -> tuple[LessonPlayer, list[str]]:
    """Drive the player as the scenario runner would, a failure appended while step i runs."""
    said: list[str] = []
    player = LessonPlayer(lesson, answers or AutoAnswers(), said.append)
    player.run = FakeRun()
    for index, step in enumerate(lesson.scenario.steps):
        player.wait("tiny", index, step, threading.Event())
        if index in fail_at:
            player.run.result.failures.append(fail_at[index])
    player.finish()
    return player, said


def test_each_page_holds_unless_a_claim_on_it_failed():
    lesson = parse_lesson(LESSON, "l.toml")
    player, said = play(lesson, {1: "line 40: expected broker 2 is registered"})
    result = LessonResult("tiny", player.outcomes)
    assert [p.as_json()["held"] for p in player.outcomes] == [True, False, True]
    assert player.outcomes[1].failures == ["line 40: expected broker 2 is registered"]
    assert not result.passed
    assert result.as_json()["steps"][0] == {"title": "An idea", "held": True, "answer": 2, "correct": True}
    assert any(line.startswith("What happened: a claim did not hold") for line in said)
    player, _ = play(lesson, {})
    assert LessonResult("tiny", player.outcomes).passed


def test_a_learner_gets_the_hint_and_a_second_try_and_the_end_of_input_answers_the_rest():
    lesson = parse_lesson(LESSON, "l.toml")
    player, said = play(lesson, {}, TerminalAnswers(io.StringIO("1\n2\n")))
    assert "  Not yet. Hint: Not this" in said
    assert [(p.answer, p.correct) for p in player.outcomes[:2]] == [(2, True), (1, True)]


KRAFT_LESSON = '''\
name = "tiny-kraft"
title = "A tiny KRaft lesson"
minutes = 10
summary = "One vote"
lab = "kraft"

[cluster]
controllers = 3

[[pages]]
title = "A kill"
text = "Words"

[[pages.steps]]
action = "choose"
broker = "controller"
as = "first"

[[pages.steps]]
action = "kill"
controller = "first"

[[pages.steps]]
action = "wait"
condition = "controller_changed"
broker = "first"
'''


def test_a_lesson_names_its_lab_and_a_kraft_one_plays_the_kraft_mode_on_its_controllers():
    lesson = parse_lesson(KRAFT_LESSON, "k.toml")
    assert (lesson.lab, lesson.mode) == ("kraft", "kraft")
    assert (lesson.scenario.controllers, lesson.scenario.brokers, list(lesson.scenario.modes)) == (3, 0, ["kraft"])
    assert "Lab: a KRaft quorum of 3 controllers" in format_teacher_page(lesson)
    shipped = {lesson.name: lesson for lesson in course()}
    assert shipped["kraft-election"].mode == "kraft" and shipped["controller-election"].mode == "0.8"
    zookeeper = parse_lesson(LESSON, "l.toml")
    assert (zookeeper.lab, zookeeper.mode) == ("zookeeper", "0.8")
    lines = KRAFT_LESSON.splitlines()
    assert refused(KRAFT_LESSON.replace('lab = "kraft"', 'lab = "etcd"')).startswith(
        f"l.toml:{lines.index('lab = ' + chr(34) + 'kraft' + chr(34)) + 1}: unknown lab 'etcd'; allowed: zookeeper, "
        f"kraft")
    assert refused(KRAFT_LESSON.replace("controllers = 3", "controllers = 3\nzookeepers = 3")).startswith(
        f"l.toml:{lines.index('controllers = 3') + 2}: zookeepers belongs to a ZooKeeper lab")
    assert refused(KRAFT_LESSON.replace("controllers = 3", "controllers = 2")).startswith(
        f"l.toml:{lines.index('controllers = 3') + 1}: controllers must be one of 1, 3, 5")
    # Without lab = "kraft" the same file is a ZooKeeper lesson: its controllers and controller steps are refused
    zookeeper_lab = KRAFT_LESSON.replace('lab = "kraft"\n', "")
    assert refused(zookeeper_lab).startswith(
        f"l.toml:{lines.index('controllers = 3')}: controllers belongs to a KRaft lab")
    assert "a controller step runs in the KRaft modes only" in refused(
        zookeeper_lab.replace("controllers = 3", "brokers = 1"))

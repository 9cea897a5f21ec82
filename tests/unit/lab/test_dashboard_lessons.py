"""The dashboard's Lessons view without a lab: its course, and the commands it refuses with their status."""

from __future__ import annotations

import threading

import pytest

from zkbroker.lab.dashboard.lessons import BrowserAnswers, LessonControl, course_json
from zkbroker.lab.dashboard.scenarios import ScenarioCommandError
from zkbroker.lab.lesson import COURSE
from zkbroker.lab.runner import Cancelled


def refused(control: LessonControl, body: object) -> tuple[int, str]:
    with pytest.raises(ScenarioCommandError) as e:
        control.command(body)
    return e.value.status, str(e.value)


def test_the_course_lists_every_lesson_with_its_pages():
    lessons = course_json()
    assert [lesson["name"] for lesson in lessons][:len(COURSE)] == list(COURSE)
    assert all(lesson["pages"] >= 1 and lesson["summary"] for lesson in lessons)


def test_commands_it_cannot_carry_out_are_refused_with_their_status(tmp_path):
    control = LessonControl(tmp_path, on_lab=lambda directory: None)
    assert control.status() == {"state": "idle"}
    assert refused(control, {"action": "start", "name": "nope"})[0] == 400
    assert refused(control, {"action": "start", "name": "registration", "speed": 2}) == (
        400, "start takes name; unknown: speed")
    assert refused(control, {"action": "next"}) == (409, "No lesson is playing to next; start one first")
    assert refused(control, {"action": "dance"})[0] == 400
    assert refused(control, ["start"])[0] == 400


def test_browser_answers_wait_for_the_button_and_end_with_a_stop():
    cancelled = threading.Event()
    answers = BrowserAnswers(cancelled)
    answers.give(3)
    assert answers.answer(None, print) == 3 and answers.waiting is None
    answers.go_on()
    answers.pause()
    cancelled.set()
    with pytest.raises(Cancelled):
        answers.answer(None, print)

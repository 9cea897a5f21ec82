"""Playing a lesson (DESIGN §20): its pages in order on a live lab, the learner's answers, and every claim
checked.

The lab and the steps are the scenario runner's (a lesson is a scenario of one mode whose steps are grouped in
pages); the player is its stepper: before the first step of a page it shows the page and asks its question,
and it counts the claims that failed (`expect` steps that did not hold, `wait` steps that never came true, a
step that could not run) to say which page they belong to. With answers "auto" nobody is asked: the
lesson's own answer is given, and what is checked is every claim the lesson makes.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from zkbroker.lab.lesson import Lesson, Page, PageOutcome, Question
from zkbroker.lab.runner import Cancelled, ScenarioRun
from zkbroker.lab.scenario import Step

Say = Callable[[str], None]


class AutoAnswers:
    """Gives each question the lesson's own answer."""

    def answer(self, question: Question, say: Say) -> int:
        say(f"  (answers auto) {question.answer}")
        return question.answer

    def pause(self) -> None:
        pass


class TerminalAnswers:
    """Reads the learner's answer from a terminal; a wrong one gets the hint and one more try. The end of the
    input answers the rest with the lesson's own answers."""

    def __init__(self, stdin: TextIO | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.ended = False

    def _line(self) -> str | None:
        line = self.stdin.readline()  # Ctrl-C interrupts it: the player runs in the main thread
        if not line:
            self.ended = True
            return None
        return line.strip()

    def answer(self, question: Question, say: Say) -> int:
        tries = 0
        while not self.ended:
            say(f"  Your answer (1-{len(question.choices)}):")
            line = self._line()
            if line is None:
                break
            if not line.isdigit() or not 1 <= int(line) <= len(question.choices):
                say(f"  A number from 1 to {len(question.choices)}, please.")
                continue
            tries += 1
            if int(line) == question.answer or tries == 2 or not question.hint:
                return int(line)
            say(f"  Not yet. Hint: {question.hint}")
        return question.answer

    def pause(self) -> None:
        if not self.ended:
            print("  (Enter to go on)", file=sys.stderr, flush=True)
            if self._line() is None:
                return


@dataclass
class LessonResult:
    lesson: str
    pages: list[PageOutcome]
    verdict_expected: bool = True
    failures: list[str] = field(default_factory=list)  # of the run as a whole (its verdict, its lab)
    directory: Path | None = None

    @property
    def passed(self) -> bool:
        return self.verdict_expected and all(p.held and p.reached for p in self.pages)

    def as_json(self) -> dict:
        out = {"lesson": self.lesson, "passed": self.passed, "steps": [p.as_json() for p in self.pages]}
        if self.failures:
            out["failures"] = self.failures
        return out


class LessonPlayer:
    """The scenario run's stepper: it turns the pages as the steps reach them."""

    def __init__(self, lesson: Lesson, answers, say: Say, on_wait: Callable[[], None] | None = None) -> None:
        self.lesson = lesson
        self.answers = answers
        self.say = say
        self.on_wait = on_wait  # told before each step (the lab is up by then): the dashboard shows it
        self.outcomes = [PageOutcome(page.title) for page in lesson.pages]
        self.page_of_step: list[int] = [i for i, page in enumerate(lesson.pages) for _ in page.steps]
        self.current = -1  # the page whose steps run now
        self.run: ScenarioRun | None = None
        self.seen = 0  # the run's failures counted so far

    def wait(self, label: str, index: int, step: Step, cancelled: threading.Event) -> None:
        if cancelled.is_set():
            raise Cancelled()
        if self.on_wait is not None:
            self.on_wait()
        page = self.page_of_step[index]
        if page != self.current:
            self._close_page()
            for later in range(self.current + 1, page + 1):
                self._open_page(later)
            self.current = page

    def finish(self) -> None:
        """After the run: the last page's claims, then the pages no step reached (those without steps are shown
        and asked; those whose steps never ran -- a step failed before them -- do not hold)."""
        self._close_page()
        for later in range(self.current + 1, len(self.lesson.pages)):
            if self.lesson.pages[later].steps:
                self.outcomes[later].held = False
                self.outcomes[later].failures.append("not reached: an earlier step failed")
            else:
                self._open_page(later)
                self._reveal(later)
                self.outcomes[later].closed = True
        self.current = len(self.lesson.pages)

    def _failures(self) -> list[str]:
        result = self.run.result
        return result.failures + result.stuck

    def _open_page(self, index: int) -> None:
        page: Page = self.lesson.pages[index]
        outcome = self.outcomes[index]
        outcome.reached = True
        self.say("")
        self.say(f"-- {index + 1}/{len(self.lesson.pages)} {page.title} --")
        for paragraph in page.text.strip().split("\n\n"):
            self.say(" ".join(paragraph.split()))
        if page.look:
            self.say(f"Look: {' '.join(page.look.split())}")
        if page.question is not None:
            q = page.question
            self.say(f"Q{' (predict)' if q.kind == 'predict' else ''}: {q.ask}")
            for number, choice in enumerate(q.choices, start=1):
                self.say(f"  {number}) {choice}")
            outcome.answer = self.answers.answer(q, self.say)
            outcome.correct = outcome.answer == q.answer
            if q.kind == "choice":
                self._verdict_on_answer(q, outcome)
        if not page.steps:
            self.answers.pause()

    def _close_page(self) -> None:
        if self.current < 0 or self.current >= len(self.lesson.pages):
            return
        failures = self._failures()
        new = failures[self.seen:]
        self.seen = len(failures)
        outcome = self.outcomes[self.current]
        if new:
            outcome.held = False
            outcome.failures += new
        outcome.closed = True
        self._reveal(self.current)
        self.answers.pause()

    def _reveal(self, index: int) -> None:
        page = self.lesson.pages[index]
        outcome = self.outcomes[index]
        if page.question is not None and page.question.kind == "predict":
            self.say("What happened: " + ("every claim held, as the answer says" if outcome.held else
                                          "a claim did not hold: " + "; ".join(outcome.failures)))
            self._verdict_on_answer(page.question, outcome)

    def _verdict_on_answer(self, q: Question, outcome: PageOutcome) -> None:
        outcome.revealed = True
        right = f"{q.answer}) {q.choices[q.answer - 1]}"
        self.say(("Right: " if outcome.correct else f"The answer is {right}. ") + " ".join(q.why.split()))


def play_lesson(lesson: Lesson, directory: Path | None = None, auto: bool = False, say: Say = print,
                stdin: TextIO | None = None, answers=None, cancelled: threading.Event | None = None,
                keep: bool = False, on_player: Callable[[LessonPlayer], None] | None = None,
                on_wait: Callable[[], None] | None = None) -> LessonResult:
    """Play the lesson on a lab of its own in `directory` (a temporary one by default, removed afterwards
    unless the lesson did not pass). `answers`: who answers (default: the terminal, or the lesson itself with
    `auto`); `keep` leaves the lab running at the end; `on_player` is handed the player before the lab starts
    (the dashboard reads its pages while it plays)."""
    import shutil

    temporary = directory is None
    where = Path(tempfile.mkdtemp(prefix=f"zkbroker-lesson-{lesson.name}-")) if temporary else directory
    where.mkdir(parents=True, exist_ok=True)
    if answers is None:
        answers = AutoAnswers() if auto else TerminalAnswers(stdin)
    player = LessonPlayer(lesson, answers, say, on_wait)
    say(f"== {lesson.title} ({lesson.minutes} min) ==")
    say(" ".join(lesson.summary.split()))
    run = ScenarioRun(lesson.scenario, lesson.mode, 0, where, say, player, cancelled, keep=keep)
    run.label = lesson.name
    player.run = run
    if on_player is not None:
        on_player(player)
    try:
        result = run.run()
    finally:
        if player.current < len(lesson.pages):
            try:
                player.finish()
            except Cancelled:
                pass
    outcome = LessonResult(lesson.name, player.outcomes, result.verdict == result.expect, directory=where)
    if result.verdict != result.expect:
        outcome.failures.append(f"the run ended {result.verdict}, where the lesson expects {result.expect}")
    outcome.failures += (result.failures + result.stuck)[player.seen:]
    if temporary and outcome.passed and not keep:
        shutil.rmtree(where, ignore_errors=True)
        outcome.directory = None
    elif temporary:
        say(f"[{lesson.name}] its lab's logs and timeline are kept in {where}")
    return outcome

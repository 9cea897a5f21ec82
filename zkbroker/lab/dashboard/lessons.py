"""The dashboard's Lessons view: a lesson of the course played on a lab of its own (DIR/lessons/NAME), with
the learner's answers and page turns coming from the page's buttons (DESIGN §20). The player and the lab are
those of `zkbroker lab lesson run` (zkbroker/lab/lesson_runner.py); the dashboard shows the lesson's lab while
it plays, and keeps it running at the end so that its timeline can be replayed.

POST /api/lesson takes {"action": "start", "name": ...}, {"action": "answer", "choice": N} (1-based),
{"action": "next"} and {"action": "stop"}; GET /api/lesson says where the lesson is: its pages so far, the one
showing, whether it waits for an answer or for Next, and each page's answer once revealed.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from zkbroker.lab.cluster import LabCluster, LabError
from zkbroker.lab.dashboard.scenarios import ScenarioCommandError
from zkbroker.lab.lesson import Lesson, LessonError, Question, course, find_lesson
from zkbroker.lab.lesson_runner import LessonPlayer, LessonResult, play_lesson
from zkbroker.lab.runner import Cancelled

LESSONS_DIR = "lessons"


class BrowserAnswers:
    """The player's answers: each waits for the page's button (or a stop)."""

    def __init__(self, cancelled: threading.Event) -> None:
        self.cancelled = cancelled
        self.waiting: str | None = None  # "answer" or "next"
        self._answers: queue.Queue[int] = queue.Queue()
        self._next: queue.Queue[bool] = queue.Queue()

    def _take(self, what: str, q: queue.Queue):
        self.waiting = what
        try:
            while True:
                try:
                    return q.get(timeout=0.1)
                except queue.Empty:
                    if self.cancelled.is_set():
                        raise Cancelled() from None
        finally:
            self.waiting = None

    def answer(self, question: Question, say) -> int:
        return self._take("answer", self._answers)

    def pause(self) -> None:
        self._take("next", self._next)

    def give(self, choice: int) -> None:
        self._answers.put(choice)

    def go_on(self) -> None:
        self._next.put(True)


@dataclass
class LessonSession:
    lesson: Lesson
    directory: Path
    answers: BrowserAnswers
    cancelled: threading.Event
    thread: threading.Thread | None = None
    player: LessonPlayer | None = None
    narration: list[dict] = field(default_factory=list)
    result: LessonResult | None = None
    error: str | None = None
    finished: bool = False


def course_json() -> list[dict]:
    return [{**lesson.as_listing(), "summary": " ".join(lesson.summary.split()), "pages": len(lesson.pages)}
            for lesson in course()]


class LessonControl:
    """At most one lesson at a time per dashboard; `on_lab` is told the directory of its lab."""

    def __init__(self, lab_dir: Path, on_lab) -> None:
        self.lab_dir = Path(lab_dir)
        self.on_lab = on_lab
        self.session: LessonSession | None = None
        self._lock = threading.Lock()

    def command(self, body: object) -> dict:
        if not isinstance(body, dict) or not isinstance(body.get("action"), str):
            raise ScenarioCommandError("The body must be a JSON object with an action (start, answer, next, stop)",
                                       400)
        action = body["action"]
        with self._lock:
            if action == "start":
                self._start(body)
            elif action in ("answer", "next", "stop"):
                s = self.session
                if s is None or s.finished:
                    raise ScenarioCommandError(f"No lesson is playing to {action}; start one first")
                if action == "stop":
                    s.cancelled.set()
                elif action == "next":
                    if s.answers.waiting != "next":
                        raise ScenarioCommandError("The lesson does not wait for Next now")
                    s.answers.go_on()
                else:
                    choice = body.get("choice")
                    if s.answers.waiting != "answer":
                        raise ScenarioCommandError("The lesson does not wait for an answer now")
                    asking = max((i for i, o in enumerate(s.player.outcomes) if o.reached), default=None)
                    q = s.lesson.pages[asking].question if asking is not None else None
                    if not isinstance(choice, int) or q is None or not 1 <= choice <= len(q.choices):
                        raise ScenarioCommandError("answer needs choice, the number of a choice", 400)
                    s.answers.give(choice)
                    deadline = time.monotonic() + 2
                    while s.answers.waiting == "answer" and time.monotonic() < deadline:
                        time.sleep(0.02)  # the player took it: the status shows the reveal
            else:
                raise ScenarioCommandError(f"Unknown action {action!r}; allowed: start, answer, next, stop", 400)
        return self.status()

    def _start(self, body: dict) -> None:
        if self.session is not None and not self.session.finished:
            raise ScenarioCommandError(f"Lesson {self.session.lesson.name} is still playing; stop it first")
        unknown = sorted(set(body) - {"action", "name"})
        if unknown:
            raise ScenarioCommandError(f"start takes name; unknown: {', '.join(unknown)}", 400)
        try:
            lesson = find_lesson(str(body.get("name")))
        except LessonError as e:
            raise ScenarioCommandError(str(e), 400) from None
        directory = self.lab_dir / LESSONS_DIR / lesson.name
        previous = LabCluster(directory)
        if previous.cluster_file.exists():  # the lab a former play kept: the lab's own `down`
            try:
                previous.down()
            except LabError as e:
                raise ScenarioCommandError(f"The lab of the last lesson in {directory} does not stop: {e}") from None
        directory.mkdir(parents=True, exist_ok=True)
        cancelled = threading.Event()
        session = LessonSession(lesson, directory, BrowserAnswers(cancelled), cancelled)

        def say(line: str) -> None:
            session.narration.append({"ts": round(time.time() * 1000, 1), "text": line})

        def play() -> None:
            try:
                session.result = play_lesson(lesson, directory, say=say, answers=session.answers,
                                             cancelled=cancelled, keep=True,
                                             on_player=lambda p: setattr(session, "player", p),
                                             on_wait=lambda: self.on_lab(directory))
            except Cancelled:
                session.error = "stopped"
            except Exception as e:  # shown on the page; the dashboard goes on
                session.error = f"{type(e).__name__}: {e}"
            finally:
                session.finished = True

        session.thread = threading.Thread(target=play, name=f"lesson-{lesson.name}", daemon=True)
        self.session = session
        session.thread.start()

    def stop(self) -> None:
        """Stop a lesson in progress (the dashboard is going away); the runner tears its lab down."""
        if self.session is not None and not self.session.finished:
            self.session.cancelled.set()
            self.session.thread.join(60)

    def status(self) -> dict:
        s = self.session
        if s is None:
            return {"state": "idle"}
        pages = []
        outcomes = s.player.outcomes if s.player else []
        for index, outcome in enumerate(outcomes):
            if not outcome.reached:
                break
            page = s.lesson.pages[index]
            row = {"index": index, "title": page.title, "text": " ".join(page.text.split()),
                   "look": " ".join(page.look.split()), "question": None, "answer": outcome.answer,
                   "correct": outcome.correct, "revealed": outcome.revealed, "closed": outcome.closed}
            if page.question is not None:
                q = page.question
                row["question"] = {"kind": q.kind, "ask": " ".join(q.ask.split()), "choices": list(q.choices)}
                if outcome.revealed:
                    row["question"].update(right=q.answer, why=" ".join(q.why.split()))
            if outcome.closed:
                row.update(held=outcome.held, failures=outcome.failures)
            pages.append(row)
        waiting = s.answers.waiting
        state = "finished" if s.finished else "waiting" if waiting else "running"
        return {"state": state, "lesson": s.lesson.name, "title": s.lesson.title, "minutes": s.lesson.minutes,
                "summary": " ".join(s.lesson.summary.split()), "lab": str(s.directory), "waiting": waiting,
                "pages": pages, "of": len(s.lesson.pages), "narration": s.narration[-200:], "error": s.error,
                "result": s.result.as_json() if s.finished and s.result is not None else None}

"""Lessons as data (DESIGN §20): a lesson is a live lab walked through one idea at a time.

A lesson file holds its name, title, length in minutes, topics and a note for the teacher, the cluster it runs
on (as a scenario's `[cluster]`), and pages. Each page has a title, the text a learner reads, where to look on
the dashboard, an optional question and the steps that then run on the cluster -- a scenario's steps, checked
by the same table (zkbroker/lab/scenario.py: STEPS, CONDITIONS), so `wait` and `expect` steps are the claims
the page makes about what the cluster does:

    name = "registration"
    title = "Registration and ephemeral znodes"
    minutes = 10
    topics = ["ephemeral znodes", "ZooKeeper sessions"]
    summary = "A broker exists for the cluster exactly as long as its ZooKeeper session"
    teacher = "What to stress, and the misconceptions that come up"

    [cluster]
    brokers = 3
    config = { "zookeeper.session.timeout.ms" = 3000 }

    [[pages]]
    title = "A crash"
    text = "We SIGKILL broker 2 ..."
    look = "The cluster strip: broker 2's process is dead, its session still owns /brokers/ids/2"

    [pages.question]
    kind = "predict"          # or "choice": a question about an idea, answered before the steps run
    ask = "Right after the kill, is /brokers/ids/2 still there?"
    choices = ["No: it vanishes with the process", "Yes: until ZooKeeper expires broker 2's session"]
    answer = 2                # 1-based
    hint = "What does ZooKeeper know of a process?"
    why = "An ephemeral znode belongs to a session, not to a process ..."
    misconception = "Learners expect ZooKeeper to notice the crash; it notices only silence."

    [[pages.steps]]
    action = "kill"
    broker = 2

    [[pages.steps]]
    action = "expect"
    condition = "registered"
    broker = 2

A predict question's answer is what the page's claims then check on the live cluster.

`lab` says which lab the lesson needs: "zookeeper" (the default: 0.8.2's brokers on a ZooKeeper ensemble) or
"kraft" (a quorum of KRaft controllers, `[cluster] controllers = 1|3|5`, no ZooKeeper; its steps name
controllers as a KRaft scenario's do, DESIGN §17).
"""

from __future__ import annotations

import importlib.resources
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zkbroker.lab.scenario import (
    CLUSTER_FIELDS,
    ENSEMBLE_SIZES,
    QUORUM_SIZES,
    VERDICTS,
    Checker,
    ModeSpec,
    Names,
    Scenario,
    ScenarioError,
    Step,
    check_step,
    server_settings,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, before it joined the standard library
    import tomli as tomllib

# The lessons shipped in the package (zkbroker/lab/lessons/NAME.toml), in the order a course takes them.
COURSE = ("registration", "controller-election", "failover-session-timeout", "zombie-controller", "isr-hw-acks",
          "kafka-1211-leader-epochs", "consumer-herd", "kraft-election")
# The mode a lesson's lab runs in: 0.8.2's behaviour, with the lesson's own configuration.
LESSON_MODE = "0.8"
# The labs a lesson may ask for (its `lab`), and the scenario mode each one runs: a ZooKeeper lab in 0.8.2's
# behaviour, a KRaft lab in Kafka 3.7's quorum.
LABS = {"zookeeper": LESSON_MODE, "kraft": "kraft"}
QUESTION_KINDS = ("choice", "predict")

_STR = (str,)
_TOP = {"name": _STR, "title": _STR, "minutes": (int,), "topics": (list,), "summary": _STR, "teacher": _STR,
        "expect": _STR, "lab": _STR, "cluster": (dict,), "pages": (list,)}
_PAGE = {"title": _STR, "text": _STR, "look": _STR, "teacher": _STR, "question": (dict,), "steps": (list,)}
_QUESTION = {"kind": _STR, "ask": _STR, "choices": (list,), "answer": (int,), "hint": _STR, "why": _STR,
             "misconception": _STR}


class LessonError(ScenarioError):
    """A lesson file that cannot be used; the message starts with `FILE:LINE:`."""


@dataclass(frozen=True)
class Question:
    kind: str
    ask: str
    choices: tuple[str, ...]
    answer: int  # 1-based, as the learner types it
    hint: str = ""
    why: str = ""
    misconception: str = ""


@dataclass(frozen=True)
class Page:
    title: str
    text: str
    look: str = ""
    teacher: str = ""
    question: Question | None = None
    steps: tuple[Step, ...] = ()


@dataclass(frozen=True)
class Lesson:
    name: str
    title: str
    minutes: int
    topics: tuple[str, ...]
    summary: str
    teacher: str
    pages: tuple[Page, ...]
    scenario: Scenario  # the lab and every page's steps in order: what the scenario runner plays
    file: str = ""
    lab: str = "zookeeper"  # which lab it needs (LABS)

    @property
    def mode(self) -> str:
        """The scenario mode its lab runs in."""
        return LABS[self.lab]

    def as_listing(self) -> dict:
        return {"name": self.name, "title": self.title, "minutes": self.minutes, "topics": list(self.topics)}


def load_lesson(path: str | Path) -> Lesson:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise LessonError(f"{path}: cannot read the lesson ({e.strerror})") from None
    return parse_lesson(text, str(path))


def course() -> list[Lesson]:
    """Every lesson shipped in the package, in COURSE's order (any other file after them, by name)."""
    folder = importlib.resources.files("zkbroker.lab") / "lessons"
    files = {entry.name.removesuffix(".toml"): entry for entry in folder.iterdir() if entry.name.endswith(".toml")}
    order = [n for n in COURSE if n in files] + sorted(n for n in files if n not in COURSE)
    return [parse_lesson(files[name].read_text(), f"zkbroker/lab/lessons/{name}.toml") for name in order]


def find_lesson(name: str) -> Lesson:
    lessons = course()
    for lesson in lessons:
        if lesson.name == name:
            return lesson
    raise LessonError(f"No lesson {name!r}; there are: {', '.join(lesson.name for lesson in lessons)}")


def parse_lesson(text: str, filename: str = "<lesson>") -> Lesson:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line = re.search(r"at line (\d+)", str(e))
        raise LessonError(f"{filename}:{line.group(1) if line else 1}: not valid TOML: {e}") from None
    try:
        return _lesson(doc, Checker(text, filename), filename)
    except LessonError:
        raise
    except ScenarioError as e:  # a step's mistake, found by the scenario checker
        raise LessonError(str(e)) from None


def _lesson(doc: dict, check: Checker, filename: str) -> Lesson:
    check.fields(doc, _TOP, ())
    for key in ("name", "title", "minutes", "summary", "pages"):
        check.require(doc, key, ())
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]*", doc["name"]):
        check.fail((), "name", f"name {doc['name']!r} must be lower-case letters, digits, dots and dashes")
    if not all(isinstance(topic, str) for topic in doc.get("topics", [])):
        check.fail((), "topics", "topics is a list of strings")
    expect = doc.get("expect", "ok")
    if expect not in VERDICTS:
        check.fail((), "expect", f"unknown verdict {expect!r}; allowed: {', '.join(VERDICTS)}")
    lab = doc.get("lab", "zookeeper")
    if lab not in LABS:
        check.fail((), "lab", f"unknown lab {lab!r}; allowed: {', '.join(LABS)}")
    kraft = lab == "kraft"
    cluster = doc.get("cluster", {})
    check.fields(cluster, CLUSTER_FIELDS, ("cluster",))
    # What the other lab has would be silently ignored: refused instead
    other = "zookeepers" if kraft else "controllers"
    if other in cluster:
        check.fail(("cluster",), other, f"{other} belongs to a {'ZooKeeper' if kraft else 'KRaft'} lab; this "
                                        f"lesson's lab is {lab!r}" + ("" if kraft else " (lab = \"kraft\" for one)"))
    zookeepers, brokers = cluster.get("zookeepers", 1), cluster.get("brokers", 0 if kraft else 3)
    controllers = cluster.get("controllers", 3)
    if zookeepers not in ENSEMBLE_SIZES:
        check.fail(("cluster",), "zookeepers", f"zookeepers must be one of {', '.join(map(str, ENSEMBLE_SIZES))}")
    if controllers not in QUORUM_SIZES:
        check.fail(("cluster",), "controllers", f"controllers must be one of {', '.join(map(str, QUORUM_SIZES))}")
    if brokers < (0 if kraft else 1):
        check.fail(("cluster",), "brokers", "a lesson needs at least one broker (a KRaft one may have none)")
    modes = {LABS[lab]: ModeSpec({}, expect)}
    names = Names(modes)
    pages, steps = [], []
    questions = 0
    for index, page in enumerate(doc["pages"]):
        where = ("pages", index)
        if not isinstance(page, dict):
            check.fail(where, None, "each page is a [[pages]] table")
        check.fields(page, _PAGE, where, what="field of a page")
        for key in ("title", "text"):
            check.require(page, key, where)
        question = None
        if "question" in page:
            question = _question(check, ("pages", "question", questions), page["question"])
            questions += 1
        page_steps = []
        for step in page.get("steps", []):
            page_steps.append(check_step(check, ("pages", "steps", len(steps)), step, modes, names, brokers,
                                         zookeepers, controllers))
            steps.append(page_steps[-1])
        if question is not None and question.kind == "predict" and not any(
                s.action in ("wait", "expect") for s in page_steps):
            check.fail(where, "question", "a predict question needs a wait or expect step on its page: the claim "
                                          "that checks the answer")
        pages.append(Page(page["title"], page["text"], page.get("look", ""), page.get("teacher", ""), question,
                          tuple(page_steps)))
    if not pages:
        check.fail((), "pages", "a lesson needs at least one page")
    needs_network = [s for s in steps if s.action in ("partition", "heal")]
    if needs_network and not cluster.get("network", False):
        check.fail_at(needs_network[0].line, f"a {needs_network[0].action} step needs network = true in [cluster]")
    scenario = Scenario(doc["name"], "lesson", doc["title"], brokers, zookeepers, cluster.get("network", False),
                        server_settings(cluster.get("config", {})), modes, steps,
                        why_one_mode="a lesson plays one lab", file=filename,
                        settle_ms=cluster.get("settle_ms", 10000), controllers=controllers)
    return Lesson(doc["name"], doc["title"], doc["minutes"], tuple(doc.get("topics", [])), doc["summary"],
                  doc.get("teacher", ""), tuple(pages), scenario, filename, lab)


def _question(check: Checker, where: tuple, question: Any) -> Question:
    check.fields(question, _QUESTION, where, what="field of a question")
    for key in ("kind", "ask", "choices", "answer", "why"):
        check.require(question, key, where)
    if question["kind"] not in QUESTION_KINDS:
        check.fail(where, "kind", f"unknown kind of question {question['kind']!r}; allowed: "
                                  f"{', '.join(QUESTION_KINDS)}")
    choices = question["choices"]
    if len(choices) < 2 or not all(isinstance(choice, str) for choice in choices):
        check.fail(where, "choices", "choices is a list of at least two strings")
    if not 1 <= question["answer"] <= len(choices):
        check.fail(where, "answer", f"answer is the number of a choice, 1 to {len(choices)}")
    return Question(question["kind"], question["ask"], tuple(choices), question["answer"], question.get("hint", ""),
                    question["why"], question.get("misconception", ""))


@dataclass
class PageOutcome:
    """What happened on one page of a played lesson."""

    title: str
    held: bool = True  # every claim of its steps held (a page that claims nothing holds)
    reached: bool = False
    answer: int | None = None
    correct: bool | None = None
    failures: list[str] = field(default_factory=list)
    revealed: bool = False  # the answer and why were shown (a choice once answered, a prediction after its steps)
    closed: bool = False  # its steps have run (or it has none and was shown)

    def as_json(self) -> dict:
        out: dict = {"title": self.title, "held": self.held}
        if self.answer is not None:
            out.update(answer=self.answer, correct=self.correct)
        if self.failures:
            out["failures"] = self.failures
        return out

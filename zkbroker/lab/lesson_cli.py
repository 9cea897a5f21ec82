"""`zkbroker lab lesson list|show|run` (DESIGN §20) and their terminal output.

`show` is the teacher's page: every page with its question, the answer, why, and the usual misconception.
`run --answers auto` plays a lesson without a person and checks every claim it makes; with `--json` stdout
holds only `{"lesson": NAME, "passed": ..., "steps": [{"title": ..., "held": ...}]}` and the lesson's words go
to stderr. `run` exits 0 when the lesson passed, 1 otherwise, 2 for a lesson file with a mistake.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from zkbroker.lab.lesson import Lesson, LessonError, course, find_lesson, load_lesson


def add_lesson_commands(actions: argparse._SubParsersAction) -> None:
    lesson = actions.add_parser("lesson", help="lessons on a live lab: controller election one idea at a time")
    commands = lesson.add_subparsers(dest="lesson_command", metavar="COMMAND", required=True)
    listing = commands.add_parser("list", help="the course: each lesson's name, minutes and title")
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    listing.set_defaults(run=_list)
    show = commands.add_parser("show", help="the teacher's page: pages, questions, answers and misconceptions")
    show.add_argument("name", metavar="NAME")
    show.set_defaults(run=_show)
    run = commands.add_parser("run", help="play a lesson on a lab of its own")
    which = run.add_mutually_exclusive_group(required=True)
    which.add_argument("name", metavar="NAME", nargs="?", help="a lesson of the course")
    which.add_argument("--file", metavar="F", help="a lesson file of your own")
    run.add_argument("--dir", metavar="DIR", help="where the lab goes (default: a temporary directory)")
    run.add_argument("--answers", choices=("auto",), help="auto: answer every question with the lesson's answer")
    run.add_argument("--json", action="store_true", help="print the outcome as JSON (the lesson to stderr)")
    run.set_defaults(run=_run)


def _list(args: argparse.Namespace) -> int:
    lessons = course()
    if args.json:
        print(json.dumps([lesson.as_listing() for lesson in lessons], indent=2))
        return 0
    rows = [("NAME", "MINUTES", "TITLE")] + [(le.name, str(le.minutes), le.title) for le in lessons]
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[2])
    return 0


def _show(args: argparse.Namespace) -> int:
    print(format_teacher_page(find_lesson(args.name)))
    return 0


def format_teacher_page(lesson: Lesson) -> str:
    lines = [f"{lesson.title} ({lesson.name}, {lesson.minutes} min)", f"Topics: {', '.join(lesson.topics)}",
             " ".join(lesson.summary.split())]
    if lesson.lab == "kraft":
        lines.append(f"Lab: a KRaft quorum of {lesson.scenario.controllers} controllers, no ZooKeeper")
    if lesson.teacher:
        lines.append(f"For the teacher: {' '.join(lesson.teacher.split())}")
    from zkbroker.lab.runner import describe_step

    for number, page in enumerate(lesson.pages, start=1):
        lines += ["", f"{number}. {page.title}"]
        if page.look:
            lines.append(f"   Look: {' '.join(page.look.split())}")
        if page.question is not None:
            q = page.question
            lines.append(f"   Q ({q.kind}): {q.ask}")
            lines += [f"     {'*' if i == q.answer else ' '}{i}) {choice}" for i, choice in enumerate(q.choices, 1)]
            lines.append(f"   Why: {' '.join(q.why.split())}")
            if q.misconception:
                lines.append(f"   Usual misconception: {' '.join(q.misconception.split())}")
        if page.teacher:
            lines.append(f"   Note: {' '.join(page.teacher.split())}")
        for step in page.steps:
            lines.append(f"   - {describe_step(step)}")
    return "\n".join(lines)


def _run(args: argparse.Namespace) -> int:
    from zkbroker.lab.lesson_runner import play_lesson
    from zkbroker.lab.scenario_cli import SCENARIO_MISTAKE, _interrupt, _quiet_zookeeper_client

    try:
        lesson = load_lesson(args.file) if args.file else find_lesson(args.name)
    except LessonError as e:
        print(e, file=sys.stderr)
        return SCENARIO_MISTAKE
    out = sys.stderr if args.json else sys.stdout

    def say(line: str) -> None:
        print(line, file=out, flush=True)

    _quiet_zookeeper_client()
    previous = signal.signal(signal.SIGTERM, _interrupt)  # `kill` of the player tears its lab down too
    try:
        result = play_lesson(lesson, Path(args.dir) if args.dir else None, args.answers == "auto", say)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if args.json:
        print(json.dumps(result.as_json()))
    else:
        held = sum(p.held for p in result.pages)
        say("")
        say(f"{lesson.name}: {'passed' if result.passed else 'NOT passed'} ({held} of {len(result.pages)} pages held)")
        for page in result.pages:
            for failure in page.failures:
                say(f"  {page.title}: {failure}")
        for failure in result.failures:
            say(f"  {failure}")
    return 0 if result.passed else 1

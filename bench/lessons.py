"""Lessons (issue 29): every lesson of the course played with --answers auto on a lab of its own, one after
another, with each one's time, whether every claim held, and its pages.

The reference is the lesson's own length for a person (its `minutes`, 10 to 20): played without a person a
lesson costs its lab's start, its waits (session timeouts, mostly) and its teardown, and should take a small
part of that. `--json FILE` also writes the figures.

Usage: python bench/lessons.py [--only NAME[,NAME...]] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zkbroker.lab.lesson import course  # noqa: E402
from zkbroker.lab.lesson_runner import play_lesson  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", metavar="NAME[,NAME...]", help="play only these lessons")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    logging.getLogger("kazoo").addHandler(logging.NullHandler())
    logging.getLogger("kazoo").propagate = False
    lessons = course()
    if args.only:
        wanted = set(args.only.split(","))
        lessons = [lesson for lesson in lessons if lesson.name in wanted]
    rows = []
    for lesson in lessons:
        began = time.monotonic()
        result = play_lesson(lesson, auto=True, say=lambda line: None)
        seconds = time.monotonic() - began
        held = sum(page.held for page in result.pages)
        rows.append({"lesson": lesson.name, "passed": result.passed, "seconds": round(seconds, 1),
                     "pages": len(result.pages), "held": held, "minutes_for_a_person": lesson.minutes})
        print(f"{lesson.name:<28} {'passed' if result.passed else 'NOT passed':<10} {seconds:6.1f} s   "
              f"{held}/{len(result.pages)} pages held   (a person: {lesson.minutes} min)", flush=True)
        for page in result.pages:
            for failure in page.failures:
                print(f"    {page.title}: {failure}", flush=True)
        for failure in result.failures:
            print(f"    {failure}", flush=True)
    total = sum(row["seconds"] for row in rows)
    print(f"{'all':<28} {sum(r['passed'] for r in rows)}/{len(rows)} passed {total:6.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"lessons": rows, "seconds": round(total, 1)}, indent=2))
    return 0 if all(row["passed"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Runnable blocks in the docs (DESIGN §20): how they are marked, found and compared.

A fenced block whose info string is `console runnable` holds commands, each on a line that starts with `$ `,
each followed by the lines it prints on stdout. The suite runs the blocks of README.md and then of docs/*.md
(by name), in order, in one shell in one working directory, so variables and files carry from one block to
the next, and a lab started in one serves the rest. Words after `runnable`:

- `settles`: the commands read a cluster that is still moving (a controller after a kill); each is run again
  until its output matches, for at most SETTLE_S seconds.
- `last`: the block runs after every other (it brings the shared lab down).

Each command must exit 0 (end it with `; echo "exit status $?"` where a failure is the point) and print what
the block shows: lines are compared with their runs of blanks made one space, `...` within a line stands for
any text, and a line that is only `...` for any number of lines. A block whose info string is `toml file=NAME`
(or another language with `file=NAME`) is written to NAME in the working directory before the commands after
it run: the file a reader would save.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

SETTLE_S = 30.0
_FENCE = re.compile(r"^```(.*)$")


@dataclass
class Command:
    line: str
    expected: list[str]
    source: str  # FILE:LINE, for the failure message


@dataclass
class Block:
    source: str
    settles: bool = False
    last: bool = False
    commands: list[Command] = field(default_factory=list)
    file: tuple[str, str] | None = None  # (name, text) of a `file=NAME` block


def blocks_of(path: Path, root: Path) -> list[Block]:
    """The runnable and file blocks of one Markdown file, in order."""
    lines = path.read_text().splitlines()
    name = str(path.relative_to(root))
    found = []
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if not fence:
            index += 1
            continue
        words = fence.group(1).split()
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        body = lines[index + 1:end]
        target = next((w.removeprefix("file=") for w in words if w.startswith("file=")), None)
        if target is not None:
            found.append(Block(f"{name}:{index + 1}", file=(target, "\n".join(body) + "\n")))
        elif "runnable" in words:
            block = Block(f"{name}:{index + 1}", settles="settles" in words, last="last" in words)
            for offset, text in enumerate(body):
                if text.startswith("$ "):
                    block.commands.append(Command(text[2:], [], f"{name}:{index + 2 + offset}"))
                elif block.commands:
                    block.commands[-1].expected.append(text)
            found.append(block)
        index = end + 1
    return found


def docs_blocks(root: Path) -> list[Block]:
    """Every file and runnable block of README.md and docs/*.md, in the order they run (`last` ones last)."""
    files = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    every = [block for path in files for block in blocks_of(path, root)]
    return [b for b in every if not b.last] + [b for b in every if b.last]


def _normal(text: str) -> str:
    return " ".join(text.split())


def matches(expected: list[str], output: str) -> bool:
    """Whether `output` is what `expected` shows (see the module's docstring for `...`)."""
    patterns = []
    for line in expected:
        if line.strip() == "...":
            patterns.append(None)
        else:
            parts = [re.escape(p) for p in _normal(line).split("...")]
            patterns.append(re.compile(".*".join(parts) + r"\Z", re.DOTALL))
    actual = [_normal(line) for line in output.splitlines()]
    return _match(patterns, actual)


def _match(patterns: list, actual: list[str]) -> bool:
    if not patterns:
        return not actual
    head, rest = patterns[0], patterns[1:]
    if head is None:
        return any(_match(rest, actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and head.match(actual[0]) is not None and _match(rest, actual[1:])

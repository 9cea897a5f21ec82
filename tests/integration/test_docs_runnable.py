"""The docs cannot drift from the code (DESIGN §20): every runnable block of README.md (its tour) and docs/*.md
runs, in order, in one shell against one lab, and prints what the docs show (tests/docs_blocks.py says how
blocks are marked and compared)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.docs_blocks import SETTLE_S, Command, docs_blocks, matches

ROOT = Path(__file__).resolve().parents[2]
COMMAND_TIMEOUT_S = 120.0


class Shell:
    """One bash for every block, so that variables (`eval "$(zkbroker lab env ...)"`) carry over; each command
    reads /dev/null, and its end is a marker line with its exit status."""

    def __init__(self, cwd: Path) -> None:
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               "PYTHONPATH": str(ROOT)}
        self.stderr_file = cwd / "shell.stderr"
        self.process = subprocess.Popen(["bash", "--noprofile", "--norc"], cwd=cwd, env=env, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.stderr_file.open("w"), start_new_session=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def run(self, command: str, timeout_s: float = COMMAND_TIMEOUT_S) -> tuple[int, str]:
        marker = f"__end_of_command_{uuid.uuid4().hex}__"
        before = self.stderr_file.stat().st_size
        self.process.stdin.write(f"{{ {command}\n}} < /dev/null\necho \"{marker} $?\"\n")
        self.process.stdin.flush()
        out = []
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"`{command}` did not end within {timeout_s:.0f} s; it printed:\n{''.join(out)}")
            if line is None:
                pytest.fail(f"the shell ended during `{command}`")
            if line.startswith(marker):
                status = int(line.split()[-1])
                if status != 0:
                    with self.stderr_file.open() as f:
                        f.seek(before)
                        pytest.fail(f"`{command}` exited {status}:\n{''.join(out)}{f.read()}")
                return status, "".join(out)
            out.append(line)

    def close(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(10)


def adapted(command: Command) -> str:
    """What the suite runs: a lab on ports the kernel picks, so that labs of tests side by side never meet."""
    return command.line.replace("zkbroker lab up ", "zkbroker lab up --base-port 0 ")


def test_every_runnable_block_in_the_readme_and_docs_prints_what_it_shows(tmp_path):
    blocks = docs_blocks(ROOT)
    assert sum(len(b.commands) for b in blocks) >= 5, "the tour's blocks are missing"
    shell = Shell(tmp_path)
    try:
        for block in blocks:
            if block.file is not None:
                name, text = block.file
                (tmp_path / name).write_text(text)
                continue
            for command in block.commands:
                deadline = time.monotonic() + (SETTLE_S if block.settles else 0)
                while True:
                    _, output = shell.run(adapted(command))
                    if matches(command.expected, output) or time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
                assert matches(command.expected, output), (
                    f"{command.source}: `{command.line}` printed\n{output}\nand the docs show\n"
                    + "\n".join(command.expected))
    finally:
        if (tmp_path / "lab" / "cluster.json").exists():  # a block failed before the tour's `lab down`
            subprocess.run([sys.executable, "-m", "zkbroker", "lab", "down", "--dir", str(tmp_path / "lab")],
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, timeout=120)
        shell.close()

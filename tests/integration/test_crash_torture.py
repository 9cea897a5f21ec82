"""The crash torture of bench/crash_torture.py in `make test`: a short run of it -- real child processes
driving the log, SIGKILLed at points of its writes, each recovery checked -- must find no violation.

The script runs in its own process: its child seams replace functions of `os` and of the log modules, which
must not happen inside the test run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RUNS = 10


@pytest.mark.alone  # CPU-bound, with a bound on its run time
@pytest.mark.timeout(120)
def test_a_short_crash_torture_finds_no_violation():
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "crash_torture.py"), "--runs", str(RUNS), "--seed", "15",
         "--chain-length", "5"],
        cwd=ROOT, capture_output=True, text=True, timeout=110,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"crash torture of the log: {RUNS} runs" in result.stdout
    assert "violations: 0 " in result.stdout

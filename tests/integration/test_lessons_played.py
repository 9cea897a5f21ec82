"""Lessons played without a person (DESIGN §20): `lab lesson run NAME --answers auto --json` on a lab of its own
checks every claim the lesson makes; the suite plays the first two of the course (bench/lessons.py plays them
all)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["registration", "controller-election"])
def test_a_lesson_played_with_auto_answers_holds_every_claim(name, tmp_path):
    played = subprocess.run([sys.executable, "-m", "zkbroker", "lab", "lesson", "run", name, "--answers", "auto",
                             "--json", "--dir", str(tmp_path / "lab")], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert played.returncode == 0, played.stderr[-4000:]
    result = json.loads(played.stdout)
    assert result["lesson"] == name and result["passed"] is True
    assert result["steps"] and all(step["held"] for step in result["steps"])
    assert all(step.get("correct", True) for step in result["steps"])
    assert not (tmp_path / "lab" / "cluster.json").exists()  # its lab is down

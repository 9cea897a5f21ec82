"""The suite's own layout: pytest imports test files by their base name (its default import mode, with no
__init__.py in the test folders), so two test files of one name anywhere under tests/ break collection for both."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_files_share_a_name():
    names = Counter(path.name for path in TESTS.rglob("test_*.py") if "node_modules" not in path.parts)
    assert [name for name, count in names.items() if count > 1] == []

"""tests/conftest.py's rule: with CI set a skipped test fails, naming why it would have skipped; only the
Docker backend's skip stays a skip. Run on a small pytest session of its own (pytester)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).parents[1] / "conftest.py"

SUITE = """
import pytest
from tests.real_tools import require

def test_needs_a_missing_tool(monkeypatch):
    monkeypatch.setenv("PATH", "")
    require("kcat")

@pytest.mark.skipif(True, reason="a library is missing")
def test_marked_skip():
    pass

def test_docker_backend():
    pytest.skip("no Docker daemon answers; the testcontainers backend cannot run here")

def test_plain():
    pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_suite=SUITE)
    return pytester


@pytest.mark.parametrize("ci", ["true", "1"])
def test_with_ci_set_a_skip_fails_except_the_docker_one(suite, monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    result = suite.runpytest("-rA")
    result.assert_outcomes(passed=1, failed=1, errors=1, skipped=1)  # a skipif mark skips in setup
    result.stdout.fnmatch_lines(["*would have skipped: kcat is not installed (Debian package kcat*",
                                 "*would have skipped: a library is missing*"])


@pytest.mark.parametrize("ci", [None, "false"])
def test_without_ci_a_skip_stays_a_skip_with_its_reason(suite, monkeypatch, ci):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    result = suite.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines(["*kcat is not installed (Debian package kcat*"])

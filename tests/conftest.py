"""No silent skips: with the CI environment variable set, a test that skips fails instead, saying why it
would have skipped. Only the Docker backend may skip, since a CI machine need not run a Docker daemon."""

from __future__ import annotations

import os

import pytest

from tests.real_tools import ci_is_set
from zkbroker.lab.spark_cluster import QUICK_JVM_OPTS

pytest_plugins = ["tests.side_by_side"]

# Every Spark driver the tests start (the `spark` fixture, spark-ingest commands, the demo) is short-lived and
# reads little: C1 only and the serial collector halve its CPU, and the suite is CPU-bound on two cores.
# spark-submit reads SPARK_SUBMIT_OPTS; users' own runs keep the JVM's defaults.
os.environ.setdefault("SPARK_SUBMIT_OPTS", QUICK_JVM_OPTS)

# The one skip CI allows: tests/integration/test_zookeeper_launcher.py's Docker backend, with no daemon.
ALLOWED_SKIP = "no Docker daemon answers"


def skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not ci_is_set() or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = skip_reason(report)
    if reason.startswith(ALLOWED_SKIP):
        return
    report.outcome = "failed"
    report.longrepr = f"CI is set, so this test may not skip; it would have skipped: {reason}"

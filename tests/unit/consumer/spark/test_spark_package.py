"""pyspark stays inside consumer/spark/: no other module of the product imports it, and the command line
(which offers `spark-ingest`) builds without loading Spark."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
SPARK_PACKAGE = ROOT / "consumer" / "spark"


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_only_consumer_spark_imports_pyspark():
    importers = []
    for package in ("zkbroker", "controller", "consumer"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if SPARK_PACKAGE in path.parents:
                continue
            if any(name.split(".")[0] == "pyspark" for name in imported_modules(path)):
                importers.append(str(path.relative_to(ROOT)))
    assert importers == []


def test_the_command_line_builds_without_loading_spark():
    script = ("import sys; from zkbroker.cli import build_parser; build_parser(); "
              "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'pyarrow')))")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         check=True)
    assert out.stdout.strip() == "[]"

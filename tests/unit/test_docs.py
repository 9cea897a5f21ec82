"""The README stays true: its quickstart is the two commands, and it lists every server.properties key."""

from __future__ import annotations

from pathlib import Path

from zkbroker.config import SERVER_CONFIGS

ROOT = Path(__file__).resolve().parents[2]


def test_readme_quickstart_is_the_two_commands_and_ci_runs_make_test():
    readme = (ROOT / "README.md").read_text()
    assert "```\nmake demo\nmake test\n```" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_readme_lists_every_server_properties_key():
    readme = (ROOT / "README.md").read_text()
    missing = [name for name in SERVER_CONFIGS if f"| `{name}` |" not in readme]
    assert not missing, f"README's key table lacks {missing}"

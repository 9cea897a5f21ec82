"""What the console tools share: `--property key=value` lists (0.8.2's CommandLineUtils.parseKeyValueArgs),
properties files, separators given with escapes, and integer options."""

from __future__ import annotations

from collections.abc import Iterable

from zkbroker.config import ConfigError, parse_properties
from zkbroker.tools.common import ToolError


def key_values(entries: Iterable[str] | None) -> dict[str, str]:
    out = {}
    for entry in entries or ():
        key, sep, value = entry.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"Invalid command line properties: {entry} (expected key=value)")
        out[key.strip()] = value
    return out


def properties_file(path: str | None) -> dict[str, str]:
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except OSError as e:
        raise ToolError(f"Cannot read {path}: {e.strerror or e}") from None
    except (UnicodeDecodeError, ConfigError) as e:
        raise ToolError(f"Cannot read {path}: {e}") from None


def separator(props: dict[str, str], name: str, default: str) -> bytes:
    """A separator property; a shell cannot easily pass a tab, so \\t, \\n and \\r are read as escapes."""
    text = props.get(name, default)
    return text.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r").encode("utf-8")


def flag_true(props: dict[str, str], name: str) -> bool:
    return props.get(name, "").strip().lower() == "true"

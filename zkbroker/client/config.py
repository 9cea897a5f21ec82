"""Client configurations (producer, consumers): a table of ConfigKeys resolved against what the user gave.

The keys, types and validators are the broker's (`zkbroker.config.ConfigKey`), so a client table reads like
the broker's and fails the same way: `Invalid value 'soon' for configuration linger.ms: not an integer`.
Values may be given as text (a .properties file, a `--property k=v` flag) or as Python values
(`{"linger.ms": 5, "auto.commit.enable": False}`); both go through the same parser. Unknown keys are
returned as warnings (`Property foo is not valid`), as 0.8.2's VerifiableProperties logged them.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from zkbroker.config import ConfigError, ConfigKey, resolve_keys

__all__ = ["ClientConfig", "ConfigError", "as_text", "resolve"]


def as_text(value: Any) -> str:
    """The text form of a value given in Python, for the table's parser."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(as_text(v) for v in value)
    return str(value)


def resolve(table: Mapping[str, ConfigKey], given: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Typed values for every key of `table` (given, fallback or default) and the warnings for unknown keys."""
    if not isinstance(given, Mapping):
        raise ConfigError(f"A configuration must be a mapping of names to values, not {type(given).__name__}.")
    warnings = [f"Property {name} is not valid" for name in sorted(given) if name not in table]
    values = resolve_keys(table, {name: as_text(value) for name, value in given.items()
                                  if name in table and value is not None})
    return values, warnings


class ClientConfig:
    """A validated client configuration: `cfg["key"]` is the typed value of any key of its table."""

    TABLE: Mapping[str, ConfigKey] = MappingProxyType({})

    def __init__(self, given: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        merged = dict(given or {})
        merged.update({k.replace("_", "."): v for k, v in overrides.items()})
        values, warnings = resolve(self.TABLE, merged)
        self._values = MappingProxyType(values)
        self.originals = MappingProxyType(merged)
        self.warnings = tuple(warnings)
        self.check()

    def check(self) -> None:
        """Rules between keys; subclasses raise ConfigError naming the key."""

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"{name} is not a {type(self).__name__} key") from None

    def invalid(self, name: str, reason: str) -> ConfigError:
        return ConfigError(f"Invalid value {as_text(self[name])!r} for configuration {name}: {reason}")

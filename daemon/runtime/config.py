"""The daemon's configuration and the client's initializationOptions applied to it, a bad value reported, not raised.

Config and its rows live in runtime/settings.py (the settings table); the options a client may set are the rows
with an initialization option.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from tabd.daemon.runtime.settings import SETTINGS, Config, ConfigError, Setting

__all__ = ["CLIENT_OPTIONS", "Config", "ConfigError", "apply_client_options"]

# initializationOptions key -> its row
CLIENT_OPTIONS: dict[str, Setting] = {s.spec.init: s for s in SETTINGS if s.spec.init}


def accepted_types(row: Setting) -> tuple[type, ...]:
    """The JSON types a client may send for a row: a number where a float goes, else exactly the row's type."""
    return (float, int) if row.type is float else (list, tuple) if row.type is tuple else (row.type,)


def apply_client_options(config: Config, options: Any) -> tuple[Config, list[str]]:
    """A copy of config with the client's initializationOptions applied, and one message per rejected value."""
    if options is None or options == []:  # Lua's empty table arrives as [] (Neovim sends {} that way)
        return config, []
    if not isinstance(options, dict):
        return config, [f"initializationOptions must be an object, got {type(options).__name__}; using defaults"]
    problems: list[str] = []
    updated = dataclasses.replace(config)
    for key, value in options.items():
        row = CLIENT_OPTIONS.get(key)
        if row is None:
            problems.append(f"unknown option {key!r} ignored (known: {', '.join(sorted(CLIENT_OPTIONS))})")
            continue
        if value is None:
            continue
        types = accepted_types(row)
        if row.type is tuple:  # a list adds to the command line's (--exclude and the client's globs both count)
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                problems.append(f"option {key!r} must be a list of strings, got {value!r}; ignored")
                continue
            value = getattr(updated, row.name) + tuple(value)
        elif not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            problems.append(f"option {key!r} must be {'/'.join(t.__name__ for t in types)}, got {value!r}; ignored")
            continue
        change: dict[str, Any] = {row.name: value}
        trial = dataclasses.replace(updated, **change)
        try:
            trial.validate()
        except ConfigError as exc:
            problems.append(f"option {key!r}: {exc}; ignored")
            continue
        updated = trial
    return updated, problems

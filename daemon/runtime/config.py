"""The daemon's configuration and the client's initializationOptions applied to it, a bad value reported, not raised.

Config and its rows live in runtime/settings.py (the settings table); the options a client may set are the rows
with an initialization option. Whatever a client sends, the session starts: each bad value is one message (bounded
in size: it may quote what was sent), unknown keys are one message together, and the value is ignored.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from tabd.daemon.runtime.settings import SETTINGS, Config, ConfigError, Setting, shown

__all__ = ["CLIENT_OPTIONS", "Config", "ConfigError", "apply_client_options", "shown"]

# initializationOptions key -> its row
CLIENT_OPTIONS: dict[str, Setting] = {s.spec.init: s for s in SETTINGS if s.spec.init}
# keys other servers' clients send that mean nothing to tabd but are no mistake: Copilot's (copilot-lsp,
# sidekick.nvim and copilot.el send them to any server they take for Copilot's), accepted without a word
FOREIGN_OPTIONS = frozenset({"editorInfo", "editorPluginInfo"})
MAX_MESSAGE_CHARS = 300  # one problem's message
MAX_LISTED_KEYS = 5  # unknown keys named in their one message
MAX_LIST_ITEMS = 1000  # strings in a list option (globs): more is no configuration anyone wrote

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
    unknown: list[str] = []
    updated = dataclasses.replace(config)
    for key, value in options.items():
        if key in FOREIGN_OPTIONS:
            continue
        row = CLIENT_OPTIONS.get(key)
        if row is None:
            unknown.append(key)
            continue
        try:
            updated, problem = _applied(updated, row, key, value)
        except Exception as exc:  # whatever a value does to a check, the session starts without it
            problem = f"option {key!r} could not be read ({type(exc).__name__}); ignored"
        if problem:
            problems.append(problem[:MAX_MESSAGE_CHARS])
    if unknown:
        names = ", ".join(shown(k) for k in unknown[:MAX_LISTED_KEYS])
        more = f" and {len(unknown) - MAX_LISTED_KEYS} more" if len(unknown) > MAX_LISTED_KEYS else ""
        word = "option" if len(unknown) == 1 else "options"
        problems.append(f"unknown {word} {names}{more} ignored (known: {', '.join(sorted(CLIENT_OPTIONS))})")
    return updated, problems


def _applied(config: Config, row: Setting, key: str, value: Any) -> tuple[Config, str]:
    """(config with one option applied, "") or (config unchanged, why not)."""
    if value is None:
        return config, ""
    types = accepted_types(row)
    if row.type is tuple:  # a list adds to the command line's (--exclude and the client's globs both count)
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            return config, f"option {key!r} must be a list of strings, got {shown(value)}; ignored"
        if len(value) > MAX_LIST_ITEMS:
            return config, f"option {key!r} has {len(value)} items, more than {MAX_LIST_ITEMS}; ignored"
        value = getattr(config, row.name) + tuple(value)
    elif not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
        return config, f"option {key!r} must be {'/'.join(t.__name__ for t in types)}, got {shown(value)}; ignored"
    if isinstance(value, str) and ("\x00" in value or not _encodable(value)):
        return config, f"option {key!r}: {shown(value)} holds a character no path or name can (NUL, a lone surrogate); ignored"
    trial = dataclasses.replace(config, **{row.name: value})
    try:
        trial.validate()
    except ConfigError as exc:
        return config, f"option {key!r}: {exc}; ignored"
    return trial, ""


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True

"""The local engines' names, declared once and without torch: what `--engine` accepts and the backend builds.

ENGINES are the names a user picks from; ALIASES maps an older name that is still accepted to the engine it
means, so that a command line written for an earlier tabd keeps working.
"""
from __future__ import annotations

ENGINES: tuple[str, ...] = ("auto", "native", "fast", "torch", "hf", "plain")
ALIASES: dict[str, str] = {}
CHOICES: tuple[str, ...] = ENGINES + tuple(ALIASES)  # every name --engine accepts


def canonical(name: str) -> str:
    """The engine a name means (an alias resolved); ValueError for a name that is neither."""
    if name in ENGINES:
        return name
    if name in ALIASES:
        return ALIASES[name]
    raise ValueError(f"unknown engine {name!r}: use {', '.join(ENGINES)}")

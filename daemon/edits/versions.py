"""A version or a year changed: `version = '23.3'` -> `'23.4'`, then `release = '23.3.0'` is due; `2009-2025` ->
`2009-2026` in a copyright line, then the same year in an f-string below.

A number that names a release (two or more parts, `23.3`, `1.2.0`) or a year (`1999`, `2025`) changed to another of
the same kind is the same number wherever it is written: in code, in a string, in a comment, and as the head of a
longer version (`23.3` in `23.3.0`). Each place is that number whole (no digit or `.digit` before it, no digit after
it), replaced by the new one. Other numbers (`5` -> `6`, `100` -> `200`) mean different things at different places
and are left to the tokens' context (synthesis.py).

Plain strings in, plain values out; synthesis.py asks here when it learns a change, and for its places.
"""
from __future__ import annotations

import re

from tabd.daemon.edits.tokens import spread

_VERSION = re.compile(r"\d+(?:\.\d+)+")
_YEAR = re.compile(r"(?:19|20)\d\d")


def learned(before: str, after: str, start: int, old_end: int, new_end: int) -> tuple[str, str] | None:
    """(the old number, the new one) when the change of before[start:old_end] into after[start:new_end] changes a
    version or a year into another of the same kind; else None."""
    run = spread(before, after, start, old_end, new_end, _in_number)
    if run is None or run[1] == run[2]:
        return None
    _, old, new = run
    for kind in (_VERSION, _YEAR):
        if kind.fullmatch(old) and kind.fullmatch(new):
            return old, new
    return None


def places(text: str, old: str) -> list[int]:
    """The offsets where `old` stands as a whole number (the head of a longer version too), in text order."""
    return [m.start() for m in re.finditer(r"(?<![\d.])" + re.escape(old) + r"(?!\d)", text)]


def _in_number(text: str, i: int) -> bool:
    """A digit, or a dot between two digits."""
    return text[i].isdigit() or (text[i] == "." and i > 0 and text[i - 1].isdigit() and text[i + 1:i + 2].isdigit())

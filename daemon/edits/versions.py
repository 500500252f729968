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

_VERSION = re.compile(r"\d+(?:\.\d+)+")
_YEAR = re.compile(r"(?:19|20)\d\d")


def learned(before: str, after: str, start: int, old_end: int, new_end: int) -> tuple[str, str] | None:
    """(the old number, the new one) when the change of before[start:old_end] into after[start:new_end] changes a
    version or a year into another of the same kind; else None."""
    a = _back(before, start)
    b_old, b_new = _ahead(before, old_end), _ahead(after, new_end)
    if b_old - old_end != b_new - new_end or before[a:start] != after[a:start]:
        return None
    old, new = before[a:b_old], after[a:b_new]
    if old == new:
        return None
    for kind in (_VERSION, _YEAR):
        if kind.fullmatch(old) and kind.fullmatch(new):
            return old, new
    return None


def places(text: str, old: str) -> list[int]:
    """The offsets where `old` stands as a whole number (the head of a longer version too), in text order."""
    return [m.start() for m in re.finditer(r"(?<![\d.])" + re.escape(old) + r"(?!\d)", text)]


def _back(text: str, at: int) -> int:
    while at > 0 and (text[at - 1].isdigit() or (text[at - 1] == "." and at > 1 and text[at - 2].isdigit())):
        at -= 1
    return at


def _ahead(text: str, at: int) -> int:
    while at < len(text) and (text[at].isdigit() or (text[at] == "." and text[at + 1:at + 2].isdigit())):
        at += 1
    return at

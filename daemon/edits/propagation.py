"""Propagation: the user's last edit read as a token substitution (old -> new), proposed where `old` still stands.

Renaming one occurrence of a name, the same rename is wanted at the others. This module reads the last edit group
(history.py) as a whole-identifier substitution and finds the next place in the text that still has the old name.
It is conservative on purpose, because a rename that over-fires is what users complain of loudest:
- only whole identifiers (or dotted names) on one line, before and after, and not the same;
- only whole-token matches of the old name, never inside a longer name;
- not while the user is still typing the new name at its end (unless they paused), so `tot` is never proposed.
The model then scores the proposal (daemon/edits/edit_service.py), and the confidence gate decides, as for completions.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from tabd.daemon.edits.history import Group

PAUSE_S = 1.0  # typing at the end of the new name, this long without an edit counts as done
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
MAX_NAME = 80


def _ident(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


@dataclass(frozen=True)
class Substitution:
    old: str
    new: str
    at: int  # where the user made it: the new name's start in the current text


@dataclass(frozen=True)
class Proposal:
    start: int  # the range of the old name to replace, in the current text
    end: int
    text: str  # the new name
    substitution: Substitution


def substitution(text: str, group: Group) -> Substitution | None:
    """The group as a rename of one whole name, or None when it is anything else."""
    old, new = group.old, text[group.start:group.end]
    if old == new or "\n" in old or "\n" in new:
        return None
    p = 0
    while p < min(len(old), len(new)) and old[p] == new[p]:
        p += 1
    s = 0
    while s < min(len(old), len(new)) - p and old[len(old) - 1 - s] == new[len(new) - 1 - s]:
        s += 1
    core_old, core_new = old[p:len(old) - s], new[p:len(new) - s]
    a = group.start + p
    b = a + len(core_new)
    while a > 0 and _ident(text[a - 1]):
        a -= 1
    while b < len(text) and _ident(text[b]):
        b += 1
    left = text[a:group.start + p]
    right = text[group.start + p + len(core_new):b]
    old_name, new_name = left + core_old + right, left + core_new + right
    if not (_NAME.match(old_name) and _NAME.match(new_name)) or len(old_name) > MAX_NAME or old_name == new_name:
        return None
    return Substitution(old_name, new_name, a)


def still_typing(text: str, group: Group, cursor: int, now: float) -> bool:
    """The cursor is at the end of the name being typed and the user has not paused: the name may not be done."""
    return not group.done and cursor == group.end and cursor > 0 and _ident(text[cursor - 1]) and now - group.last_t < PAUSE_S


def occurrences(text: str, name: str) -> list[int]:
    """Where `name` stands as a whole token (not inside a longer name, not after a `.` that makes it another's)."""
    pattern = re.compile(r"(?<![A-Za-z0-9_.])" + re.escape(name) + r"(?![A-Za-z0-9_])")
    return [m.start() for m in pattern.finditer(text)]


def next_site(text: str, sub: Substitution, cursor: int) -> Proposal | None:
    """The first place after the cursor that still has the old name, else the first before it."""
    sites = occurrences(text, sub.old)
    if not sites:
        return None
    after = [s for s in sites if s >= cursor]
    start = after[0] if after else sites[0]
    return Proposal(start, start + len(sub.old), sub.new, sub)


def propose(text: str, group: Group | None, cursor: int, now: float) -> Proposal | None:
    """The propagation of the last edit group at this cursor, or None."""
    if group is None or group.end > len(text):
        return None
    sub = substitution(text, group)
    if sub is None or still_typing(text, group, cursor, now):
        return None
    return next_site(text, sub, cursor)

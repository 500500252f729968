"""Propagation: the user's last edit read as a token substitution (old -> new), proposed where `old` still stands.

Renaming one occurrence of a name, the same rename is wanted at the others. This module reads the last edit group
(history.py) as a whole-identifier substitution and finds the next place in the text that still has the old name.
Three kinds of change propagate:
- a rename of one whole name (`count` -> `total`): at the next whole-token `count`;
- a changed string literal (`"red"` -> `"crimson"`): at the next identical literal;
- an argument added at the end of a call (`f(a)` -> `f(a, b)`): at the end of the next call of `f` that lacks it.
It is conservative on purpose, because a rename that over-fires is what users complain of loudest:
- one line, before and after, short, and not the same;
- only whole-token matches of the old name, never inside a longer name nor after a `.`;
- not while the user is still typing at the end of the change (unless they paused), so `tot` is never proposed.
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
    old: str  # name: the old name; string: the old literal, quotes included; argument: the callee's name
    new: str  # the new name or literal; argument: the text inserted before the call's `)`
    at: int  # where the user made it: the change's start in the current text
    kind: str = "name"  # "name", "string" or "argument"


@dataclass(frozen=True)
class Proposal:
    start: int  # the range of the old name to replace, in the current text
    end: int
    text: str  # the new name
    substitution: Substitution | None  # None: an edit the model wrote (model_source.py)
    source: str = "propagation"  # or "model"
    # the model's other edits from the same answer, each in the text that taking the ones before leaves: (start, end,
    # text, confidence); the next Tabs
    rest: tuple[tuple[int, int, str, float | None], ...] = ()


def substitution(text: str, group: Group) -> Substitution | None:
    """The group as a rename of one whole name, a changed string literal or an argument added at the end of a
    call; None when it is anything else."""
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
    at = group.start + p  # the core's start in the current text
    # inside a string literal the literal is what changed, even when the change looks like a name
    return (_restrung(text, at, core_old, core_new) or _renamed(text, at, core_old, core_new)
            or _argument(text, at, core_old, core_new))


def _renamed(text: str, at: int, core_old: str, core_new: str) -> Substitution | None:
    a, b = at, at + len(core_new)
    while a > 0 and _ident(text[a - 1]):
        a -= 1
    while b < len(text) and _ident(text[b]):
        b += 1
    left, right = text[a:at], text[at + len(core_new):b]
    old_name, new_name = left + core_old + right, left + core_new + right
    if not (_NAME.match(old_name) and _NAME.match(new_name)) or len(old_name) > MAX_NAME or old_name == new_name:
        return None
    if a > 0 and text[a - 1] == ".":
        return None  # an attribute of something else: `.count` is not the name `count`
    return Substitution(old_name, new_name, a)


def _restrung(text: str, at: int, core_old: str, core_new: str) -> Substitution | None:
    """A change inside one string literal on its line: the whole old literal and the whole new one."""
    line_start = text.rfind("\n", 0, at) + 1
    line_end = text.find("\n", at)
    line_end = len(text) if line_end == -1 else line_end
    for quote in "\"'":
        a = text.rfind(quote, line_start, at)
        b = text.find(quote, at + len(core_new), line_end)
        if a == -1 or b == -1 or quote in core_old or quote in core_new or "\\" in text[a:b + 1]:
            continue
        new_lit = text[a:b + 1]
        old_lit = text[a:at] + core_old + text[at + len(core_new):b + 1]
        if text[line_start:a].count(quote) % 2 or len(old_lit) > MAX_NAME or old_lit == new_lit:
            continue  # the quote before is a string's end, not its start
        return Substitution(old_lit, new_lit, a, "string")
    return None


def _argument(text: str, at: int, core_old: str, core_new: str) -> Substitution | None:
    """Text inserted right before a call's `)` that starts with `, `: the same argument for the callee's other calls."""
    if core_old or not core_new.startswith(", ") or len(core_new) > MAX_NAME or text[at + len(core_new):at + len(core_new) + 1] != ")":
        return None
    opener = _opening(text, at)
    if opener is None:
        return None
    a = opener
    while a > 0 and _ident(text[a - 1]):
        a -= 1
    callee = text[a:opener]
    if not _NAME.match(callee) or (a > 0 and text[a - 1] == "."):
        return None
    return Substitution(callee, core_new, a, "argument")


def _opening(text: str, close_at: int) -> int | None:
    """Where the `(` is that the `)` after `close_at` closes, on the same line or up to a few lines back."""
    depth = 0
    for i in range(close_at - 1, max(-1, close_at - 400), -1):
        ch = text[i]
        if ch in ")]}":
            depth += 1
        elif ch in "([{":
            if depth == 0:
                return i if ch == "(" else None
            depth -= 1
    return None


def _closing(text: str, open_at: int) -> int | None:
    """Where the `)` is that closes the `(` at `open_at` (within a few lines), or None."""
    depth = 0
    for i in range(open_at, min(len(text), open_at + 400)):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i if ch == ")" else None
    return None


def still_typing(text: str, group: Group, cursor: int, now: float) -> bool:
    """The cursor is at the end of the change being typed and the user has not paused: it may not be done."""
    return not group.done and cursor == group.end and cursor > 0 and now - group.last_t < PAUSE_S


def occurrences(text: str, name: str) -> list[int]:
    """Where `name` stands as a whole token (not inside a longer name, not after a `.` that makes it another's)."""
    pattern = re.compile(r"(?<![A-Za-z0-9_.])" + re.escape(name) + r"(?![A-Za-z0-9_])")
    return [m.start() for m in pattern.finditer(text)]


def sites(text: str, sub: Substitution) -> list[Proposal]:
    """Every place the substitution still applies to, in text order."""
    if sub.kind == "string":
        return [Proposal(m.start(), m.end(), sub.new, sub) for m in re.finditer(re.escape(sub.old), text)]
    if sub.kind == "argument":
        found = []
        for start in occurrences(text, sub.old):
            opener = start + len(sub.old)
            close = _closing(text, opener) if text[opener:opener + 1] == "(" else None
            if close is not None and close > opener + 1 and not text[:close].endswith(sub.new):
                found.append(Proposal(close, close, sub.new, sub))
        return found
    return [Proposal(start, start + len(sub.old), sub.new, sub) for start in occurrences(text, sub.old)]


def next_site(text: str, sub: Substitution, cursor: int) -> Proposal | None:
    """The first place after the cursor that still has the old form, else the first before it."""
    found = sites(text, sub)
    if not found:
        return None
    after = [p for p in found if p.start >= cursor]
    return after[0] if after else found[0]


def propose(text: str, group: Group | None, cursor: int, now: float) -> Proposal | None:
    """The propagation of the last edit group at this cursor, or None."""
    if group is None or group.end > len(text):
        return None
    sub = substitution(text, group)
    if sub is None or still_typing(text, group, cursor, now):
        return None
    return next_site(text, sub, cursor)

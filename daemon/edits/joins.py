"""A line joined to the one above it, made as two edits, as a repeated edit: the first of the two goes on.

A formatter's stub style (black 24: `) -> bytes:` over `        ...` becomes `) -> bytes: ...`) is made by hand as two
edits a line apart, in either order of pieces:
- append: the body's text typed at the end of the line above (` ...`), then the body's own line deleted;
- lift: the line above deleted (`\\n) -> Arrow:`), then its text typed over the body line's indentation.
Neither edit alone says where it goes next (the signature above differs at every overload; a `...` line is no word to
pick places by), but the pair does: the next line that ends as the joined one did (`:`) and has the same body on the
line under it (`...`, `...  # pragma: no cover`), in code. There the first edit is proposed, in the pair's own shape;
the second follows as the other half of a turn (propagation._alternating).

Plain strings and offsets in, plain values out; propagation.py learns it from the last two groups, synthesis.py asks
here for its places.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Sequence

from tabd.daemon.edits.history import Group
from tabd.daemon.edits.tokens import Token, place


@dataclass(frozen=True)
class Join:
    body: str  # the joined line's text, stripped (`...`)
    end: str  # the last character of the line it was joined to (`:`)
    text: str  # append: what the first edit typed at that line's end (` ...`); lift: ""
    lifted: str  # lift: what the first edit deleted (`\n) -> Arrow:`, the line with the break before it); append: ""


def learned(text: str, first: Group, second: Group) -> Join | None:
    """The join two groups made (first the earlier), in the text after both; None when they are no join."""
    if first.end > len(text) or second.end > len(text):
        return None
    return _appended(text, first, second) or _lifted(text, first, second)


def _appended(text: str, first: Group, second: Group) -> Join | None:
    """` ...` typed at a line's end, then the `...` line under it deleted."""
    typed = text[first.start:first.end]
    if first.old or not typed.strip() or "\n" in typed or text[first.end:first.end + 1] not in ("\n", ""):
        return None
    if second.start != second.end or second.start not in (first.end, first.end + 1):
        return None
    deleted = second.old
    line = deleted[:-1] if second.start == first.end + 1 and deleted.endswith("\n") else (
        deleted[1:] if second.start == first.end and deleted.startswith("\n") else None)
    if line is None or "\n" in line or not line.strip() or line.strip() != typed.strip():
        return None
    head = text[text.rfind("\n", 0, first.start) + 1:first.start].rstrip()
    if not head or head[-1].isalnum():
        return None
    return Join(line.strip(), head[-1], typed, "")


def _lifted(text: str, first: Group, second: Group) -> Join | None:
    """A line deleted with the break before it (`\\n) -> Arrow:`), then typed over the next line's indentation."""
    lifted = first.old
    if first.start != first.end or not lifted.startswith("\n") or "\n" in lifted[1:] or not lifted.strip():
        return None
    typed = text[second.start:second.end]
    if second.old.strip() or typed.strip() != lifted.strip() or text.count("\n", first.start, second.start) != 1:
        return None
    line_end = text.find("\n", second.end)
    body = text[second.end:len(text) if line_end < 0 else line_end].strip()
    line_start = text.rfind("\n", 0, second.start) + 1
    if text[line_start:second.start].strip() or not body or not lifted.rstrip()[-1:] or lifted.rstrip()[-1].isalnum():
        return None
    return Join(body, lifted.rstrip()[-1], "", lifted)


def places(text: str, tokens: Sequence[Token], join: Join) -> list[tuple[int, int, str]]:
    """(start, end, new text) of the first edit at each line that ends as the joined one did and has the same body
    on the line under it, in code, in text order."""
    found = []
    at = 0
    while True:
        nl = text.find("\n", at)
        if nl < 0:
            break
        line_start, at = at, nl + 1  # the line runs from the last line end found to this one
        below_end = text.find("\n", nl + 1)
        below = text[nl + 1:len(text) if below_end < 0 else below_end]
        if below.strip() != join.body or not _code(tokens, nl + 1 + len(below) - len(below.lstrip())):
            continue
        line = text[line_start:nl]
        if join.lifted:
            if line_start > 0 and "\n" + line == join.lifted:
                found.append((line_start - 1, nl, ""))
        elif line.rstrip() == line and line.endswith(join.end) and not line.endswith(join.text):
            found.append((nl, nl, join.text))
    return found


def _code(tokens: Sequence[Token], at: int) -> bool:
    """The token at `at` is code (not a string's or comment's text: a docstring's `...` line is no stub)."""
    i = bisect.bisect_right(tokens, at, key=lambda t: t.end)
    return i < len(tokens) and tokens[i].start <= at and place(tokens[i].kind) == "code"

"""A diff between two texts read as the edits a person makes: hunks in file order, each a range of the old text and
the text that replaces it.

Lines are matched with difflib.SequenceMatcher. A block replaced by as many lines is read line by line (by another
number of lines: its most alike lines are paired, as difflib.Differ does), and inside a
changed line only what differs is a hunk: the tokens that changed when most of the line stays (so a rename `count` ->
`total` deletes `count` and types `total`, a name that grows or shrinks at one end, `count` -> `counter`, types only
`er`, and a line that renames twice is two hunks), else the line less its common
prefix and suffix. Lines inserted or deleted after a line start at the end of that line, so they are typed as Enter
and the lines, as a person adds lines below one. Hunks never overlap or touch; applied in order (each shifted by what
the earlier ones changed) they turn the old text into the new.

A hunk that replaces tokens by others, or inserts some, on a single line keeps that substitution (`key`, old "" for an
insertion): hunks of one file that repeat a key of the kinds is_substitution names are a propagation (the same change made at several places: a rename,
a string changed, an argument added to each call).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Sequence

TOKEN = re.compile(r"\w+|[ \t]+|\n|[^\w\s]|\s")
LINE = re.compile(r"[^\n]*\n|[^\n]+")
IDENTIFIER = re.compile(r"^[^\W\d]\w*$")  # a name: not a number
DOTTED = re.compile(r"^[^\W\d]\w*(\.[^\W\d]\w*)*$")
# a changed line is read token by token when it keeps at least this much of itself, in at most this many pieces
LINE_KEPT = 0.5
LINE_PIECES = 3
# inside a block replaced by a different number of lines, lines this alike are read as one line changed
LINE_ALIKE = 0.6
PAIRING_LIMIT = 80  # lines per side beyond which a replaced block is not searched for alike lines


@dataclass(frozen=True)
class Hunk:
    """Old text [start, end) (string offsets) becomes `text`; `key` is the (old, new) token substitution it makes,
    when it makes one on a single line."""

    start: int
    end: int
    text: str
    key: tuple[str, str] | None = None

    def old(self, source: str) -> str:
        return source[self.start:self.end]


def split_lines(text: str) -> list[str]:
    """Lines with their "\\n" (only "\\n" breaks a line: a form feed inside one stays there)."""
    return LINE.findall(text)


def _trim(source: str, start: int, end: int, new: str, key: tuple[str, str] | None = None) -> Hunk | None:
    """The hunk [start, end) -> new less what both sides share at either end; None when nothing differs."""
    old = source[start:end]
    p = 0
    while p < min(len(old), len(new)) and old[p] == new[p]:
        p += 1
    s = 0
    while s < min(len(old), len(new)) - p and old[len(old) - 1 - s] == new[len(new) - 1 - s]:
        s += 1
    if p == len(old) and p == len(new):
        return None
    return Hunk(start + p, end - s, new[p:len(new) - s], key)


def _rename(start: int, end: int, old: str, new: str, key: tuple[str, str]) -> Hunk:
    """One name for another: the whole word (as a double-click selects it), or where one name is the other with
    something more at one end (`count` -> `counter`, `_t` -> `t`), only that end typed or deleted."""
    if new.startswith(old):
        return Hunk(end, end, new[len(old):], key)
    if old.startswith(new):
        return Hunk(start + len(new), end, "", key)
    if new.endswith(old):
        return Hunk(start, start, new[:len(new) - len(old)], key)
    if old.endswith(new):
        return Hunk(start, end - len(new), "", key)
    return Hunk(start, end, new, key)


def _line_hunks(source: str, base: int, old_line: str, new_line: str) -> list[Hunk]:
    """The hunks that turn one line into another: token pieces when most of it stays, else one trimmed hunk."""
    a, b = TOKEN.findall(old_line), TOKEN.findall(new_line)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    pieces = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    if matcher.ratio() >= LINE_KEPT and len(pieces) <= LINE_PIECES:
        offsets = [0]
        for token in a:
            offsets.append(offsets[-1] + len(token))
        out = []
        for tag, i1, i2, j1, j2 in pieces:
            old, new = "".join(a[i1:i2]), "".join(b[j1:j2])
            key = (old, new) if tag in ("replace", "insert") and "\n" not in old + new and (old.strip() or tag == "insert") \
                and new.strip() else None
            start, end = base + offsets[i1], base + offsets[i2]
            if is_rename(key):
                out.append(_rename(start, end, old, new, key))
                continue
            hunk = _trim(source, start, end, new, key)
            if hunk is not None:
                out.append(hunk)
        return out
    hunk = _trim(source, base, base + len(old_line), new_line)
    return [] if hunk is None else [hunk]


def _below(source: str, hunk: Hunk, after: int) -> Hunk:
    """Whole lines inserted or deleted at a line start, moved to the end of the line above (when nothing before
    `after` is in the way): typed as Enter and the lines, deleted from the end of the line above."""
    s, e, text = hunk.start, hunk.end, hunk.text
    if s == 0 or source[s - 1] != "\n" or s - 1 < after:
        return hunk
    if s == e and text.endswith("\n"):
        return Hunk(s - 1, s - 1, "\n" + text[:-1], hunk.key)
    if not text and source[s:e].endswith("\n"):
        return Hunk(s - 1, e - 1, "", hunk.key)
    return hunk


def _block(old: str, starts: list[int], a: list[str], b: list[str], i1: int, i2: int, j1: int, j2: int) -> list[Hunk]:
    """Lines a[i1:i2] replaced by b[j1:j2]: the most alike pair of lines is one line changed, and the lines on
    either side of it are blocks read the same way (difflib.Differ's fancy replace); no alike pair: one hunk."""
    best, pair = LINE_ALIKE, None
    if 0 < i2 - i1 <= PAIRING_LIMIT and 0 < j2 - j1 <= PAIRING_LIMIT:
        matcher = difflib.SequenceMatcher(None, autojunk=False)
        for j in range(j1, j2):
            matcher.set_seq2(b[j])
            for i in range(i1, i2):
                matcher.set_seq1(a[i])
                if matcher.real_quick_ratio() > best and matcher.quick_ratio() > best and matcher.ratio() > best:
                    best, pair = matcher.ratio(), (i, j)
    if pair is None:
        hunk = _trim(old, starts[i1], starts[i2], "".join(b[j1:j2]))
        return [] if hunk is None else [hunk]
    i, j = pair
    return (_block(old, starts, a, b, i1, i, j1, j) + _line_hunks(old, starts[i], a[i], b[j])
            + _block(old, starts, a, b, i + 1, i2, j + 1, j2))


def hunks(old: str, new: str) -> list[Hunk]:
    """The hunks that turn `old` into `new`, in file order, none touching another."""
    a, b = split_lines(old), split_lines(new)
    starts = [0]
    for line in a:
        starts.append(starts[-1] + len(line))
    raw: list[Hunk] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            for k in range(i2 - i1):
                raw.extend(_line_hunks(old, starts[i1 + k], a[i1 + k], b[j1 + k]))
        else:
            raw.extend(_block(old, starts, a, b, i1, i2, j1, j2))
    out: list[Hunk] = []
    for hunk in raw:
        hunk = _below(old, hunk, out[-1].end + 1 if out else 0)
        if out and hunk.start <= out[-1].end:  # touching: one edit
            last = out.pop()
            hunk = Hunk(last.start, max(last.end, hunk.end), last.text + old[last.end:hunk.start] + hunk.text)
        out.append(hunk)
    return out


def apply_hunks(old: str, chosen: Sequence[Hunk]) -> str:
    """`old` with the hunks applied (they are in order and do not overlap)."""
    parts, at = [], 0
    for hunk in chosen:
        parts.append(old[at:hunk.start])
        parts.append(hunk.text)
        at = hunk.end
    parts.append(old[at:])
    return "".join(parts)


def is_rename(key: tuple[str, str] | None) -> bool:
    """A substitution of one identifier by another."""
    return key is not None and bool(IDENTIFIER.match(key[0])) and bool(IDENTIFIER.match(key[1]))


def is_string(token: str) -> bool:
    """A string literal (`'a'`, `""`), not a docstring's triple quote alone."""
    return len(token) >= 2 and token[0] in "'\"" and token[-1] == token[0] and (len(token) == 2 or bool(token.strip("'\"")))


def is_substitution(key: tuple[str, str] | None) -> bool:
    """A change of the kinds people make at several places (the issue's list): a name renamed (a variable, a call,
    a dotted name), a string changed, an argument added at the end of a call (`, mode`)."""
    if key is None:
        return False
    old, new = key
    if is_rename(key) or (DOTTED.match(old) and DOTTED.match(new)):
        return True
    if is_string(old.strip()) and is_string(new.strip()):
        return True
    return not old and new.startswith(", ") and len(new) > 2

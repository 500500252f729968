"""Next-edit cases from real commits (`tabd bench edits --edits-git`): the states a person reaches while making a
commit's changes to one file, what is due next at each, and the plain-text baseline.

A commit-file with places e1..en (git_history.py; n >= 2) gives the cases k = 1..n: the old file with e1..ek made,
the cursor where the typing of ek left it. What is due there:
- "repeat": e(k+1) exists and is the same change as an earlier place ej (j <= k), by same_change();
- "other": e(k+1) exists and is not a repeat;
- "none": k = n, nothing is left to do in the file.

The change a place makes (change()) is its (removed, inserted) text with both ends widened to whole words: a hunk
that types `er` at the end of `count` is the change `count` -> `counter`. Two changes are the same when
- they are equal once runs of whitespace are one space and the ends are stripped (indentation does not count), or
- their token sequences (words and single punctuation characters) are equal but for one identifier that differs
  between them, consistently, and that each change carries through (it is in both its removed and its inserted
  text): `new_func` -> `t.cast("F", new_func)` and `other` -> `t.cast("F", other)` are one change; `count` ->
  `total` and `count` -> `totals` are not.
A change with nothing but whitespace on both sides is never a repeat.

An edit shown at a state is exact when applying it there gives the document with e(k+1) made (any range and text
that give that document count: the shown edit may span more or less than the hunk); "later" when it gives the
document with another place still to come (e(k+2), ...) made instead.

The baseline repeats the last edit's change as plain text at its next occurrence after the cursor: the removed text
found again (plain substring search) and replaced by the inserted text; for an insertion, the word or character
just before it is found again and the inserted text put after it. No model, no parser.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from tabd.daemon.sessions.git_history import Commit, FileChange, Place
from tabd.daemon.sessions.hunks import apply_hunks

WORD = re.compile(r"\w")
TOKENS = re.compile(r"\w+|[^\w\s]")
IDENTIFIER = re.compile(r"^[^\W\d]\w*$")
SPACE = re.compile(r"\s+")
DUES = ("repeat", "other", "none")


@dataclass(frozen=True)
class Case:
    """State k of one commit-file: e1..ek made; `due` says what is due next."""

    repo: str
    commit: str
    path: str
    language: str
    old: str
    places: tuple[Place, ...]  # all of the file's places
    k: int

    @property
    def due(self) -> str:
        if self.k >= len(self.places):
            return "none"
        nxt = change(self.old, self.places[self.k])
        return "repeat" if any(same_change(change(self.old, p), nxt) for p in self.places[:self.k]) else "other"

    def doc(self, made: int | None = None) -> str:
        """The old text with the first `made` places made (default k)."""
        return apply_hunks(self.old, [h for p in self.places[:self.k if made is None else made] for h in p.hunks])

    def doc_with(self, j: int) -> str:
        """The document at this state with place j (0-based, j >= k) made too."""
        return apply_hunks(self.old, [h for p in (*self.places[:self.k], self.places[j]) for h in p.hunks])


def file_cases(repo: str, change_: FileChange, max_places: int) -> list[Case]:
    """The cases of one commit-file (none when it has fewer than two places); k stops at `max_places`."""
    n = len(change_.places)
    if n < 2:
        return []
    return [Case(repo, change_.commit, change_.path, change_.language, change_.old, change_.places, k)
            for k in range(1, min(n, max_places) + 1)]


def cases_of(repo: str, commits: Sequence[Commit], max_places: int = 8) -> list[list[Case]]:
    """The cases of every commit-file, grouped by file, oldest commit first."""
    out = []
    for commit in reversed(commits):
        for f in commit.files:
            found = file_cases(repo, f, max_places)
            if found:
                out.append(found)
    return out


# ---------------------------------------------------------------- what a change is


def _word(ch: str) -> bool:
    return bool(ch) and WORD.match(ch) is not None


def widened(old: str, start: int, end: int, text: str) -> tuple[int, int, str]:
    """The edit [start, end) -> text widened to whole words at both ends (the same edit, more context)."""
    while start > 0 and _word(old[start - 1]) and ((start < end and _word(old[start])) or _word(text[:1])):
        start -= 1
        text = old[start] + text
    while end < len(old) and _word(old[end]) and ((start < end and _word(old[end - 1])) or _word(text[-1:])):
        text += old[end]
        end += 1
    return start, end, text


def change(old: str, place: Place) -> tuple[str, str]:
    """(removed, inserted) of a place, widened to whole words."""
    start, end, text = widened(old, place.start, place.end, place.text(old))
    return old[start:end], text


def _normal(text: str) -> str:
    return SPACE.sub(" ", text).strip()


def same_change(a: tuple[str, str], b: tuple[str, str]) -> bool:
    """Whether two changes are one change made at two places (the module's rule)."""
    na, nb = (_normal(a[0]), _normal(a[1])), (_normal(b[0]), _normal(b[1]))
    if not (na[0] or na[1]) or na[0] == na[1]:
        return False
    if na == nb:
        return True
    ta, tb = [TOKENS.findall(s) for s in a], [TOKENS.findall(s) for s in b]
    if any(len(x) != len(y) for x, y in zip(ta, tb)):
        return False
    pairs = {(x, y) for side_a, side_b in zip(ta, tb) for x, y in zip(side_a, side_b) if x != y}
    if len(pairs) != 1:
        return False
    (x, y), = pairs
    if not (IDENTIFIER.match(x) and IDENTIFIER.match(y)):
        return False
    if not all(x in side for side in ta) or not all(y in side for side in tb):
        return False  # the name each place carries through its change, not a new name that differs
    # consistent: the name never stays where the other one changed it
    return all((p == x) == (q == y) for side_a, side_b in zip(ta, tb) for p, q in zip(side_a, side_b))


# ---------------------------------------------------------------- judging an edit


def judge(case: Case, result: str | None) -> str:
    """"exact", "later", "wrong" for a shown edit whose document is `result`; "none" for no edit."""
    if result is None:
        return "none"
    n = len(case.places)
    if case.k < n and result == case.doc_with(case.k):
        return "exact"
    if any(result == case.doc_with(j) for j in range(case.k + 1, n)):
        return "later"
    return "wrong"


def cursor_after(case: Case) -> int:
    """Where typing the k-th place leaves the cursor, in the document at state k: after its last hunk's text."""
    last = case.places[case.k - 1].hunks[-1]
    made = [h for p in case.places[:case.k] for h in p.hunks]
    delta = sum(len(h.text) - (h.end - h.start) for h in made if h.start < last.start)
    return last.start + delta + len(last.text)


def baseline(case: Case) -> str | None:
    """The document after the baseline's edit at this state, None when it proposes nothing."""
    doc, cursor = case.doc(), cursor_after(case)
    place = case.places[case.k - 1]
    start, end, text = widened(case.old, place.start, place.end, place.text(case.old))
    removed = case.old[start:end]
    if removed:
        at = doc.find(removed, cursor)
        return None if at < 0 else doc[:at] + text + doc[at + len(removed):]
    before = case.old[:start]
    anchor = re.search(r"(\w+|[^\w\s])\s*$", before)
    if anchor is None or not text.strip():
        return None
    needle = before[anchor.start():]
    at = doc.find(needle, cursor)
    if at < 0:
        return None
    at += len(needle)
    return doc[:at] + text + doc[at:]

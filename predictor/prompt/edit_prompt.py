"""The next-edit prompt, defined once: the daemon's model edit source (daemon/edits/model_source.py) and `tabd train`'s
edit rows (predictor/training/edit_rows.py) both build it here, so the shipped model is trained on exactly the text
the daemon prompts with.

The prompt is plain text, so any FIM model and any engine can run it: the daemon passes it as the prefix of a FIM
request with an empty suffix, and the model's middle is the window as it should be after the user's next edit:

    <<< edits: path
    @@ 12
    -    total = count(items)
    +    total = tally(items)
    <<< window: path
    (the lines around the cursor as they are now)
    <<< updated
    (the model writes those lines as they will be, then stops)

Recent edits come oldest first, each as the whole lines it touched before (`-`) and after (`+`), headed by the
first line's number (0-based) in the current text. The window is WINDOW_BEFORE lines above the cursor's line, that
line, and WINDOW_AFTER below it. "No edit" is the window written unchanged, and it is the common right answer.
The daemon diffs the updated window against the current one into hunks (line_hunks) and shows the one nearest the
cursor.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Sequence

WINDOW_BEFORE = 3  # lines above the cursor's line in the window
WINDOW_AFTER = 6  # lines below it
MAX_EDITS = 3  # recent edits shown, newest kept
MAX_EDIT_LINES = 6  # lines of one edit shown per side; a bigger edit is cut to its first lines
MAX_LINE_CHARS = 200  # a longer line is cut (minified or generated text says nothing about the next edit)

EDITS_HEAD = "<<< edits: "
WINDOW_HEAD = "<<< window: "
UPDATED_HEAD = "<<< updated\n"


@dataclass(frozen=True)
class EditPair:
    """One recent edit: the whole lines it touched as they were (`old`) and as they are (`new`), each line ending
    in a newline, `line` the first of them (0-based) in the current text."""

    line: int
    old: str
    new: str


@dataclass(frozen=True)
class Window:
    """Lines [first_line, end_line) of a text: offsets [start, end), and their text (each line ends in a newline;
    a last line without one gets it)."""

    first_line: int
    end_line: int
    start: int
    end: int
    text: str


def line_starts(text: str) -> list[int]:
    starts = [0]
    at = text.find("\n")
    while at != -1:
        starts.append(at + 1)
        at = text.find("\n", at + 1)
    return starts


def window(text: str, cursor: int, before: int = WINDOW_BEFORE, after: int = WINDOW_AFTER) -> Window:
    """The window around `cursor` (an offset into `text`)."""
    starts = line_starts(text)
    cursor = max(0, min(cursor, len(text)))
    line = max(0, _line_of(starts, cursor))
    first, end_line = max(0, line - before), min(len(starts), line + after + 1)
    if end_line == len(starts) and starts[-1] == len(text) and end_line - 1 > line:
        end_line -= 1  # the empty "line" after a final newline is not a line
    start = starts[first]
    end = starts[end_line] if end_line < len(starts) else len(text)
    body = text[start:end]
    return Window(first, end_line, start, end, body if body.endswith("\n") else body + "\n")


def _line_of(starts: list[int], offset: int) -> int:
    import bisect

    return bisect.bisect_right(starts, offset) - 1


def _lines(text: str, limit: int = MAX_EDIT_LINES) -> str:
    lines = text.splitlines()[:limit]
    return "".join(ln[:MAX_LINE_CHARS] + "\n" for ln in lines)


def edit_prompt(path: str, edits: Sequence[EditPair], win: Window) -> str:
    """The prompt text (a FIM prefix; the suffix is empty): recent edits, the window, the head of the answer."""
    parts = []
    if edits:
        parts.append(f"{EDITS_HEAD}{path}\n")
        for e in list(edits)[-MAX_EDITS:]:
            old = "".join("-" + ln + "\n" for ln in _lines(e.old).splitlines())
            new = "".join("+" + ln + "\n" for ln in _lines(e.new).splitlines())
            parts.append(f"@@ {e.line}\n{old}{new}")
    parts.append(f"{WINDOW_HEAD}{path}\n{window_text(win)}{UPDATED_HEAD}")
    return "".join(parts)


def window_text(win: Window) -> str:
    return "".join(ln[:MAX_LINE_CHARS] + "\n" for ln in win.text.splitlines())


def answer_budget(win: Window) -> int:
    """Tokens the model may write: the window's length, in tokens at about 2.5 characters each, and room for an edit."""
    return int(len(window_text(win)) / 2.5) + 48


def read_answer(win: Window, written: str) -> str | None:
    """The updated window the model wrote, or None when it is not one: it must end its last line (a window cut by
    the token budget is no answer) and keep the window's line count within MAX_EDIT_LINES."""
    if not written.endswith("\n"):
        return None
    if abs(written.count("\n") - window_text(win).count("\n")) > MAX_EDIT_LINES:
        return None
    return written


@dataclass(frozen=True)
class LineHunk:
    """Characters [start, end) of the old text become `text`: a run of whole lines replaced, inserted or deleted;
    `new_start`: where `text` begins in the new text."""

    start: int
    end: int
    text: str
    new_start: int = 0


def line_hunks(old: str, new: str) -> list[LineHunk]:
    """The line-level differences between two texts, in order, as ranges of `old`; applied from last to first (or in
    order, each shifted by the ones before), they turn `old` into `new`. A block of lines replaced by as many is a
    hunk per changed line (a change made at two lines in a row is two edits, two Tabs)."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    starts, new_starts = [0], [0]
    for ln in a:
        starts.append(starts[-1] + len(ln))
    for ln in b:
        new_starts.append(new_starts[-1] + len(ln))
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "replace" and i2 - i1 == j2 - j1:  # as many lines for as many: each changed line its own hunk
            out += [LineHunk(starts[i], starts[i + 1], b[j], new_starts[j])
                    for i, j in zip(range(i1, i2), range(j1, j2)) if a[i] != b[j]]
        elif tag != "equal":
            out.append(LineHunk(starts[i1], starts[i2], "".join(b[j1:j2]), new_starts[j1]))
    return out


def narrowed(old: str, hunk: LineHunk) -> LineHunk:
    """The hunk less the characters its old and new text share at both ends (a rename inside a line becomes the
    name alone), never cut inside a word: a word that only grows keeps its whole self."""
    was = old[hunk.start:hunk.end]
    new = hunk.text
    p = 0
    while p < min(len(was), len(new)) and was[p] == new[p]:
        p += 1
    while p > 0 and (_word(was[p - 1]) and (p < len(was) and _word(was[p]) or p < len(new) and _word(new[p]))):
        p -= 1
    s = 0
    while s < min(len(was), len(new)) - p and was[len(was) - 1 - s] == new[len(new) - 1 - s]:
        s += 1
    while s > 0 and _word(was[len(was) - s]) and (
            len(was) - s - 1 >= p and _word(was[len(was) - s - 1]) or len(new) - s - 1 >= p and _word(new[len(new) - s - 1])):
        s -= 1
    return LineHunk(hunk.start + p, hunk.end - s, new[p:len(new) - s], hunk.new_start + p)


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"

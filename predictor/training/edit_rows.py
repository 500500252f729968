"""Next-edit training rows: one file's two releases (`tabd train edits`) cut into "the user has made the first k
hunks; what does the window look like after the next edit?", in the daemon's own prompt (predictor/prompt/edit_prompt.py).

A row is the FIM request the daemon sends, tabd's SPM layout with the edit prompt as the prefix and an empty
suffix, then the answer: `<tabd_suf> <tabd_pre> prompt` -> `updated window <tabd_eot>`. The updated window applies
every remaining hunk that lies wholly inside the window, so most rows answer "no edit" (the window unchanged), as
the data has it. A share of rows are cut mid-typing: the next hunk's old lines are gone and its first line is typed
up to a natural pause (after a word or a punctuation mark), the cursor there; the answer completes it.
"""
from __future__ import annotations

import bisect
import random
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Callable

from tabd.predictor.prompt import prompt_ids
from tabd.predictor.prompt.edit_prompt import (MAX_EDIT_LINES, MAX_EDITS, MAX_LINE_CHARS, EditPair, LineHunk, Window,
                                        answer_budget, edit_prompt, line_hunks, line_starts, window, window_text)
from tabd.predictor.prompt.fim import EOT, PRE, SUF
from tabd.predictor.prompt.templates import template_for

P_MID_TYPING = 0.3


@dataclass(frozen=True)
class EditExample:
    """One row's text: the recent edits (oldest first), the window, the window as it should be after the next edit."""

    path: str
    edits: tuple[EditPair, ...]
    win: Window
    answer: str
    mid_typing: bool

    def prompt(self, drop: int = 0) -> str:
        return edit_prompt(self.path, self.edits[drop:], self.win)


def apply(text: str, hunks: list[LineHunk]) -> str:
    """`text` with these (sorted, non-overlapping) hunks applied."""
    for h in reversed(hunks):
        text = text[:h.start] + h.text + text[h.end:]
    return text


def made(old: str, hunks: list[LineHunk], k: int) -> tuple[str, list[int]]:
    """The text with hunks[:k] made, and where each of them starts in it."""
    out, starts, at, shift = [], [], 0, 0
    for h in hunks[:k]:
        out += [old[at:h.start], h.text]
        starts.append(h.start + shift)
        shift += len(h.text) - (h.end - h.start)
        at = h.end
    out.append(old[at:])
    return "".join(out), starts


def shifted(hunks: list[LineHunk], by: int) -> list[LineHunk]:
    return [LineHunk(h.start + by, h.end + by, h.text) for h in hunks]


def inside(win: Window, h: LineHunk) -> bool:
    """A hunk the model can write within the window: lines inserted at its end belong to the lines after it."""
    return win.start <= h.start and h.end <= win.end and not (h.start == h.end == win.end)


def updated(text: str, win: Window, hunks: list[LineHunk]) -> str:
    """The window's text with the hunks that lie wholly inside it applied, each line ending in a newline."""
    mine = [LineHunk(h.start - win.start, h.end - win.start, h.text) for h in hunks if inside(win, h)]
    body = apply(text[win.start:win.end], mine)
    return body if body.endswith("\n") or not body else body + "\n"


def pause_points(line: str) -> list[int]:
    """Offsets inside a line (past its indentation, before its end) where typing naturally pauses: after a word,
    or after a punctuation mark."""
    indent = len(line) - len(line.lstrip())
    out = []
    for p in range(indent + 1, len(line.rstrip("\n"))):
        before, after = line[p - 1], line[p]
        word_ends = _word(before) and not _word(after)
        if word_ends or (not _word(before) and not before.isspace()):
            out.append(p)
    return out


def _plain_lines(text: str) -> bool:
    return "".join(ln + "\n" for ln in text.splitlines()) == text


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def example(path: str, old: str, new: str, rng: random.Random, p_mid: float = P_MID_TYPING,
            hunks: list[LineHunk] | None = None) -> EditExample | None:
    """One row's text from a file's two releases, or None when this draw makes none (fewer than two hunks, a
    window with an over-long line, an answer whose line count the daemon would not take)."""
    hunks = line_hunks(old, new) if hunks is None else hunks
    if len(hunks) < 2:
        return None
    k = rng.randint(1, len(hunks) - 1)
    text, starts = made(old, hunks, k)
    shift = starts[-1] + len(hunks[k - 1].text) - hunks[k - 1].end
    rest = shifted(hunks[k:], shift)
    nl = line_starts(text)
    edits = [EditPair(bisect.bisect_right(nl, s) - 1, old[h.start:h.end], h.text)
             for h, s in zip(hunks[:k][-MAX_EDITS:], starts[-MAX_EDITS:])]
    last = hunks[k - 1].text
    cursor = starts[-1] + len(last.rstrip("\n"))
    mid = rng.random() < p_mid
    if mid:
        typed = mid_typing(text, rest, edits, rng)
        if typed is None:
            mid = False
        else:
            text, rest, edits, cursor = typed
    win = window(text, cursor)
    answer = updated(text, win, rest)
    current = window_text(win)
    if not (_plain_lines(win.text) and _plain_lines(answer)):
        return None  # a form feed or other line break str.splitlines() sees: the window's text would not read back
    if any(len(ln) > MAX_LINE_CHARS for ln in (current + answer).splitlines()):
        return None
    if abs(answer.count("\n") - current.count("\n")) > MAX_EDIT_LINES:
        return None
    return EditExample(PurePosixPath(path).name, tuple(edits), win, answer, mid)


def mid_typing(text: str, rest: list[LineHunk], edits: list[EditPair], rng: random.Random):
    """The next hunk half made: its old lines gone, its first new line typed to a pause, the cursor there.
    Returns (text, remaining hunks with that one to complete, edits, cursor), or None when it has no pause."""
    h = rest[0]
    first = h.text.splitlines(keepends=True)[:1]
    points = pause_points(first[0]) if first else []
    if not points:
        return None
    typed = first[0][:rng.choice(points)] + "\n"
    text2 = text[:h.start] + typed + text[h.end:]
    delta = len(typed) - (h.end - h.start)
    nl = line_starts(text2)
    partial = EditPair(bisect.bisect_right(nl, h.start) - 1, text[h.start:h.end], typed)
    complete = LineHunk(h.start, h.start + len(typed), h.text)
    return text2, [complete, *shifted(rest[1:], delta)], (edits + [partial])[-MAX_EDITS:], h.start + len(typed) - 1


def tokens(ex: EditExample, tok: Any, budget: int, encode: Callable[[str], list[int]] | None = None) -> list[int]:
    """The row's ids, laid out as the daemon lays out its FIM request (tabd SPM, the prompt as prefix, an empty
    suffix), then the answer and `<tabd_eot>`; the oldest edits dropped until it fits `budget`, [] if it never does
    or the answer is longer than the daemon lets the model write (edit_prompt.answer_budget)."""
    encode = encode or (lambda s: prompt_ids.encode(tok, s))
    template = template_for("tabd", "spm")
    answer = encode(ex.answer) + prompt_ids.special(tok, EOT)
    if len(answer) > answer_budget(ex.win):
        return []  # the daemon stops the model before such an answer ends, and a cut answer is no answer
    for drop in range(len(ex.edits) + 1):
        slots = {prompt_ids.PREFIX_SLOT: encode(ex.prompt(drop)), prompt_ids.SUFFIX_SLOT: []}
        ids = prompt_ids.lay_out(tok, template.pieces(prompt_ids.PREFIX_SLOT, prompt_ids.SUFFIX_SLOT), slots) + answer
        if len(ids) <= budget:
            return ids
    return []


__all__ = ["EditExample", "example", "tokens", "updated", "pause_points", "P_MID_TYPING", "PRE", "SUF"]

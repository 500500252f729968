"""The model as a source of next edits: it reads the user's recent edits and the window around the cursor, writes the
window as it should be (predictor/prompt/edit_prompt.py; or in the format of Sweep's or Zed's next-edit models,
predictor/prompt/nes_formats.py), and the differences are the edits to propose.

  pairs_of   the history's last groups as the prompt's -/+ line pairs
  propose    the prompt, the model's answer (through a Writer the runtime gives), its line hunks narrowed to what
             changes, each with the model's confidence; the nearest to the cursor first, the others queued after it
             (each shifted as the ones before it leave the text), so Tab, Tab takes them in turn
  FormatWriter  a Writer that names the format its engine reads (the runtime's, from --edit-format); a plain
             Writer is asked in tabd's own

What is never proposed: an edit that undoes the user's last change; text inserted right at the cursor (that is the
inline completion's, already shown there); an answer that is not a whole window (cut by the budget, or lines lost);
a hunk the model wrote with a mean token probability under the gate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Awaitable, Callable, Sequence

from tabd.daemon.edits.history import Group
from tabd.predictor.prompt.edit_prompt import MAX_LINE_CHARS, EditPair, LineHunk, line_hunks, narrowed, window_text
from tabd.predictor.prompt.nes_formats import TABD, EditContext, NesFormat

Written = tuple[str, tuple[tuple[int, float], ...]]
# (doc, prompt, token budget, background) -> (the text written, ((end offset in it, probability) per token)), or None
# when the model could not run
Writer = Callable[[str, str, int, bool], Awaitable[Written | None]]


@dataclass(frozen=True)
class FormatWriter:
    """A Writer whose engine reads `fmt`: the prompt is built in that format, and `write` gets the format with it
    (its stop strings, and whether the prompt goes as it is rather than as a FIM prefix)."""

    fmt: NesFormat
    write: Callable[[str, str, int, bool, NesFormat], Awaitable[Written | None]]

    async def __call__(self, doc: str, prompt: str, budget: int, background: bool) -> Written | None:
        return await self.write(doc, prompt, budget, background, self.fmt)


@dataclass(frozen=True)
class ModelEdit:
    start: int  # the range replaced, in the current text
    end: int
    text: str
    confidence: float | None  # the mean probability of the tokens that wrote it; None: the engine gives none


def pairs_of(text: str, groups: Sequence[Group]) -> list[EditPair]:
    """Each group (history.py) as the whole lines it touched, before and after, in the current text."""
    out = []
    for g in groups:
        if g.end > len(text):
            continue
        a = text.rfind("\n", 0, g.start) + 1
        whole_lines = a == g.start and (g.old.endswith("\n") or not g.old) and (g.end == g.start or text[g.end - 1] == "\n")
        if whole_lines and g.end > g.start or whole_lines and g.old:
            b = g.end  # lines inserted or deleted whole: the pair is those lines alone
        else:
            b = text.find("\n", g.end)
            b = len(text) if b < 0 else b + 1
        new = text[a:b]
        old = text[a:g.start] + g.old + text[g.end:b]
        if old != new:
            out.append(EditPair(text.count("\n", 0, a), old, new))
    return out


def _confidence(hunk: LineHunk, probs: Sequence[tuple[int, float]]) -> float | None:
    """The mean probability (geometric) of the tokens that wrote the hunk's text; a deletion is judged by the tokens
    around where the text was. None where the engine gave no probabilities (a remote one: nothing is gated, as for
    its completions)."""
    if not probs:
        return None
    lo, hi = hunk.new_start, hunk.new_start + max(1, len(hunk.text))
    logs, before = [], 0
    for end, p in probs:
        if end > lo and before < hi:
            logs.append(math.log(max(p, 1e-9)))
        before = end
    return math.exp(sum(logs) / len(logs)) if logs else 0.0


def undoes(text: str, start: int, end: int, new: str, last: Group | None) -> bool:
    """Whether applying the edit gives back the text as it was before the user's last change."""
    if last is None or last.end > len(text):
        return False
    return text[:start] + new + text[end:] == text[:last.start] + last.old + text[last.end:]


async def propose(writer: Writer, doc: str, path: str, text: str, cursor: int, groups: Sequence[Group],
                  min_confidence: float, background: bool) -> list[ModelEdit]:
    """The model's edits at this state, nearest the cursor first, each in the text the ones before it leave."""
    fmt = writer.fmt if isinstance(writer, FormatWriter) else TABD
    win = fmt.window(text, cursor)
    body = text[win.start:win.end]
    if any(len(ln) > MAX_LINE_CHARS for ln in body.splitlines()) or window_text(win) != win.text:
        return []  # a line the prompt would cut: offsets in the answer would not be the document's
    last = groups[-1] if groups else None
    ctx = EditContext(path.rsplit("/", 1)[-1], text, cursor, pairs_of(text, groups),
                      (last.start, last.end, last.old) if last is not None and last.end <= len(text) else None)
    answer = await writer(doc, fmt.prompt(ctx, win), fmt.budget(win), background)
    if answer is None:
        return []
    written, probs = answer
    updated = fmt.read(win, written)
    if updated is None:
        return []
    if not body.endswith("\n"):  # the last line of a document without a final newline: the window added one
        updated = updated[:-1] if updated.endswith("\n") else updated
        body_cmp = body
    else:
        body_cmp = win.text
    found = []
    for hunk in line_hunks(body_cmp, updated):
        h = narrowed(body_cmp, hunk)
        start, end = win.start + h.start, win.start + h.end
        if start == end and not h.text:
            continue
        if start == end == cursor:
            continue  # text typed at the cursor: the inline completion's
        if undoes(text, start, end, h.text, last):
            continue
        p = _confidence(h, probs)
        if p is None or p >= min_confidence:
            found.append(ModelEdit(start, end, h.text, None if p is None else round(p, 4)))
    found.sort(key=lambda e: (abs(e.start - cursor), e.start))
    return _in_turn(found)


def _in_turn(edits: list[ModelEdit]) -> list[ModelEdit]:
    """Each edit shifted by the ones taken before it (in the order given) that lie before it in the text."""
    out: list[ModelEdit] = []
    for e in edits:
        shift = sum(len(d.text) - (d.end - d.start) for d in edits[:len(out)] if d.end <= e.start)
        out.append(ModelEdit(e.start + shift, e.end + shift, e.text, e.confidence))
    return out

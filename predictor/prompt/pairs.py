"""The closers an editor puts after the cursor: left out of the prompt window, and consumed by a suggestion.

Editors auto-close: typing `(` gives `(|)`, and typing `)` there steps over
the closer without changing the document. tabd's prompt puts the suffix first,
so a closer appearing or vanishing right after the cursor would change the
start of the prompt and cost a prefill of the whole window. The prompt window
therefore leaves out the closers right after the cursor (`closer_run`): with
or without the editor's `)`, the window, the cache key and the kept KV are
the same, and the model, which no longer sees the `)`, writes it as part of
its suggestion. `consumed` then tells how much of the text after the cursor
that suggestion closes itself, so it is shown (and applied, and speculated
over) as a replacement of those closers, the way an editor applies it:
`foo(|)` + `x)` gives `foo(x)|`, never `foo(x))`.

Pure string functions: no LSP, no model.
"""
from __future__ import annotations

from typing import NamedTuple

CLOSERS = ")]}"
OPENER_OF = {")": "(", "]": "[", "}": "{"}
QUOTES = "\"'`"
# after an auto-closed quote an editor leaves whitespace, a closer or the end of the line (VS Code closes a quote
# only before such characters), so a quote followed by anything else opens a string instead and is kept
_AFTER_QUOTE = " \t\r\n" + CLOSERS + ",;:."


class Span(NamedTuple):
    start: int
    end: int  # start == end: nothing is left out
    same_line: bool  # the closers sit right after the cursor (else at the start of the next line)


NONE = Span(0, 0, True)


def closer_span(after: str) -> Span:
    """The span of `after` (the text after the cursor) that the prompt window leaves out first.

    On the cursor's line: the run of closing brackets and closing-position quotes that starts at the cursor.
    When the line's rest is blank, the closers that start the next line: Enter between brackets moves the closer
    there (`(\\n    |\\n)`), and the window must not change for it. The span then runs from the cursor line's end
    through those closers, so what followed them on their line (`:` after `def f(...)`) follows the cursor line.
    Both can hold at once (a quote auto-closed between brackets after Enter): `normalised_after` leaves out both.
    """
    n = _line_run(after, 0)
    return Span(0, n, True) if n else _next_line_span(after)


def _next_line_span(after: str) -> Span:
    eol = after.find("\n")
    if eol == -1 or after[:eol].strip(" \t\r"):
        return NONE
    indent = eol + 1
    while indent < len(after) and after[indent] in " \t":
        indent += 1
    run = _line_run(after, indent)
    return Span(eol, indent + run, False) if run else NONE


def _line_run(after: str, i: int) -> int:
    j = i
    while j < len(after):
        ch = after[j]
        if ch in CLOSERS:
            j += 1
        elif ch in QUOTES and (j + 1 == len(after) or after[j + 1] in _AFTER_QUOTE):
            j += 1
        else:
            break
    return j - i


def normalised_after(after: str) -> str:
    """The text after the cursor as the prompt window sees it: without the editor's closers."""
    rest = after[_line_run(after, 0):]
    start, end, _ = _next_line_span(rest)
    return rest[:start] + rest[end:]


def _closes(text: str, closers: str) -> list[int]:
    """Where `text` writes the first closers of `closers` itself: the indices of its own unmatched closers and
    string-ending quotes that stand for closers[0], closers[1], ... in order, up to the first that does not."""
    found: list[int] = []
    stack: list[str] = []
    quote: str | None = None  # the quote of a string `text` opened itself
    for idx, ch in enumerate(text):
        if len(found) == len(closers):
            break
        if quote is not None:
            if ch == quote:
                quote = None
            continue
        if ch in "([{":
            stack.append(ch)
        elif ch in CLOSERS:
            if stack and stack[-1] == OPENER_OF[ch]:
                stack.pop()
            elif closers[len(found)] == ch:
                found.append(idx)
            else:
                break
        elif ch in QUOTES:
            if not stack and closers[len(found)] == ch:
                found.append(idx)  # the closing quote of the string the cursor is in
            else:
                quote = ch
    return found


def consumed(text: str, after: str) -> int:
    """How many characters of `after` the suggestion `text` closes itself, so that accepting it replaces them:
    the closers right after the cursor that its own first-line unmatched closers and quotes stand for, in order.

    `foo(|)` with `x)`: 1. With `f(x)`: 0 (its `)` closes its own `(`). Closers on a later line are never
    consumed: replacing across lines is not what ghost text shows (`shown` trims the suggestion instead).
    """
    span = closer_span(after)
    if not span.same_line or span.start == span.end:
        return 0
    return len(_closes(text.split("\n", 1)[0], after[: span.end]))


def shown(text: str, after: str) -> str:
    """The suggestion as shown: without the closers it ends with that a following line already holds.

    Between brackets after Enter (`(\\n    |\\n)`), the window has no `)`, so the model may end `b)`; the
    file's own `)` on the next line closes it, so `b` is shown. Closers on the cursor's line before it are
    consumed instead (`(\\n    '|'\\n)` with `b')` shows `b'`).
    """
    n = _line_run(after, 0)
    start, end, _ = _next_line_span(after[n:])
    if start == end:
        return text
    body = text.rstrip(" \t")
    found = _closes(body, after[:n] + after[n + start : n + end].strip(" \t\r\n"))
    own = consumed(text, after)  # the cursor line's closers it writes: they replace those, not the next line's
    tail = found[own:] if len(found) > own and own == len(_closes(body, after[:n])) else []
    if not tail or tail != list(range(tail[0], len(body))):
        return text
    return body[: tail[0]]


def apply(before: str, after: str, text: str) -> tuple[str, str]:
    """(before, after) once the suggestion is accepted as an editor applies it: inserted, over the closers it
    closes."""
    return before + text, after[consumed(text, after):]

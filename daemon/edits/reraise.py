"""`raise ... from err` as a repeated edit: the exception a handler raises chained to the one it caught.

Adding ` from err` to each `raise` inside an `except ... as err:` block (ruff's B904) is made at places whose tokens
differ every time (each raises its own exception, each handler names its own), so the tokens around cannot pick them.
The statement itself says where it goes: the end of a `raise` statement that raises something, inside an `except`
clause, not chained yet. From one example: ` from NAME` where the example's handler bound NAME goes to each with the
name its own handler binds (a handler that binds none is skipped); ` from None` goes to each, as written.

Plain strings and tokens in, plain values out; synthesis.py asks here when it learns an insertion and for its places.
"""
from __future__ import annotations

import bisect
import re
from typing import Sequence

from tabd.daemon.edits import blocks
from tabd.daemon.edits.tokens import Token

_CHAINED = re.compile(r" from (\w+)\Z")
_HANDLER = re.compile(r"[ \t]*except\b[^\n]*?(?:\bas[ \t]+(\w+))?[ \t]*:[ \t]*(?:#[^\n]*)?\Z")
AS_HANDLER = ""  # the chain names the exception the handler bound, whatever its name


def learned(new: str, before: str, tokens: Sequence[Token], at: int, filename: str) -> str | None:
    """What an insertion of `new` at `at` (an offset of `before`, lexed as `tokens`) chains: AS_HANDLER (the handler's
    name), "None", or None when it is no chain added to the end of a `raise` inside an `except` clause."""
    m = _CHAINED.match(new)
    if m is None or not blocks.python(filename):
        return None
    span = _statement(tokens, _index_before(tokens, at))
    if span is None or tokens[span[1]].end != at:
        return None  # not at the end of a raise statement
    name = _handler_name(before, tokens[span[0]].start)
    if m.group(1) == "None":
        return "None" if name is not None else None
    return AS_HANDLER if name == m.group(1) else None


def places(text: str, tokens: Sequence[Token], chain: str) -> list[tuple[int, str]]:
    """Each (offset, inserted text) where a `raise` inside an `except` clause ends unchained, in text order."""
    out: list[tuple[int, str]] = []
    for i, tok in enumerate(tokens):
        if tok.text != "raise" or tok.kind != "keyword" or (i and tokens[i - 1].kind != "nl"):
            continue
        span = _statement(tokens, i)
        if span is None or span[1] == i or any(t.text == "from" and t.kind == "keyword" for t in tokens[i:span[1] + 1]):
            continue  # a bare `raise` re-raises as it is; a chained one is done
        name = _handler_name(text, tok.start)
        target = name if chain == AS_HANDLER else chain
        if name is None or not target:
            continue
        out.append((tokens[span[1]].end, f" from {target}"))
    return out


def _statement(tokens: Sequence[Token], i: int) -> tuple[int, int] | None:
    """(first, last) token indexes of the `raise` statement that holds tokens[i] (its last code token, brackets
    closed), or None when that is no raise."""
    k, depth = i, 0  # back to the statement's first token, across the lines its brackets hold
    while k >= 0 and not (tokens[k].kind == "nl" and depth <= 0):
        if tokens[k].kind == "mark" and tokens[k].text in ")]}":
            depth += 1
        elif tokens[k].kind == "mark" and tokens[k].text in "([{":
            depth -= 1
        k -= 1
    start = k + 1
    if start >= len(tokens) or tokens[start].text != "raise":
        return None
    depth, last = 0, start
    for k in range(start, len(tokens)):
        tok = tokens[k]
        if tok.kind == "nl" and depth == 0:
            break
        if tok.kind == "mark" and tok.text in "([{":
            depth += 1
        elif tok.kind == "mark" and tok.text in ")]}":
            depth = max(0, depth - 1)
        if tok.kind not in ("nl", "comment"):
            last = k
    return (start, last) if last >= i else None


def _handler_name(text: str, at: int) -> str | None:
    """The name the `except` clause that holds the line at `at` binds ("" when it binds none), or None when that line
    is in no `except` clause (the line that opens its block is not one)."""
    opens = blocks.header(text, at, len(blocks.indent_of(text, at)))
    if opens is None:
        return None
    m = _HANDLER.match(text[opens[0]:opens[1] - 1])
    return None if m is None else m.group(1) or ""


def _index_before(tokens: Sequence[Token], at: int) -> int:
    """The index of the last token that ends at or before `at`."""
    return max(bisect.bisect_right(tokens, at, key=lambda t: t.end) - 1, 0)

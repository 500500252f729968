"""A bracket changed to another kind, as a repeated edit: the bracket that closes it goes with it.

`("locale", "number")` -> `["locale", "number"]` (a tuple made a list) is made as two edits, the opener first: once
the `(` reads `[`, the `)` that closed it must read `]`, or the code does not parse. No context of tokens picks that
place (it is often lines below, after whatever the brackets hold); the nesting does: the closer of the kind the
opener was, that now closes an opener of the kind typed. From one example, wherever it stands in code.

Plain strings and tokens in, plain values out; propagation.py learns it from the last edit, synthesis.py asks here
for its places.
"""
from __future__ import annotations

from typing import Sequence

from tabd.daemon.edits.tokens import Token, place

PAIRS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = frozenset(PAIRS.values())


def learned(old: str, new: str) -> tuple[str, str] | None:
    """(the opener typed, the one it replaced) when an edit changed one opening bracket into another; else None."""
    return (new, old) if old in PAIRS and new in PAIRS and old != new else None


def places(tokens: Sequence[Token], change: tuple[str, str]) -> list[tuple[int, int, str]]:
    """(start, end, new text) of each closer of the replaced kind that closes an opener of the typed kind, in code,
    in text order."""
    typed, replaced = change
    found: list[tuple[int, int, str]] = []
    stack: list[str] = []
    for tok in tokens:
        if place(tok.kind) != "code":
            continue
        if tok.text in PAIRS:
            stack.append(tok.text)
        elif tok.text in _CLOSERS and stack:
            opener = stack.pop()
            if opener == typed and tok.text == PAIRS[replaced]:
                found.append((tok.start, tok.end, PAIRS[typed]))
    return found

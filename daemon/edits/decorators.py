"""A decorator added over the functions it names, as a repeated edit.

`@pytest.mark.skipif(NO_CBOR2, reason="cbor2 not available")` added over `def test_cbor2(...)` goes over each test
about cbor2, not over every test: the lines around a decorator (the end of the function above, a `def`) are the
same at every function, so they cannot pick the places, and the function's name can. From one example: a
decorator line whose words share one with the name of the function it went over (`cbor2`; not a word every
decorator or test has, such as `test`, `mark` or `skip`) goes over each function at that indentation whose name has
that word and that does not have that decorator yet: at the top of its decorators, or right over its `def`, as the
example went.

Plain strings in, plain values out; synthesis.py asks here when it learns a block of lines and for its places.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from tabd.daemon.edits import blocks

STACK_LINES = 40  # lines over a `def` read for its decorators, at most
_DEF = re.compile(r"^([ \t]*)(?:async[ \t]+)?def[ \t]+(\w+)", re.M)  # at a line's start: a run of spaces is read once
_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")  # snake_case, CamelCase and CAPS_2 split into words
# words too common to say which functions a decorator is for
_COMMON = frozenset({"test", "tests", "pytest", "mark", "skip", "skipif", "xfail", "reason", "not", "available",
                     "parametrize", "fixture", "self", "cls", "the", "and", "for", "with", "true", "false", "none",
                     "def", "async", "unittest", "only", "when", "requires", "get", "set"})


@dataclass(frozen=True)
class Named:
    words: frozenset[str]  # what the decorator and the function's name share
    top: bool  # added at the top of the function's decorators (else right over its `def`)


def learned(block: str, after: str, at: int, filename: str) -> Named | None:
    """What ties a line `block` added at offset `at` of `after` to the function under it, or None when it is no
    decorator line, or shares no word with that function's name."""
    line = block.strip()
    if not blocks.python(filename) or "\n" in line or not line.startswith("@"):
        return None
    indent = block[:len(block) - len(block.lstrip(" \t"))]
    under = _function_under(after, at + len(block), indent)
    if under is None:
        return None
    words = _words(line) & _words(under[1])
    if not words:
        return None
    return Named(frozenset(words), _stack_top(after, at, indent) == at)


def places(text: str, block: str, named: Named) -> list[tuple[int, str]]:
    """Each (offset, block) over a function whose name has one of the words, at the block's indentation, that does
    not have the decorator yet, in text order."""
    indent = block[:len(block) - len(block.lstrip(" \t"))]
    line = block.strip()
    out: list[tuple[int, str]] = []
    for m in _DEF.finditer(text):
        if m.group(1) != indent or not named.words & _words(m.group(2)):
            continue
        top = _stack_top(text, m.start(), indent)
        if any(x.strip() == line for x in text[top:m.start()].splitlines()):
            continue  # decorated already
        out.append((top if named.top else m.start(), block))
    return out


def _function_under(text: str, at: int, indent: str) -> tuple[int, str] | None:
    """(offset, name) of the `def` that the decorators from `at` on stand over, or None."""
    for m in _DEF.finditer(text, at):
        between = text[at:m.start()]
        if m.group(1) != indent or any(x.strip() and not x.startswith((indent + "@", indent + " ", indent + "\t",
                                                                        indent + ")"))
                                       for x in between.splitlines()):
            return None
        return m.start(), m.group(2)
    return None


def _stack_top(text: str, at: int, indent: str) -> int:
    """The start of the first decorator line of the run of decorators right over the line at offset `at` (`at` itself
    when none is)."""
    top = at
    start = at
    for _ in range(STACK_LINES):  # (a function's body, indented deeper, reads as continuation lines: bounded)
        if start <= 0:
            break
        prev = text.rfind("\n", 0, start - 1) + 1
        line = text[prev:start - 1]
        if not line.strip() or not (line.startswith(indent) and line[len(indent):len(indent) + 1] in ("@", " ", "\t",
                                                                                                      ")")):
            break  # a blank line, or a line that is no decorator nor a decorator's continuation
        if line.startswith(indent + "@"):
            top = prev
        start = prev
    return top


def _words(name: str) -> set[str]:
    return {w.lower() for w in _WORDS.findall(name) if len(w) >= 3} - _COMMON

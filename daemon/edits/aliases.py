"""`: TypeAlias` as a repeated edit: a module's type aliases marked explicitly (PEP 613).

`Items = Iterable[tuple[KT, VT]]` -> `Items: t.TypeAlias = Iterable[tuple[KT, VT]]` is made at places whose tokens
differ every time (each alias has its own name and its own type), so the tokens around cannot pick them, and a
change made at one `NAME = ...` line says nothing about the next `NAME = ...` line. The statement says where it
goes: after the name of each module-level assignment whose value reads as a type (a subscripted name, a union with
`|`, a builtin type, `Any`, a class's name given another), not annotated yet. A call (`TypeVar("T")`,
`NewType(...)`) is no alias. From one
example: the annotation as the example wrote it (`: TypeAlias`, `: t.TypeAlias`, `: typing.TypeAlias`).

Plain strings and tokens in, plain values out; synthesis.py asks here when it learns an insertion and for its places.
"""
from __future__ import annotations

import re
from typing import Sequence

from tabd.daemon.edits import blocks
from tabd.daemon.edits.tokens import Token

_ANNOTATION = re.compile(r": ?(?:\w+\.)*TypeAlias\Z")
_NAME = re.compile(r"[A-Za-z_]\w*\Z")
_ASSIGNED = re.compile(r"[ \t]*=(?!=)")
# the value's start: a dotted name and what follows it (a subscript, a union, or nothing more on the line)
_VALUE = re.compile(r"[ \t]*=[ \t]*((?:\w+\.)*(\w+))[ \t]*(\[|\||#|\n|\Z)")
_TYPES = frozenset({"str", "int", "bool", "float", "complex", "bytes", "bytearray", "list", "dict", "tuple", "set",
                    "frozenset", "type", "object", "Any"})


def learned(new: str, before: str, at: int, filename: str) -> str | None:
    """The annotation an insertion of `new` at `at` (an offset of `before`) marks a type alias with, or None when it
    is no `: TypeAlias` added after the name of a module-level `NAME = TYPE`."""
    if not blocks.python(filename) or _ANNOTATION.match(new) is None:
        return None
    start = before.rfind("\n", 0, at) + 1
    if _NAME.match(before[start:at]) is None or not _is_type(before, at):
        return None
    return new


def places(text: str, tokens: Sequence[Token], annotation: str) -> list[tuple[int, str]]:
    """Each (offset, inserted text) right after the name of a module-level assignment of a type that no annotation
    marks yet, in text order."""
    out: list[tuple[int, str]] = []
    for i, tok in enumerate(tokens):
        if tok.kind != "name" or (i and tokens[i - 1].kind != "nl") or text[tok.start - 1:tok.start] not in ("", "\n"):
            continue  # not a name at the start of a module-level line (a string's text is no token)
        if _ASSIGNED.match(text, tok.end) is not None and _is_type(text, tok.end):
            out.append((tok.end, annotation))
    return out


def _is_type(text: str, at: int) -> bool:
    """Whether the assignment whose `=` follows `at` assigns what reads as a type: a capitalised or builtin type
    name subscripted or in a union (`Iterable[...]`, `KT | MissingT`, `list[str]`), a builtin type alone, or a
    class's name alone given another class's name (`Reader = RequiresContext`)."""
    m = _VALUE.match(text, at)
    if m is None:
        return False
    name, follows = m.group(2), m.group(3)
    if follows in ("[", "|"):
        return name[:1].isupper() or name in _TYPES
    target = text[text.rfind("\n", 0, at) + 1:at]
    return name in _TYPES or (_camel(name) and _camel(target))  # `Reader = RequiresContext`: a class's other name


def _camel(name: str) -> bool:
    """A class's spelling (`RequiresContext`), not a constant's (`MISSING`) nor a variable's."""
    return name[:1].isupper() and any(c.islower() for c in name)

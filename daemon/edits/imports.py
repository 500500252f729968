"""A local import as a repeated edit: the names a block of Python import lines binds, and the places that need it.

Moving a module's import into the functions that use it (`import re` at the top of each one, so the module loads
faster or a dependency stays optional) is made at places the lines around cannot pick: each function begins
differently, and not every function wants it. The import itself says where it goes: at the top of each function
below whose body uses a name it binds, where neither the function nor the module binds that name already (there the
name is unbound today: without the import, the call fails). So one example is enough, and a function that does not
use the name is never proposed.

Plain strings and tokens in, plain values out; synthesis.py places the block (Lines) and asks here which places want
it.
"""
from __future__ import annotations

import ast
import bisect
import re
import textwrap
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from tabd.daemon.edits import blocks
from tabd.daemon.edits.tokens import Token

_LINE_START = re.compile(r"\n([ \t]*)(?=\S)")  # a line that holds something, and its indentation


@dataclass(frozen=True)
class LocalImport:
    """Whole lines that import, inside a body: the names they bind, and where in each body they go."""

    names: tuple[str, ...]
    top: bool  # at the top of the body (under its header, or its docstring); else right over the first use


def local_import(block: str, filename: str, after: str, tokens: Sequence[Token], x: int,
                 indent: str) -> LocalImport | None:
    """`block`, standing at x in `after` (tokens: after's), read as a local import; None when it is anything else:
    not indented Python import statements alone (a top-level import: the module has it once)."""
    names = bound(block, filename)
    if not names or not _in_function(after, tokens, x, indent):
        return None  # `if TYPE_CHECKING:` imports: the module's, once
    j = _index_at(tokens, x)
    return LocalImport(names, j < len(tokens) and at_top(after, tokens, x, j, indent))


def bound(block: str, filename: str) -> tuple[str, ...]:
    """The names `block` binds when it is indented Python import statements and nothing else (`    import re`,
    `    from a import b as c`); () for anything else."""
    if not blocks.python(filename) or not block[:1].isspace() or not block.strip():
        return ()
    try:
        tree = ast.parse(textwrap.dedent(block))
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # the user's text, whatever it holds
        return ()
    names: list[str] = []
    for node in tree.body:
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            return ()
        for alias in node.names:
            if alias.name == "*":
                return ()
            names.append(alias.asname or alias.name.split(".")[0])
    return tuple(dict.fromkeys(names))


def wanted(text: str, tokens: Sequence[Token], x: int, j: int, indent: str, imp: LocalImport) -> bool:
    """The import goes at x (the start of a line indented `indent`, tokens[j] its first token): the top of a body, or
    the line of the body's first use, as the example stood; the body uses a name it binds, and neither the body nor
    the module binds it."""
    if not _in_function(text, tokens, x, indent):
        return False  # a line inside a signature's brackets, or a class's or an `if`'s body
    if imp.top:
        if not at_top(text, tokens, x, j, indent):
            return False
        begins, here = x, _body_end(text, x, indent)
    else:
        if tokens[j].kind == "string":
            return False  # not a docstring's line
        begins, here = _body_start(text, x, indent), _body_end(text, x + 1, indent, deeper=True)
        if _uses(tokens, _index_at(tokens, begins), begins, x, imp.names):
            return False  # a line above uses it already: the first use is there
    if not _uses(tokens, j, x, here, imp.names):
        return False
    body = text[begins:_body_end(text, x, indent)]
    return not any(_binds_in(body, name) or _binds_at_top(text, name) for name in imp.names)


def at_top(text: str, tokens: Sequence[Token], x: int, j: int, indent: str) -> bool:
    """The line at x (whose first token is tokens[j]) begins a body indented `indent`: the line above is its header
    (`def f(...):`, at a shallower indentation), or the docstring right under that header. Not the docstring's own
    line: an import goes below it."""
    if tokens[j].kind == "string":
        return False
    i = j - 1  # the last token above x
    while i >= 0 and tokens[i].kind == "nl":
        i -= 1
    if i < 0:
        return False
    if tokens[i].text == ":":
        return len(blocks.indent_of(text, tokens[i].start)) < len(indent)
    if tokens[i].kind != "string":
        return False
    k = i  # back to the docstring's first piece: the statement before it must be the header
    while k > 0 and tokens[k - 1].kind in ("string", "nl"):
        k -= 1
    while k < i and tokens[k].kind == "nl":
        k += 1
    if blocks.indent_of(text, tokens[k].start) != indent:
        return False
    h = k - 1
    while h >= 0 and tokens[h].kind == "nl":
        h -= 1
    return h >= 0 and tokens[h].text == ":" and len(blocks.indent_of(text, tokens[h].start)) < len(indent)


def _in_function(text: str, tokens: Sequence[Token], x: int, indent: str) -> bool:
    """The line at x stands in a function's body: the line above the body is the end of a `def` statement."""
    i = _index_at(tokens, _body_start(text, x, indent)) - 1
    while i >= 0 and tokens[i].kind == "nl":
        i -= 1
    if i < 0 or tokens[i].text != ":":
        return False
    depth = 0  # back to the statement's first token, across the brackets of its signature
    while i > 0 and (depth or tokens[i - 1].kind != "nl"):
        i -= 1
        if tokens[i].text in ")]}":
            depth += 1
        elif tokens[i].text in "([{" and depth:
            depth -= 1
    return tokens[i].text in ("def", "async")


def _uses(tokens: Sequence[Token], j: int, start: int, end: int, names: tuple[str, ...]) -> bool:
    """A plain name (not an attribute) in `names` stands in [start, end); tokens[j] is the first token from start."""
    for k in range(j, len(tokens)):
        tok = tokens[k]
        if tok.start >= end:
            break
        if tok.start >= start and tok.kind == "name" and tok.text in names and not (
                k and tokens[k - 1].text == "." and tokens[k - 1].end == tok.start):
            return True
    return False


def _index_at(tokens: Sequence[Token], at: int) -> int:
    """The index of the first token that starts at or after `at`."""
    return bisect.bisect_left(tokens, at, key=lambda t: t.start)


def _body_start(text: str, x: int, indent: str) -> int:
    """Where the body that holds the line at x (indented `indent`) begins: right after the line that opens it."""
    opens = blocks.header(text, x, len(indent))
    return opens[1] if opens is not None else 0


def blank_line(text: str, at: int) -> bool:
    """The line that begins at `at` is blank (or the text ends there)."""
    end = text.find("\n", at)
    return not text[at:end if end >= 0 else len(text)].strip()


def _body_end(text: str, x: int, indent: str, deeper: bool = False) -> int:
    """Where the body indented `indent` that holds x ends: the first non-blank line from x indented less (`deeper`:
    not deeper, the end of the statement at x with its block)."""
    for m in _LINE_START.finditer(text, x):
        if len(m.group(1)) < len(indent) or (deeper and len(m.group(1)) == len(indent)):
            return m.start() + 1
    return len(text)


def _importing(name: str) -> str:
    """A pattern for an import statement that binds `name` (`import re`, `import a.b as re`, `from x import re`)."""
    n = re.escape(name)
    return rf"import[ \t]+(?:[\w.]+[ \t]+as[ \t]+)?{n}\b|from[ \t]+\S+[ \t]+import[ \t]+[^\n]*\b{n}\b"


def _binds_in(body: str, name: str) -> bool:
    """An import in the body binds the name already."""
    return re.search(rf"^[ \t]*(?:{_importing(name)})", body, re.M) is not None


@lru_cache(maxsize=64)  # asked at each place of one text
def _binds_at_top(text: str, name: str) -> bool:
    """The module binds the name at its top level: an import, a def or class, an assignment at the line's start."""
    n = re.escape(name)
    return re.search(rf"^(?:{_importing(name)}|(?:async[ \t]+)?def[ \t]+{n}\b|class[ \t]+{n}\b|{n}[ \t]*(?::[^=\n]*)?=)",
                     text, re.M) is not None

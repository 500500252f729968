"""Functions annotated never to return (`-> NoReturn`, `-> t.Never`): a change of a return annotation to one of those
goes only over functions that end by raising. `-> None` -> `-> t.NoReturn` made over `fail()` is not due over
`warn()` beside it, which returns; a type checker rejects the annotation there.

Python only (the syntax tree, scopes.parsed); where the text does not parse, nothing is known and nothing is refused.
"""
from __future__ import annotations

import ast
import bisect
import re
from typing import Callable

from tabd.daemon.edits import scopes

_NEVER = frozenset({"NoReturn", "Never"})
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_KEEP = 8  # trees read (the tree is kept with its reading, so its id is not another's)
_read: dict[int, tuple[ast.Module, frozenset[int]]] = {}


def never(new: str) -> bool:
    """Whether `new` names the type of a function that never returns (`NoReturn`, `t.NoReturn`, `typing.Never`)."""
    return new.rsplit(".", 1)[-1].strip() in _NEVER


def returning(text: str, filename: str) -> Callable[[int], bool]:
    """A test of offsets in `text`: whether the offset stands in the return annotation of a function that can end
    without raising (its last statement does not raise on every path). Nothing is when the text does not parse."""
    tree = scopes.parsed(text, filename)
    if tree is None:
        return lambda at: False
    lines = _returning(tree)
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    return lambda at: bisect.bisect_right(starts, at) in lines


def _returning(tree: ast.Module) -> frozenset[int]:
    """The lines (1-based) of the return annotations of functions that can return; read once per tree (the walk asks
    at each place)."""
    kept = _read.get(id(tree))
    if kept is None or kept[0] is not tree:
        if len(_read) >= _KEEP:
            _read.pop(next(iter(_read)))
        try:
            found = frozenset(line for n in ast.walk(tree) if isinstance(n, _FUNCTIONS) and n.returns is not None
                              and not _raises(n.body)
                              for line in range(n.returns.lineno, (n.returns.end_lineno or n.returns.lineno) + 1))
        except RecursionError:  # blocks nested deeper than Python recurses: nothing known, nothing refused
            found = frozenset()
        kept = _read[id(tree)] = (tree, found)
    return kept[1]


def _raises(body: list[ast.stmt]) -> bool:
    """Whether a block ends by raising on every path through its last statement (an `elif` chain is walked, not
    recursed into: a long one is a long list, not a deep call)."""
    while body:
        last = body[-1]
        if isinstance(last, ast.Raise):
            return True
        if isinstance(last, ast.If):
            if not _raises(last.body):
                return False
            body = last.orelse
            continue
        if isinstance(last, (ast.With, ast.AsyncWith)):
            body = last.body
            continue
        if isinstance(last, ast.Try):
            if _raises(last.finalbody):
                return True
            if not all(_raises(h.body) for h in last.handlers):
                return False
            body = last.orelse or last.body
            continue
        if isinstance(last, ast.While):
            forever = isinstance(last.test, ast.Constant) and bool(last.test.value)
            return forever and not any(isinstance(n, ast.Break) for n in ast.walk(last))
        return False
    return False

"""A Python function's local names, for a rename that stays inside the function it was made in.

Renaming a local variable (`tree` -> `module` in one function) renames that variable, not every `tree` in the
module: another function's `tree` is another variable. A rename made where the name is bound in the function that
holds it (a parameter, an assignment, a `for`, `with` or `except` target), and not at the module's top level, is
proposed inside that function only. The function is named by its qualified name (and which of those so named), so
the scope survives the edits made since; a document that does not parse, or a name the module binds, has no scope.
The other way round, the module's name renamed outside the functions where that spelling is a variable of their own
(`date` the class, in an annotation, where `fromdate` has a parameter `date`) does not reach those functions' bodies
(shadowed).

Plain strings in, plain values out; synthesis.py asks here when it learns a rename and for its places.
"""
from __future__ import annotations

import ast
import hashlib
import re
from typing import Callable, Iterable, Iterator, TypeVar

from tabd.daemon.edits import blocks

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_KEEP = 8  # parsed documents remembered (the learning and the walk ask about the same text)
_Function = ast.FunctionDef | ast.AsyncFunctionDef
_BREAK = re.compile(r"\r\n|\r|\n")
_K = TypeVar("_K")
_V = TypeVar("_V")


_parsed: dict[bytes, ast.Module | None] = {}
_spans: dict[tuple[bytes, str], tuple[int, int] | None] = {}  # (text's digest, function) -> its span
_shadows: dict[tuple[bytes, str], tuple[tuple[int, int, int], ...]] = {}  # (digest, name) -> where it is a local


def local_scope(text: str, at: int, names: Iterable[str], filename: str) -> str | None:
    """The innermost function holding offset `at` that binds one of `names` itself, when the module's top level binds
    none of them, as its qualified name and which of the functions so named it is (`C.g#0`); None otherwise (or when
    the text does not parse)."""
    tree = _tree(text, filename)
    if tree is None:
        return None
    names = set(names)
    if names & _bound(tree.body):
        return None
    line = text.count("\n", 0, at) + 1
    found: _Function | None = None
    for _, function in _functions(tree.body, "", line):  # outermost first: the innermost that binds one wins
        own, declared = _locals(function)
        if names & declared:
            found = None  # another scope's name, here
        elif names & own:
            found = function
    if found is None:
        return None
    every = list(_functions(tree.body, ""))
    qualname = next(q for q, f in every if f is found)
    same = [f for q, f in every if q == qualname]
    return f"{qualname}#{same.index(found)}"  # the n-th function of that name (one in each branch of an `if`)


def span(text: str, name: str, filename: str) -> tuple[int, int] | None:
    """The offsets the function `name` (local_scope's: a qualified name and which of those so named) spans in
    `text`, its `def` line to its body's end; found once per text and name (each place the walk tries asks)."""
    if not blocks.python(filename):
        return None
    return _remembered(_spans, (_digest(text), name), lambda: _span(text, name, filename))


def _span(text: str, name: str, filename: str) -> tuple[int, int] | None:
    tree = _tree(text, filename)
    if tree is None:
        return None
    qualname, _, n = name.rpartition("#")
    same = [f for q, f in _functions(tree.body, "") if q == qualname]
    if not n.isdigit() or int(n) >= len(same):
        return None
    node = same[int(n)]
    starts = _line_starts(text)
    last = node.end_lineno or node.lineno
    return starts[node.lineno - 1], starts[last] if last < len(starts) else len(text)


def shadowed(text: str, name: str, filename: str) -> tuple[tuple[int, int, int], ...]:
    """The functions in which `name` is a variable of their own (a parameter, an assignment, a `for`, `with` or
    `except` target, not declared `global`), each as the offsets of its `def`, its body's start and its end: in the
    body `name` is not the module's (`date`, a parameter of `fromdate`, is not the class `date` imported at the top);
    a signature's annotations and defaults stand outside the body, where it still is. Found once per text and
    name."""
    if not blocks.python(filename):
        return ()
    return _remembered(_shadows, (_digest(text), name), lambda: _shadowed(text, name, filename))


def _shadowed(text: str, name: str, filename: str) -> tuple[tuple[int, int, int], ...]:
    tree = _tree(text, filename)
    if tree is None:
        return ()
    starts = _line_starts(text)
    out: list[tuple[int, int, int]] = []
    for _, function in _functions(tree.body, ""):
        own, declared = _locals(function)
        if name in declared or name not in own:
            continue
        first, last = function.body[0], function.end_lineno or function.lineno
        top = min((d.lineno for d in function.decorator_list), default=function.lineno)
        if first.lineno > len(starts):
            continue
        line = text[starts[first.lineno - 1]:starts[first.lineno - 1] + first.col_offset]
        column = len(line.encode("utf-8", "surrogatepass")[:first.col_offset].decode("utf-8", "ignore"))  # bytes
        end = starts[last] if last < len(starts) else len(text)
        out.append((starts[top - 1], starts[first.lineno - 1] + column, end))
    return tuple(out)


def parsed(text: str, filename: str) -> ast.Module | None:
    """The module's syntax tree, parsed once per text (the last _KEEP remembered); None when it is not Python or does
    not parse."""
    return _tree(text, filename)


def _tree(text: str, filename: str) -> ast.Module | None:
    if not blocks.python(filename):
        return None
    key = _digest(text)
    if key not in _parsed:
        if len(_parsed) >= _KEEP:
            _parsed.pop(next(iter(_parsed)))
        try:
            _parsed[key] = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            _parsed[key] = None  # a document mid-edit, null bytes, or nesting too deep to parse: no scope
    return _parsed[key]


def _remembered(cache: dict[_K, _V], key: _K, compute: Callable[[], _V]) -> _V:
    """cache[key], computed on the first ask; the last _KEEP kept."""
    if key not in cache:
        if len(cache) >= _KEEP:
            cache.pop(next(iter(cache)))
        cache[key] = compute()
    return cache[key]


def _line_starts(text: str) -> list[int]:
    """The offset each line starts at, as the parser counts lines (not at a form feed or a line separator)."""
    return [0] + [m.end() for m in _BREAK.finditer(text)]


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _functions(body: list[ast.stmt], prefix: str, line: int | None = None) -> Iterator[tuple[str, _Function]]:
    """The functions a block defines and those within them, in the text's order (outer before inner), with their
    qualified names; `line`: only those whose lines hold it."""
    for node in _own_defs(body):
        if line is not None and not node.lineno <= line <= (node.end_lineno or node.lineno):
            continue
        if isinstance(node, _FUNCTIONS):
            yield prefix + node.name, node
        yield from _functions(node.body, prefix + node.name + ".", line)


def _own_defs(body: list[ast.stmt]) -> Iterator[_Function | ast.ClassDef]:
    """The functions and classes a block defines, within its `if`, `try`, `with` and loops too."""
    for node in _own_nodes(body):
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            yield node


def _own_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node of a block, not entering the functions, classes and lambdas it defines (those are yielded, not
    entered)."""
    todo: list[ast.AST] = list(reversed(body))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (*_FUNCTIONS, ast.ClassDef, ast.Lambda)):
            todo.extend(reversed(list(ast.iter_child_nodes(node))))


def _locals(function: _Function) -> tuple[set[str], set[str]]:
    """A function's own names (its parameters and what its body binds), and those it declares `global` or
    `nonlocal`."""
    a = function.args
    params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x is not None}
    declared = {n for node in _own_nodes(function.body) if isinstance(node, (ast.Global, ast.Nonlocal))
                for n in node.names}
    return params | _bound(function.body), declared


def _bound(body: list[ast.stmt]) -> set[str]:
    """The names a block binds itself: assignment, `for`, `with` and `except` targets, imports, the functions and
    classes it defines (not what those bind inside)."""
    names: set[str] = set()
    for node in _own_nodes(body):
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names

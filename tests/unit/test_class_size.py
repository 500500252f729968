"""No class on the serving path has more than 20 methods (issue 42): a class past that does several jobs, and its
jobs are rooms of their own (CompletionService had 35, TabdServer 27, Client 26 before they were taken apart).

Methods are the functions defined directly in a class's body (`ast`: def and async def, properties and static
methods included; functions nested in them and the methods of nested classes are not its own).
"""
from __future__ import annotations

import ast
from pathlib import Path

from test_doors import ROOT, shown

SERVING_PATH = ("daemon/runtime", "daemon/edits", "daemon/context", "daemon/speculation", "lsp", "cache")
MAX_METHODS = 20


def methods_per_class(source: str, where: str) -> dict[str, int]:
    """'file:Class' -> the number of functions defined directly in that class's body, for every class in `source`."""
    counts = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            counts[f"{where}:{node.name}"] = len(methods)
    return counts


def serving_classes() -> dict[str, int]:
    counts: dict[str, int] = {}
    for folder in SERVING_PATH:
        for path in sorted((ROOT / folder).rglob("*.py")):
            counts.update(methods_per_class(path.read_text(encoding="utf-8"), shown(path)))
    return counts


def test_the_count_is_of_the_methods_in_the_class_body_only():
    planted = "class Big:\n" + "".join(f"    def m{i}(self):\n        def inner(): pass\n" for i in range(21))
    planted += "    async def a(self): pass\n    class Inner:\n        def x(self): pass\n"
    assert methods_per_class(planted, "planted.py") == {"planted.py:Big": 22, "planted.py:Inner": 1}


def test_no_class_on_the_serving_path_has_more_than_20_methods():
    counts = serving_classes()
    assert len(counts) > 50, sorted(counts)  # the folders were found and read
    over = {name: n for name, n in counts.items() if n > MAX_METHODS}
    assert not over, "classes over %d methods: %s" % (
        MAX_METHODS, ", ".join(f"{name} has {n}" for name, n in sorted(over.items(), key=lambda kv: -kv[1])))

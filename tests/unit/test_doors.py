"""Rooms keep their doors: which parts of tabd may import which, read from the source without running it.

Every module under daemon/, lsp/, predictor/ and cache/ is parsed with `ast`;
every import counts, those inside functions too (a lazy import is still a
door), except those under `if TYPE_CHECKING:`, which never run and are only
counted for the rules between folders. A failure names the file, the line and
the rule it breaks.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("daemon", "lsp", "predictor", "cache")  # tabd.<folder> lives in <folder>/ (pyproject's package-dir)
HEAVY = {"lsprotocol": {"lsp"}, "pygls": {"lsp"}, "torch": {"predictor"}, "transformers": {"predictor"}}
TORCH = ("torch", "transformers", "safetensors")

# What `tabd serve` runs: `python -m tabd.daemon serve` loads the CLI, which loads the serve command alone.
SERVE_ENTRY = ("tabd.daemon.__main__", "tabd.daemon.cli", "tabd.daemon.commands.serve")
NOT_SERVING = ("tabd.daemon.bench", "tabd.predictor.bench", "tabd.daemon.sessions", "tabd.daemon.telemetry",
               "tabd.predictor.training")
SERVING_EXCEPTIONS = {
    "tabd.daemon.telemetry.metrics": "`tabd serve --metrics` serves them",
    "tabd.daemon.sessions.record": "`tabd serve --record` appends the edits it sees to a session file",
    "tabd.daemon.sessions.format": "... in the session file format, the contract replay reads",
}


@dataclass(frozen=True)
class Import:
    importer: str  # the module whose source holds the import
    module: str  # the tabd module (or the third-party top-level package) it loads
    names: tuple[str, ...]  # the names a `from module import ...` takes from it
    line: int
    type_only: bool  # under `if TYPE_CHECKING:`: never run

    @property
    def where(self) -> str:
        return f"{shown(path_of(self.importer))}:{self.line}"


def module_names() -> dict[str, Path]:
    """tabd's module name -> its file, for every module in the four folders."""
    names = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            names[".".join(("tabd", *parts))] = path
    return names


MODULES = module_names()


def path_of(module: str) -> Path:
    return MODULES[module]


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def is_package(module: str) -> bool:
    return path_of(module).name == "__init__.py"


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _absolute(importer: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = importer if is_package(importer) else importer.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


@cache
def imports_of(importer: str) -> tuple[Import, ...]:
    """Every import in the module's source, lazy ones included; `from pkg import mod` counts as importing pkg.mod."""
    tree = ast.parse(path_of(importer).read_text(), str(path_of(importer)))
    typed = _type_checking_lines(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(importer, alias.name, (), node.lineno, node.lineno in typed))
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(importer, node)
            names = tuple(alias.name for alias in node.names)
            found.append(Import(importer, base, names, node.lineno, node.lineno in typed))
            for name in names:
                if f"{base}.{name}" in MODULES:
                    found.append(Import(importer, f"{base}.{name}", (), node.lineno, node.lineno in typed))
    return tuple(found)


def tabd_imports(importer: str) -> list[Import]:
    return [i for i in imports_of(importer) if i.module in MODULES]


def under(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def with_parents(module: str) -> list[str]:
    """The module and the packages Python runs first to import it."""
    parts = module.split(".")
    return [m for m in (".".join(parts[:n]) for n in range(2, len(parts) + 1)) if m in MODULES]


@cache
def closure(*entries: str) -> dict[str, Import | None]:
    """Every tabd module that importing `entries` may load, lazy imports included: module -> the import that first
    reached it (None for an entry)."""
    reached: dict[str, Import | None] = {}
    todo: list[tuple[str, Import | None]] = [(m, None) for e in entries for m in with_parents(e)]
    while todo:
        module, via = todo.pop()
        if module in reached:
            continue
        reached[module] = via
        for imp in tabd_imports(module):
            if not imp.type_only:
                todo.extend((m, imp) for m in with_parents(imp.module))
    return reached


def loads_torch(module: str) -> bool:
    return any(i.module.split(".")[0] in TORCH for m in closure(module) for i in imports_of(m) if not i.type_only)


# -- the rules: each a list of "file:line: rule", empty when the code keeps it ----------------------------------

def rule_lsp_door() -> list[str]:
    """lsp/ imports the runtime (next-edit suggestions' too), cache/ and predictor's types; they never import lsp/."""
    allowed = ("tabd.lsp", "tabd.daemon.runtime", "tabd.daemon.edits", "tabd.cache", "tabd.predictor.types")
    broken = [f"{i.where}: lsp/ imports {i.module} (lsp/ may import only {', '.join(allowed)})"
              for m in MODULES if under(m, "tabd.lsp") for i in tabd_imports(m) if not under(i.module, *allowed)]
    broken += [f"{i.where}: tabd.daemon.runtime imports {i.module} (the runtime knows no LSP)"
               for m in MODULES if under(m, "tabd.daemon.runtime", "tabd.daemon.edits") for i in tabd_imports(m)
               if under(i.module, "tabd.lsp")]
    return broken


def rule_predictor_stands_alone() -> list[str]:
    return [f"{i.where}: tabd.predictor imports {i.module} (the predictor imports nothing from daemon, lsp or cache)"
            for m in MODULES if under(m, "tabd.predictor") for i in tabd_imports(m)
            if under(i.module, "tabd.daemon", "tabd.lsp", "tabd.cache")]


# predictor/'s rooms (predictor/__init__.py): which room's modules each may import; types.py at the root is open to all.
# backends/ stands on top of the other four; bench/ and training/ use any, and no room uses them.
PREDICTOR_ROOMS = {
    "prompt": ("prompt",),
    "text": ("text", "prompt", "engine"),  # the copy candidate is verified by running the model (verify.py)
    "engine": ("engine", "loading"),  # the torch-free runner and the hand-over read weights through fastload.py
    "loading": ("loading", "engine", "backends.backend_settings"),  # the engine choice is built from LocalSettings
    "backends": ("backends", "prompt", "text", "engine", "loading"),
}


def rule_predictor_rooms_keep_their_order() -> list[str]:
    broken = []
    for m in MODULES:
        room = m.split(".")[2] if under(m, "tabd.predictor") and m.count(".") >= 2 else None
        if room not in PREDICTOR_ROOMS:
            continue
        rooms = tuple(f"tabd.predictor.{r}" for r in PREDICTOR_ROOMS[room])
        for i in tabd_imports(m):
            if (under(i.module, "tabd.predictor") and i.module not in ("tabd.predictor", "tabd.predictor.types")
                    and not under(i.module, *rooms)):
                broken.append(f"{i.where}: predictor/{room}/ imports {i.module} (predictor/{room}/ may import "
                              f"{', '.join(PREDICTOR_ROOMS[room])} and types)")
    broken += [f"{shown(path_of(m))}: {m} loads torch (prompt building stays torch-free: remote engines, the cache "
               f"and the LSP side build prompts)" for m in MODULES if under(m, "tabd.predictor.prompt") and loads_torch(m)]
    return broken


def rule_cache_knows_neither_lsp_nor_torch() -> list[str]:
    broken = []
    for m in (m for m in MODULES if under(m, "tabd.cache")):
        for i in tabd_imports(m):
            if under(i.module, "tabd.lsp", "tabd.daemon"):
                broken.append(f"{i.where}: tabd.cache imports {i.module} (the cache knows neither LSP nor the daemon)")
            elif under(i.module, "tabd.predictor") and loads_torch(i.module):
                broken.append(f"{i.where}: tabd.cache imports {i.module}, which loads torch (the cache knows no torch)")
    return broken


def rule_serving_path_is_lean() -> list[str]:
    reached = closure(*SERVE_ENTRY)
    exempt_parents = {p for e in SERVING_EXCEPTIONS if e in reached for p in with_parents(e)}
    broken = []
    for module, via in sorted(reached.items()):
        if under(module, *NOT_SERVING) and module not in exempt_parents:
            chain = via.where if via is not None else "an entry"
            broken.append(f"{chain}: `tabd serve` may load {module} (via {via.importer if via else '-'}; "
                          f"benches, sessions, telemetry and training stay off the serving path)")
    return broken


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def rule_no_private_name_crosses_a_module() -> list[str]:
    broken = []
    for m in MODULES:
        tree = ast.parse(path_of(m).read_text())
        bound: dict[str, str] = {}  # local name -> the tabd module an import bound to it
        for i in tabd_imports(m):
            if i.module == m:
                continue
            for name in i.names:
                if _private(name) and f"{i.module}.{name}" not in MODULES:
                    broken.append(f"{i.where}: {m} imports {name} from {i.module} (a private name stays in its module)")
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in MODULES and alias.asname:
                        bound[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(m, node)
                for alias in node.names:
                    if f"{base}.{alias.name}" in MODULES:
                        bound[alias.asname or alias.name] = f"{base}.{alias.name}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                target = None
                if isinstance(node.value, ast.Name):
                    target = bound.get(node.value.id)
                elif isinstance(node.value, ast.Attribute):  # import tabd.x.y; tabd.x.y._z
                    target = ast.unparse(node.value) if ast.unparse(node.value) in MODULES else None
                if target is not None and target != m:
                    broken.append(f"{shown(path_of(m))}:{node.lineno}: {m} reads {target}.{node.attr} "
                                  f"(a private name stays in its module)")
    return broken


def rule_heavy_packages_stay_in_their_folders() -> list[str]:
    """LSP types stop at lsp/, torch at predictor/ (issue 12 item 7)."""
    return [f"{i.where}: {m} imports {i.module} ({i.module.split('.')[0]} stays in "
            f"{', '.join(sorted(HEAVY[i.module.split('.')[0]]))}/)"
            for m in MODULES for i in imports_of(m)
            if i.module.split(".")[0] in HEAVY and m.split(".")[1] not in HEAVY[i.module.split(".")[0]]]


def rule_module_names_are_unique() -> list[str]:
    """A module's name says what it holds, so no two modules share one (a reader finds a line's home by name)."""
    by_name: dict[str, list[str]] = {}
    for m in MODULES:
        name = m.rsplit(".", 1)[-1]
        if name not in ("__init__", "__main__") and not MODULES[m].name.startswith("__init__"):
            by_name.setdefault(name, []).append(m)
    return [f"{name}.py: {', '.join(sorted(ms))} (module names are unique)"
            for name, ms in sorted(by_name.items()) if len(ms) > 1]


RULES = [rule_lsp_door, rule_predictor_stands_alone, rule_predictor_rooms_keep_their_order,
         rule_cache_knows_neither_lsp_nor_torch, rule_serving_path_is_lean,
         rule_no_private_name_crosses_a_module, rule_heavy_packages_stay_in_their_folders, rule_module_names_are_unique]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__.removeprefix("rule_"))
def test_the_code_keeps_the_rule(rule):
    broken = rule()
    assert broken == [], f"{len(broken)} import(s) break the rule:\n" + "\n".join(broken)


# -- the scan sees what it guards: each rule catches a planted crossing ---------------------------------------------

def test_the_scan_reads_lazy_relative_and_type_only_imports(tmp_path, monkeypatch):
    source = ("from __future__ import annotations\nfrom typing import TYPE_CHECKING\nfrom . import store\n"
              "if TYPE_CHECKING:\n    from tabd.lsp import server\n"
              "def f():\n    from tabd.daemon.bench import soak\n    import torch\n")
    planted = tmp_path / "planted.py"
    planted.write_text(source)
    monkeypatch.setitem(MODULES, "tabd.cache.planted", planted)
    imports_of.cache_clear()
    try:
        seen = {(i.module, i.line, i.type_only) for i in imports_of("tabd.cache.planted")}
    finally:
        imports_of.cache_clear()
    assert {("tabd.cache.store", 3, False), ("tabd.lsp.server", 5, True), ("tabd.daemon.bench.soak", 7, False),
            ("torch", 8, False)} <= seen


def test_the_serving_closure_holds_the_server_and_the_engine():
    reached = closure(*SERVE_ENTRY)
    assert {"tabd.lsp.server", "tabd.daemon.runtime.service", "tabd.predictor.backends.local"} <= reached.keys()
    assert "tabd.daemon.commands.replay" not in reached  # the CLI loads the one command asked for
    assert {"pygls", "lsprotocol"} <= {i.module.split(".")[0] for i in imports_of("tabd.lsp.server")}


def test_each_rule_names_file_line_and_rule(tmp_path, monkeypatch):
    planted = tmp_path / "planted.py"
    planted.write_text("import os\n\ndef f():\n    from tabd.lsp.server import _private_thing\n")
    monkeypatch.setitem(MODULES, "tabd.daemon.runtime.planted", planted)
    imports_of.cache_clear()
    closure.cache_clear()
    try:
        lsp_door = [b for b in rule_lsp_door() if "planted" in b]
        private = [b for b in rule_no_private_name_crosses_a_module() if "planted" in b]
    finally:
        imports_of.cache_clear()
        closure.cache_clear()
    where = f"{planted}:4"
    assert lsp_door == [f"{where}: tabd.daemon.runtime imports tabd.lsp.server (the runtime knows no LSP)"]
    assert private == [f"{where}: tabd.daemon.runtime.planted imports _private_thing from tabd.lsp.server "
                       "(a private name stays in its module)"]


def test_the_rooms_rule_catches_a_prompt_module_that_imports_a_backend(tmp_path, monkeypatch):
    planted = tmp_path / "planted.py"
    planted.write_text("from tabd.predictor.types import GenSettings\nfrom tabd.predictor.backends import remote\n")
    monkeypatch.setitem(MODULES, "tabd.predictor.prompt.planted", planted)
    imports_of.cache_clear()
    closure.cache_clear()
    try:
        broken = [b for b in rule_predictor_rooms_keep_their_order() if "planted" in b]
    finally:
        imports_of.cache_clear()
        closure.cache_clear()
    rule = "(predictor/prompt/ may import prompt and types)"
    assert broken == [f"{planted}:2: predictor/prompt/ imports tabd.predictor.backends {rule}",
                      f"{planted}:2: predictor/prompt/ imports tabd.predictor.backends.remote {rule}"]

"""No import cycles among tabd's modules, counting the imports inside functions: a lazy import is still a door, and
two modules that each reach for the other are one room split in two (issue 42).

The imports are read with the doors test's scan (test_doors.py: `ast`, every import in the source, those under
`if TYPE_CHECKING:` left out since they never run). A failure names each cycle, module by module, with the file and
line of every import in it.
"""
from __future__ import annotations

import test_doors
from test_doors import MODULES, imports_of, tabd_imports

# none: the last one (lsp/server.py <-> lsp/inline_edit.py) went with issue 42
TOLERATED: list[frozenset[str]] = []


def import_graph() -> dict[str, set[str]]:
    """module -> the tabd modules it imports when it runs (at its top or in a function)."""
    return {m: {i.module for i in tabd_imports(m) if not i.type_only and i.module != m} for m in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, without recursion), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next((e for e in edges if e in graph), None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def described(component: list[str]) -> str:
    lines = [" <-> ".join(component)]
    for m in component:
        lines += [f"    {i.where}: {m} imports {i.module}" for i in tabd_imports(m)
                  if i.module in component and i.module != m and not i.type_only]
    return "\n".join(lines)


def test_no_module_imports_itself_back():
    broken = [c for c in cycles(import_graph()) if frozenset(c) not in TOLERATED]
    assert broken == [], f"{len(broken)} import cycle(s):\n" + "\n".join(described(c) for c in broken)


def planted_cycles(tmp_path, monkeypatch, second: str) -> tuple[list[list[str]], str]:
    """The cycles found with two planted runtime modules, `first` importing `second` (whose source is given), and
    how a failure would describe the pair."""
    pair = ["tabd.daemon.runtime.first", "tabd.daemon.runtime.second"]
    (tmp_path / "first.py").write_text("from tabd.daemon.runtime import second\n")
    (tmp_path / "second.py").write_text(second)
    for module in pair:
        monkeypatch.setitem(MODULES, module, tmp_path / f"{module.rsplit('.', 1)[1]}.py")
    imports_of.cache_clear()
    try:
        return cycles(import_graph()), described(pair)
    finally:
        imports_of.cache_clear()


def test_the_scan_finds_a_cycle_hidden_in_a_function(tmp_path, monkeypatch):
    found, shown = planted_cycles(tmp_path, monkeypatch,
                                  "def later():\n    from tabd.daemon.runtime.first import x\n    return x\n")
    assert ["tabd.daemon.runtime.first", "tabd.daemon.runtime.second"] in found
    assert f"{tmp_path / 'second.py'}:2: tabd.daemon.runtime.second imports tabd.daemon.runtime.first" in shown


def test_a_type_only_import_is_no_cycle(tmp_path, monkeypatch):
    found, _ = planted_cycles(tmp_path, monkeypatch, "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                                     "    from tabd.daemon.runtime import first\n")
    assert not any("tabd.daemon.runtime.first" in c for c in found)


def test_the_scan_reads_every_folder():
    assert {m.split(".")[1] for m in MODULES} == set(test_doors.FOLDERS)

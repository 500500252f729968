"""The npm packages tabd's npm corpus must never read: every name installed as node code on this machine.

That code (npm's own JavaScript under node's global modules, code-server and
the editor extension's dependencies under the project) is the held-out world
the embedded model's JavaScript figures are measured on, so a package whose
name appears anywhere there is not training data, whatever its version. The
names come from every package.json (its "name") and package-lock.json (its
installed paths) under the roots; the roots are injectable so tests can plant
a package in a temporary one. The JavaScript files installed under node's
global modules are held out by content too, a copy of one under another name.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Iterable, Iterator

from tabd.predictor.training.corpus import content_key

PROJECT = Path(__file__).resolve().parents[2]
SYSTEM_ROOTS = ("/usr/lib/node_modules", "/usr/local/lib/node_modules", "/usr/share/nodejs", "/usr/share/javascript")
# what the tests' setup (.ci/setup.d/40-vscode.sh) installs by name, held out before it is installed; its
# dependencies are in the lockfiles under editors/ and tests/, or in the tree once installed under .cache
TEST_INSTALLS = ("code-server",)
PSEUDO_FS = {"/proc", "/sys", "/dev", "/run"}
SOURCE_SUFFIXES = (".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx")


def normalize(name: str) -> str:
    return name.strip().lower()


def global_root() -> list[Path]:
    """`npm root -g`, where npm is installed; nothing where it is not."""
    try:
        out = subprocess.run(["npm", "root", "-g"], capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [Path(out.strip())] if out.strip() else []


def project_checkouts(project: Path = PROJECT) -> list[Path]:
    """This checkout and every git worktree of its repository (the main checkout's .cache holds code-server)."""
    found = [project]
    try:
        out = subprocess.run(["git", "-C", str(project), "worktree", "list", "--porcelain"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return found
    found += [Path(line[len("worktree "):]) for line in out.splitlines() if line.startswith("worktree ")]
    return list(dict.fromkeys(found))


def node_modules_dirs(top: Path, pseudo: Iterable[str] = PSEUDO_FS) -> Iterator[Path]:
    """Every node_modules directory under `top` (links not followed, one filesystem, pseudo filesystems skipped)."""
    skip = set(pseudo)
    try:
        device = top.stat().st_dev
    except OSError:
        return
    stack = [str(top)]
    while stack:
        here = stack.pop()
        try:
            entries = list(os.scandir(here))
        except OSError:
            continue
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False) or entry.path in skip:
                    continue
                if entry.name == "node_modules":
                    yield Path(entry.path)
                elif entry.stat(follow_symlinks=False).st_dev == device:
                    stack.append(entry.path)
            except OSError:
                continue


def default_roots(sweep: bool = True) -> list[Path]:
    """The places node code lives on this machine: node's global modules, the system's JavaScript, the
    project's caches and lockfiles in every checkout, npx's cache, and (sweep) any node_modules on the disk."""
    roots = [*global_root(), *map(Path, SYSTEM_ROOTS), Path.home() / ".npm" / "_npx"]
    for checkout in project_checkouts():
        roots += [checkout / ".cache", checkout / "node_modules", checkout / "editors", checkout / "tests"]
    if sweep:
        roots += node_modules_dirs(Path("/"))
    return list(dict.fromkeys(roots))


def names_in_manifest(path: Path) -> set[str]:
    """The package names a package.json or package-lock.json declares; nothing from a file that does not parse."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return set()
    if not isinstance(data, dict):
        return set()
    names = set()
    if isinstance(data.get("name"), str) and data["name"].strip():
        names.add(normalize(data["name"]))
    if path.name in ("package-lock.json", "npm-shrinkwrap.json"):
        for key, entry in (data.get("packages") or {}).items():
            if "node_modules/" in key:
                names.add(normalize(key.rsplit("node_modules/", 1)[1]))
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                names.add(normalize(entry["name"]))
        names |= {normalize(k) for k in (data.get("dependencies") or {}) if isinstance(k, str)}  # lockfile v1
    return names


def installed_npm_names(roots: Iterable[Path] | None = None, extra: Iterable[str] = TEST_INSTALLS) -> set[str]:
    """Lower-cased names of every npm package under the roots (default_roots() when None), plus `extra`."""
    names = {normalize(n) for n in extra}
    for root in default_roots() if roots is None else roots:
        if not root.is_dir():
            continue
        for dirpath, _, files in os.walk(root):
            for manifest in ("package.json", "package-lock.json", "npm-shrinkwrap.json"):
                if manifest in files:
                    names |= names_in_manifest(Path(dirpath) / manifest)
    return names


def system_roots() -> list[Path]:
    """Node's global modules and the system's JavaScript: where the held-out JavaScript files are measured."""
    return list(dict.fromkeys([*global_root(), *map(Path, SYSTEM_ROOTS)]))


def installed_source_keys(roots: Iterable[Path] | None = None, max_chars: int = 300_000) -> set[str]:
    """Content keys (corpus.content_key) of every JS/TS file under the roots (system_roots() when None): a copy of
    one inside a listed package, under whatever name, is held out too."""
    keys = set()
    for root in system_roots() if roots is None else roots:
        if not root.is_dir():
            continue
        for dirpath, _, files in os.walk(root):
            for name in files:
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                try:
                    path = Path(dirpath) / name
                    if path.stat().st_size > 4 * max_chars:
                        continue
                    keys.add(content_key(path.read_text(encoding="utf-8").replace("\r\n", "\n")))
                except (OSError, UnicodeDecodeError):
                    continue
    return keys

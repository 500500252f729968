"""Content exclusion: which documents never reach the model, the context, a remote engine or a recording.

A document is excluded when its path matches the default deny list (secrets people keep in files), a user glob
(`--exclude`, initializationOptions `exclude`), or when git ignores it; a user's `include` glob lets a file that
an exclude glob or git keeps out back in (a library file under a git-ignored virtualenv, a scratch file in an
ignored folder), never one the deny list keeps out: the deny list is there for the file someone did not think of.
Globs are matched without regard to case, on the path within the workspace folder the document lies in (else on
the file name): a glob without `/` matches any one part of that path, so `*secret*` excludes `config/secrets.yaml`
and everything under `secrets/`; a glob with `/` matches the whole relative path (or the absolute one), `**`
spanning folders. Matching takes time linear in the path whatever the glob (runtime/globs.py). Plain functions,
no LSP.
"""
from __future__ import annotations

import asyncio
import logging
import os
import subprocess
from dataclasses import dataclass
from typing import Iterable, Sequence

from tabd.daemon.runtime.globs import (CLASS, LIT, MAX_CLASSES, MAX_POSITIONS, STAR, Automaton, GlobError,
                                       Token, parse_glob)

__all__ = ["DEFAULT_GLOBS", "Exclusion", "GlobError", "Rule", "compile_globs", "excluding_rule", "git_ignores", "git_ignores_later", "git_work_tree",
           "parse_glob", "relative_path"]

logger = logging.getLogger(__name__)

DEFAULT_GLOBS = (".env*", "*.pem", "*.key", "id_rsa*", "*credentials*", "*secret*")
GIT_TIMEOUT_S = 1.0  # one `git check-ignore` per opened document; a git that hangs must not hold the editor
MAX_PATH_CHARS = 4096  # Linux's PATH_MAX: a longer "path" is no file's; it is excluded rather than matched on a part


@dataclass(frozen=True)
class Glob:
    text: str  # as the user wrote it
    alternatives: list[list[Token]]
    whole_path: bool  # it holds a `/`: matched on the whole path, else on each part
    origin: str  # "default", "exclude" or "include"


@dataclass(frozen=True)
class Rule:
    """What keeps a file away from the model: a glob of the default deny list, a user's exclude glob, or git."""

    kind: str  # "default", "exclude", "git" or "length"
    glob: str = ""  # the glob as written ("" for git and length)

    def __str__(self) -> str:
        if self.kind == "git":
            return "git ignores it"
        if self.kind == "length":
            return f"its path is longer than {MAX_PATH_CHARS} characters"
        return f"{self.glob} ({'the default deny list' if self.kind == 'default' else 'exclude'})"


def compile_globs(globs: Iterable[str], origin: str) -> tuple[list[Glob], list[str]]:
    """(the globs that parse, one message per glob that does not)."""
    good: list[Glob] = []
    problems: list[str] = []
    for text in globs:
        try:
            # paths are matched without their leading /, so an absolute glob is too
            alternatives = parse_glob(text[1:] if text.startswith("/") and len(text) > 1 else text)
        except GlobError as exc:
            problems.append(f"{origin} glob ignored: {exc}")
            continue
        good.append(Glob(text, alternatives, "/" in text.strip("/"), origin))
    return good, problems


class GlobSet:
    """Globs of one origin asked together: one automaton for the globs on path parts, one for those on the whole
    path. Globs past what the automata may hold (all of them together) are left out with a message."""

    def __init__(self, globs: list[Glob]) -> None:
        self.problems: list[str] = []
        kept: list[Glob] = []
        positions = 0
        classes: set[str] = set()
        for glob in globs:
            size = sum(len(tokens) + 1 for tokens in glob.alternatives)
            more = {t.text for tokens in glob.alternatives for t in tokens if t.kind == CLASS} - classes
            if positions + size > MAX_POSITIONS or len(classes) + len(more) > MAX_CLASSES:
                self.problems.append(f"{glob.origin} glob ignored: {glob.text[:60]!r}: the globs together may hold "
                                     f"{MAX_POSITIONS} positions and {MAX_CLASSES} [] classes")
                continue
            positions += size
            classes |= more
            kept.append(glob)
        self.order = {id(g): i for i, g in enumerate(kept)}
        self.simple = [(g, shape) for g in kept if not g.whole_path and (shape := simple_shape(g)) is not None]
        self.parts = [g for g in kept if not g.whole_path and simple_shape(g) is None]
        self.paths = [g for g in kept if g.whole_path]
        self.part_automaton = Automaton(g.alternatives for g in self.parts)
        self.path_automaton = Automaton(g.alternatives for g in self.paths)

    def first(self, relative: str, absolute: str) -> Glob | None:
        """The first glob (in the order given) that matches a path (as Exclusion.rule takes it)."""
        lowered = relative.lower()
        found = [g for g, shape in self.simple if on_a_part(shape, lowered)]
        if self.parts:
            hits = self.part_automaton.run_parts(lowered)
            found += [g for g, hit in zip(self.parts, hits) if hit]
        if self.paths:
            whole, tail = absolute.lstrip("/").lower(), relative.lstrip("/").lower()
            if whole.endswith(tail):  # the relative path ends the absolute one: both in one pass
                hits = self.path_automaton.run(whole, len(whole) - len(tail))
            else:
                hits = [a | b for a, b in zip(self.path_automaton.run(whole), self.path_automaton.run(tail))]
            found += [g for g, hit in zip(self.paths, hits) if hit]
        return min(found, key=lambda g: self.order[id(g)]) if found else None


def simple_shape(glob: Glob) -> tuple[str, str, str] | None:
    """A part glob that is a literal with at most a `*` at either end ('.env*', '*.pem', '*secret*', 'vendor'):
    (star before, literal, star after), which str methods answer on the whole path at once; else None."""
    if len(glob.alternatives) != 1:
        return None
    tokens = glob.alternatives[0]
    before = bool(tokens) and tokens[0].kind == STAR
    after = len(tokens) > int(before) and tokens[-1].kind == STAR
    middle = tokens[int(before):len(tokens) - int(after)]
    if not middle or any(t.kind != LIT or t.text == "/" for t in middle):
        return None
    return ("*" if before else "", "".join(t.text for t in middle), "*" if after else "")


def on_a_part(shape: tuple[str, str, str], path: str) -> bool:
    """Whether a simple part glob matches some /-separated part of the (lower-case) path: its literal holds no /,
    so every occurrence lies within one part, and only the ends that have no star must meet a / or the path's end."""
    before, literal, after = shape
    if before and after:
        return literal in path
    if before:
        return path.endswith(literal) or literal + "/" in path
    if after:
        return path.startswith(literal) or "/" + literal in path
    return path == literal or path.startswith(literal + "/") or path.endswith("/" + literal) or f"/{literal}/" in path


def relative_path(path: str, roots: Sequence[str]) -> str:
    """The path within the workspace folder that holds it (the longest first), else its file name."""
    for root in sorted(roots, key=len, reverse=True):
        root = root.rstrip("/")
        if root and path.startswith(root + "/"):
            return path[len(root) + 1:]
    return path.rsplit("/", 1)[-1]


def git_work_tree(path: str) -> str | None:
    """The folder above the file that holds `.git`, or None (a few stats: no git process where there is no
    repository)."""
    folder = os.path.dirname(path)
    while folder:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
    return None


def git_ignores(path: str, timeout: float = GIT_TIMEOUT_S) -> bool:
    """Whether git ignores the file (its .gitignore, info/exclude, the global excludes); no git, not a repository,
    an error or a timeout: not ignored. A tracked file is never ignored (git's own rule)."""
    top = git_work_tree(path) if path.startswith("/") else None
    if top is None:
        return False
    try:
        done = subprocess.run(["git", "-C", top, "check-ignore", "-q", "--", path],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=timeout, check=False)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:  # ValueError: a NUL in the path
        logger.info("git check-ignore not answered (%s): the file counts as not ignored", exc)
        return False
    return done.returncode == 0


async def git_ignores_later(path: str, top: str, timeout: float = GIT_TIMEOUT_S) -> bool:
    """git_ignores without blocking the event loop (the server answers other requests meanwhile); `top` is the
    work tree git_work_tree found."""
    try:
        proc = await asyncio.create_subprocess_exec("git", "-C", top, "check-ignore", "-q", "--", path,
                                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                    stderr=subprocess.DEVNULL)
    except (OSError, ValueError) as exc:
        logger.info("git check-ignore not started (%s): the file counts as not ignored", exc)
        return False
    try:
        return await asyncio.wait_for(proc.wait(), timeout) == 0
    except asyncio.TimeoutError:
        logger.info("git check-ignore took over %.1f s: the file counts as not ignored", timeout)
        return False
    finally:
        if proc.returncode is None:  # timed out, or the document closed meanwhile
            proc.kill()
            await asyncio.shield(proc.wait())


class Exclusion:
    """The deny list, the user's exclude and include globs, and git, asked once per document."""

    def __init__(self, user_globs: Iterable[str] = (), use_git: bool = True, include: Iterable[str] = ()) -> None:
        defaults, _ = compile_globs(DEFAULT_GLOBS, "default")
        user, problems = compile_globs(user_globs, "exclude")
        back, more = compile_globs(include, "include")
        self.defaults, self.user, self.include = GlobSet(defaults), GlobSet(user), GlobSet(back)
        self.problems = problems + more + self.user.problems + self.include.problems
        self.use_git = use_git

    def rule(self, path: str, roots: Sequence[str] = (), git: bool = True) -> Rule | None:
        """The rule that excludes the file at `path` (absolute, or a bare name for a document not on disk), or None
        when it is not excluded: the deny list first (include cannot undo it), then include, exclude and git (not
        asked when `git` is false: the caller asks it, see git_ignores_later)."""
        if len(path) > MAX_PATH_CHARS:  # no file has such a path: kept out, as a secret in it might be
            return Rule("length")
        relative = relative_path(path, roots)
        glob = self.defaults.first(relative, path)
        if glob is not None:
            return Rule("default", glob.text)
        if self.include.first(relative, path) is not None:
            return None
        glob = self.user.first(relative, path)
        if glob is not None:
            return Rule("exclude", glob.text)
        if git and self.use_git and git_ignores(path):
            return Rule("git")
        return None

    def included(self, path: str, roots: Sequence[str] = ()) -> bool:
        """Whether an include glob gives the file back (then git is not asked)."""
        return self.include.first(relative_path(path, roots), path) is not None

    def why(self, path: str, roots: Sequence[str] = ()) -> str:
        """Why the file at `path` is excluded, in words; "" if it is not."""
        rule = self.rule(path, roots)
        return "" if rule is None else str(rule)


def excluding_rule(path: str, roots: Sequence[str] = (), exclude: Iterable[str] = (), include: Iterable[str] = (),
                   use_git: bool = True) -> Rule | None:
    """The rule that excludes a path under these settings, or None (for `tabd doctor` and the clients' reason);
    a server that asks many paths keeps one Exclusion instead."""
    return Exclusion(exclude, use_git, include).rule(path, roots)

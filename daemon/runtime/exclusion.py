"""Content exclusion: which documents never reach the model, the context, a remote engine or a recording.

A document is excluded when its path matches the default deny list (secrets people keep in files), a user glob
(`--exclude`, initializationOptions `exclude`), or when git ignores it. Globs are matched without regard to case,
on the path within the workspace folder the document lies in (else on the file name): a glob without `/` matches
any one part of that path, so `*secret*` excludes `config/secrets.yaml` and everything under `secrets/`; a glob
with `/` matches the whole relative path (or the absolute one), `**` spanning folders. Plain functions, no LSP.
"""
from __future__ import annotations

import logging
import os
import re
import subprocess
from dataclasses import dataclass
from typing import Iterable, Sequence

logger = logging.getLogger(__name__)

DEFAULT_GLOBS = (".env*", "*.pem", "*.key", "id_rsa*", "*credentials*", "*secret*")
GIT_TIMEOUT_S = 1.0  # one `git check-ignore` per opened document; a git that hangs must not hold the editor


class GlobError(ValueError):
    """A glob that does not parse; the message says where."""


def glob_regex(glob: str) -> str:
    """The regular expression (for fullmatch) of a glob: * and ? within a path part, ** across parts, [abc], [!abc],
    {a,b}, \\ escapes. GlobError when it does not parse."""
    if not glob:
        raise GlobError("an empty glob")
    out: list[str] = []
    braces = 0
    i, n = 0, len(glob)
    while i < n:
        ch = glob[i]
        if ch == "*":
            if glob.startswith("**", i):
                i += 2
                if glob.startswith("/", i):  # **/ is any number of folders, none included
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = glob.find("]", i + 2 if glob.startswith(("[!", "[^"), i) else i + 1)
            if end == -1:
                raise GlobError(f"{glob!r}: '[' at {i} is never closed")
            body = glob[i + 1:end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            if not body:
                raise GlobError(f"{glob!r}: an empty [] at {i}")
            out.append(("[^/" if negate else "[") + body.replace("\\", "\\\\").replace("[", "\\[") + "]")
            i = end
        elif ch == "{":
            braces += 1
            out.append("(?:")
        elif ch == "}":
            if braces == 0:
                raise GlobError(f"{glob!r}: '}}' at {i} closes nothing")
            braces -= 1
            out.append(")")
        elif ch == "," and braces:
            out.append("|")
        elif ch == "\\":
            if i + 1 == n:
                raise GlobError(f"{glob!r}: ends with a lone backslash")
            i += 1
            out.append(re.escape(glob[i]))
        else:
            out.append(re.escape(ch))
        i += 1
    if braces:
        raise GlobError(f"{glob!r}: a '{{' is never closed")
    return "".join(out)


@dataclass(frozen=True)
class Glob:
    text: str
    pattern: re.Pattern[str]
    whole_path: bool  # it holds a `/`: matched on the whole path, else on each part
    origin: str  # "default" or "exclude"

    def matches(self, relative: str, absolute: str) -> bool:
        if self.whole_path:
            return bool(self.pattern.fullmatch(relative.lstrip("/")) or self.pattern.fullmatch(absolute.lstrip("/")))
        return any(self.pattern.fullmatch(part) for part in relative.split("/") if part)


def compile_globs(globs: Iterable[str], origin: str) -> tuple[list[Glob], list[str]]:
    """(the globs that parse, one message per glob that does not)."""
    good: list[Glob] = []
    problems: list[str] = []
    for text in globs:
        try:
            # paths are matched without their leading /, so an absolute glob is too
            regex = glob_regex(text[1:] if text.startswith("/") and len(text) > 1 else text)
        except GlobError as exc:
            problems.append(f"exclude glob ignored: {exc}")
            continue
        good.append(Glob(text, re.compile(regex, re.IGNORECASE | re.DOTALL), "/" in text.strip("/"), origin))
    return good, problems


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
    except (OSError, subprocess.SubprocessError) as exc:
        logger.info("git check-ignore not answered (%s): the file counts as not ignored", exc)
        return False
    return done.returncode == 0


class Exclusion:
    """The deny list, the user's globs and git, asked once per document."""

    def __init__(self, user_globs: Iterable[str] = (), use_git: bool = True) -> None:
        defaults, _ = compile_globs(DEFAULT_GLOBS, "default")
        user, self.problems = compile_globs(user_globs, "exclude")
        self.globs = defaults + user
        self.use_git = use_git

    def why(self, path: str, roots: Sequence[str] = ()) -> str:
        """Why the file at `path` (absolute, or a bare name for a document not on disk) is excluded; "" if it is not."""
        relative = relative_path(path, roots)
        for glob in self.globs:
            if glob.matches(relative, path):
                return f"{glob.text} ({'the default deny list' if glob.origin == 'default' else 'exclude'})"
        if self.use_git and git_ignores(path):
            return "git ignores it"
        return ""

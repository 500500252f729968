"""Edits from a real git history (`tabd session from-git REPO`): each commit's changes to source files, as the places a
person edits, and a session that types them.

The repository is read with plain `git` subprocess calls (a work tree or a bare git directory, such as a mirror):
the last N commits of REV (default HEAD) that are not merges and change at least one file of a language tabd knows
(typist.LANGUAGES). Per commit, against its first parent, each such file that was modified (not added, deleted or
renamed: typing a whole file is not an edit), is UTF-8, at most MAX_FILE_BYTES on either side, is diffed into hunks
(hunks.py: token pieces inside a changed line, lines inserted below a line typed as Enter and the lines). A commit
with more than MAX_HUNKS hunks in all (a reformat, a vendored update) is skipped.

Places: hunks that start on the old line where the hunk before them ends are one place (a person edits that line,
e.g. `f(x)` -> `wrap(f(x))` is two hunks, one place). The session marks each place's first move with `"hunk": n`
(replay's edit user reads an edit's end from the next mark), pauses about a second or more between places (the
typist's span pause, seeded) and a moment between the hunks of one place. The open event carries `"commit"`.
"""
from __future__ import annotations

import random
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from tabd.daemon.sessions.hunks import Hunk, hunks
from tabd.daemon.sessions.typist import LANGUAGES, TypingStyle, language_of

MAX_FILE_BYTES = 200_000
MAX_HUNKS = 40  # per commit
SCAN_BATCH = 200  # commits listed per `git rev-list` call
SAME_PLACE_PAUSE = (0.2, 0.6)  # moving along the line to the place's next hunk
FILE_PAUSE = 2.0  # between files and commits


class GitError(RuntimeError):
    """The repository cannot be read; the message says why."""


@dataclass(frozen=True)
class Place:
    """One place a person edits: hunks in file order that follow each other on one line."""

    hunks: tuple[Hunk, ...]

    @property
    def start(self) -> int:
        return self.hunks[0].start

    @property
    def end(self) -> int:
        return self.hunks[-1].end

    def text(self, old: str) -> str:
        """The text that replaces old[start:end] (the hunks and the old text between them)."""
        parts, at = [], self.start
        for h in self.hunks:
            parts.append(old[at:h.start])
            parts.append(h.text)
            at = h.end
        return "".join(parts)


@dataclass(frozen=True)
class FileChange:
    """One file of one commit: its text before and after, and the places that turn one into the other."""

    commit: str
    path: str
    old: str
    new: str
    places: tuple[Place, ...]

    @property
    def language(self) -> str:
        return language_of(self.path)

    def hunks(self) -> list[Hunk]:
        return [h for p in self.places for h in p.hunks]


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    files: tuple[FileChange, ...]


def places(old: str, found: Sequence[Hunk]) -> list[Place]:
    """The hunks grouped into places: a hunk that starts on the line where the one before it ends joins it."""
    out: list[list[Hunk]] = []
    for h in found:
        if out and old.count("\n", out[-1][-1].end, h.start) == 0:
            out[-1].append(h)
        else:
            out.append([h])
    return [Place(tuple(group)) for group in out]


# ---------------------------------------------------------------- git


def git_dir(repo: str | Path) -> Path:
    """The git directory of a work tree or a bare repository; GitError when `repo` is neither."""
    path = Path(repo)
    if not path.exists():
        raise GitError(f"{path}: no such directory")
    proc = _run(["git", "-c", "safe.directory=*", "-C", str(path), "rev-parse", "--absolute-git-dir"], check=False)
    if proc.returncode != 0:
        raise GitError(f"{path}: not a git repository ({proc.stderr.decode('utf-8', 'replace').strip()[-200:]})")
    return Path(proc.stdout.decode().strip())


def _run(argv: list[str], check: bool = True, data: bytes | None = None) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(argv, input=data, capture_output=True, timeout=120)
    except FileNotFoundError:
        raise GitError("git is not installed (it reads the history)") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"{' '.join(argv[:6])}: no answer in 120 s") from None
    if check and proc.returncode != 0:
        raise GitError(f"{' '.join(argv[3:7])}: {proc.stderr.decode('utf-8', 'replace').strip()[-300:]}")
    return proc


def _git(gitdir: Path, *args: str, data: bytes | None = None) -> bytes:
    return _run(["git", "-c", "safe.directory=*", f"--git-dir={gitdir}", *args], data=data).stdout


def repo_name(repo: str | Path) -> str:
    """A short name for the repository: its folder (the parent of a `.git` or a mirror's `repo` folder)."""
    path = Path(repo).resolve()
    name = path.name
    if name in (".git", "repo") and path.parent.name:
        name = path.parent.name
    return name[:-4] if name.endswith(".git") and len(name) > 4 else name


def _commits(gitdir: Path, rev: str) -> Iterator[tuple[str, str, str]]:
    """(sha, first parent or "", subject) of the non-merge commits of `rev`, newest first."""
    skip = 0
    while True:
        out = _git(gitdir, "log", "--no-merges", f"--max-count={SCAN_BATCH}", f"--skip={skip}",
                   "--format=%H%x00%P%x00%s", rev, "--").decode("utf-8", "replace")
        lines = [line for line in out.split("\n") if line]
        for line in lines:
            sha, parents, subject = (line.split("\0") + ["", ""])[:3]
            yield sha, parents.split(" ")[0] if parents else "", subject
        if len(lines) < SCAN_BATCH:
            return
        skip += SCAN_BATCH


def _modified_sources(gitdir: Path, parent: str, sha: str) -> list[tuple[str, str, str]]:
    """(path, old blob, new blob) of the regular files of a known language that the commit modified."""
    out = _git(gitdir, "diff-tree", "-r", "-z", "--no-renames", "--raw", parent, sha).split(b"\0")
    found = []
    for meta, path in zip(out[0::2], out[1::2]):
        fields = meta.decode("ascii", "replace").lstrip(":").split(" ")
        if len(fields) < 5 or fields[4] != "M" or not fields[0].startswith("100") or not fields[1].startswith("100"):
            continue
        name = path.decode("utf-8", "replace")
        if Path(name).suffix.lower() in LANGUAGES:
            found.append((name, fields[2], fields[3]))
    return found


def _blobs(gitdir: Path, ids: Sequence[str]) -> dict[str, bytes | None]:
    """The blobs' contents (None for one over MAX_FILE_BYTES), from one `git cat-file --batch`."""
    out: dict[str, bytes | None] = {}
    if not ids:
        return out
    data = _git(gitdir, "cat-file", "--batch", data=("\n".join(ids) + "\n").encode())
    at = 0
    for blob in ids:
        eol = data.index(b"\n", at)
        head = data[at:eol].split(b" ")
        if len(head) < 3 or head[1] == b"missing":
            out[blob] = None
            at = eol + 1
            continue
        size = int(head[2])
        content = data[eol + 1:eol + 1 + size]
        out[blob] = content if size <= MAX_FILE_BYTES else None
        at = eol + 1 + size + 1
    return out


def _text(data: bytes | None) -> str | None:
    if data is None or b"\0" in data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def history(repo: str | Path, commits: int = 30, rev: str | None = None, max_hunks: int = MAX_HUNKS) -> list[Commit]:
    """The last `commits` commits of `rev` (default HEAD) with edits to type, newest first; GitError when the
    repository or the revision cannot be read."""
    gitdir = git_dir(repo)
    found: list[Commit] = []
    if commits <= 0:
        return found
    for sha, parent, subject in _commits(gitdir, rev or "HEAD"):
        if not parent:
            continue  # the first commit adds files: nothing is edited
        files = _modified_sources(gitdir, parent, sha)
        blobs = _blobs(gitdir, [b for _, old, new in files for b in (old, new)])
        changes, count = [], 0
        for path, old_id, new_id in files:
            old, new = _text(blobs.get(old_id)), _text(blobs.get(new_id))
            if old is None or new is None or old == new:
                continue
            found_hunks = hunks(old, new)
            count += len(found_hunks)
            if found_hunks:
                changes.append(FileChange(sha, path, old, new, tuple(places(old, found_hunks))))
        if changes and count <= max_hunks:
            found.append(Commit(sha, subject, tuple(changes)))
            if len(found) >= commits:
                break
    return found


# ---------------------------------------------------------------- the session


def file_uri(name: str, path: str) -> str:
    """The document's uri: the repository's path under a folder named for it (nothing is read from disk)."""
    return Path("/w", name, path).as_uri()


def _by_place(events: list[dict[str, Any]], change: FileChange, rng: random.Random) -> list[dict[str, Any]]:
    """The from-diff typist's events with edits marked per place: a place's later hunks lose their mark, and the pause
    before them is the short move along the line (the events after it move earlier in time)."""
    place_of, first = {}, set()
    n = 0
    for p, place in enumerate(change.places, 1):
        for i, _ in enumerate(place.hunks):
            n += 1
            place_of[n] = p
            if i == 0:
                first.add(n)
    out: list[dict[str, Any]] = []
    shift = 0.0
    for e in events:
        e = dict(e)
        if "hunk" in e:
            n = e["hunk"]
            if n in first:
                e["hunk"] = place_of[n]
            else:
                del e["hunk"]
                before = out[-1]["t"] if out else 0.0
                pause = e["t"] - shift - before
                shift += max(0.0, pause - rng.uniform(*SAME_PLACE_PAUSE))
        e["t"] = round(e["t"] - shift, 3)
        out.append(e)
    return out


def git_session(found: Sequence[Commit], name: str, seed: int = 0, style: TypingStyle | None = None,
                editor: str = "vscode") -> tuple[str, list[dict[str, Any]]]:
    """(language, events) of a person making each commit's changes, oldest commit first, file by file."""
    from tabd.daemon.sessions.diff_typist import hunk_events

    style = style or TypingStyle()
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    languages: dict[str, int] = {}
    t = 0.0
    for commit in reversed(found):
        for change in commit.files:
            uri = file_uri(name, change.path)
            typed, _ = hunk_events(change.old, change.hunks(), uri, change.language, rng, style, t, editor)
            typed = _by_place(typed, change, rng)
            typed[0]["commit"] = commit.sha
            events.extend(typed)
            t = typed[-1]["t"] + FILE_PAUSE
            languages[change.language] = languages.get(change.language, 0) + 1
    language = max(sorted(languages), key=lambda k: languages[k]) if languages else "plaintext"
    return language, events


def revision(repo: str | Path, rev: str | None = None) -> str:
    """The commit `rev` (default HEAD; a range's last side) names, for the record."""
    target = (rev or "HEAD").split("..")[-1] or "HEAD"
    return _git(git_dir(repo), "rev-parse", "--verify", "--quiet", f"{target}^{{commit}}").decode().strip()

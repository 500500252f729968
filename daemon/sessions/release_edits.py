"""Edit sessions cut from the diff between two releases of a distribution (`tabd bench edits`).

The .py files of two unpacked releases are paired by their path inside the package (the version in an sdist's top
folder dropped), diffed into hunks (hunks.py), and cut into sessions of one file each:
- "propagation": the hunks of a file that repeat one substitution old -> new (a rename, a string or an argument added,
  made at several places), in
  file order, the rest of that file's diff left out; picked so that different renames come before one rename again;
- "rest": the file's other hunks, a few at a time in file order.
Each session opens the old file and makes its hunks (diff_typist.py), so its last document is the old file with
those hunks applied. Sizes are capped so that a bench run stays a few minutes; the choice is deterministic.
"""
from __future__ import annotations

import collections
import random
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from tabd.daemon.sessions.diff_typist import hunk_events
from tabd.daemon.sessions.hunks import Hunk, hunks, is_substitution
from tabd.daemon.sessions.typist import TypingStyle

GROUPS = ("propagation", "rest")
MAX_FILE_CHARS = 60_000  # bigger files (generated tables, vendored blobs) are not what people edit by hand


@dataclass(frozen=True)
class EditSession:
    """One file's hunks to make, from one release pair."""

    group: str  # "propagation" or "rest"
    dist: str
    path: str  # inside the package
    old: str
    chosen: tuple[Hunk, ...]

    @property
    def typed_chars(self) -> int:
        return sum(len(h.text) for h in self.chosen)


def python_sources(archive: Path) -> dict[str, str]:
    """{path inside the package: text} of the .py files of a wheel (zip) or sdist (tar.gz, zip); an sdist's first path
    part (name-version) is dropped. Files that are not UTF-8 or too big are left out."""
    out: dict[str, str] = {}
    members: Iterable[tuple[str, bytes]]
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as z:
            members = [(n, z.read(n)) for n in z.namelist() if n.endswith(".py")]
    else:
        with tarfile.open(archive) as t:
            members = []
            for m in t.getmembers():
                f = t.extractfile(m) if m.isfile() and m.name.endswith(".py") else None
                if f is not None:
                    members.append((m.name, f.read()))
    sdist = archive.suffix not in (".whl",)
    for name, data in members:
        path = name.split("/", 1)[1] if sdist and "/" in name else name
        if len(data) > MAX_FILE_CHARS:
            continue
        try:
            out[path] = data.decode("utf-8").replace("\r\n", "\n")
        except UnicodeDecodeError:
            continue
    return out


def file_sessions(dist: str, path: str, old: str, new: str, max_edits: int = 6, max_chars: int = 300,
                  min_repeats: int = 2, max_sites: int = 12) -> list[EditSession]:
    """The sessions of one file's diff: one per substitution repeated at `min_repeats` places or more (its first
    `max_sites`: all of them as a rule, so that every place propagation may propose is one the person changes), then
    the other hunks in sessions of at most `max_edits` hunks and `max_chars` characters typed (a longer hunk is left
    out)."""
    found = hunks(old, new)
    keys = collections.Counter(h.key for h in found if is_substitution(h.key))
    repeated = {k for k, n in keys.items() if n >= min_repeats}
    out: list[EditSession] = []
    for key in sorted(repeated, key=lambda k: (-keys[k], k)):
        chosen = tuple(h for h in found if h.key == key)[:max_sites]
        out.append(EditSession("propagation", dist, path, old, chosen))
    rest = [h for h in found if h.key not in repeated and len(h.text) <= max_chars]
    batch: list[Hunk] = []
    for h in rest:
        if batch and (len(batch) >= max_edits or sum(len(b.text) for b in batch) + len(h.text) > max_chars):
            out.append(EditSession("rest", dist, path, old, tuple(batch)))
            batch = []
        batch.append(h)
    if batch:
        out.append(EditSession("rest", dist, path, old, tuple(batch)))
    return out


def release_sessions(dist: str, old: dict[str, str], new: dict[str, str], **limits: Any) -> list[EditSession]:
    """The sessions of every .py file the two releases both have and that changed, in path order."""
    out: list[EditSession] = []
    for path in sorted(set(old) & set(new)):
        if old[path] != new[path]:
            out.extend(file_sessions(dist, path, old[path], new[path], **limits))
    return out


def pick(sessions: Sequence[EditSession], group: str, count: int, seed: int) -> list[EditSession]:
    """Up to `count` sessions of `group`, spread over the distributions in turn, chosen by seed."""
    rng = random.Random(seed)
    by_dist: dict[str, list[EditSession]] = collections.defaultdict(list)
    for s in sessions:
        if s.group == group:
            by_dist[s.dist].append(s)
    for dist in by_dist:
        rng.shuffle(by_dist[dist])
        # one rename made in several files comes once before any comes twice: the choice is varied renames
        seen: collections.Counter = collections.Counter()
        ranked = []
        for s in by_dist[dist]:
            key = s.chosen[0].key if group == "propagation" and s.chosen else None
            ranked.append((seen[key] if key is not None else 0, len(ranked), s))
            seen[key] += 1
        by_dist[dist] = [s for _, _, s in sorted(ranked, reverse=True)]  # popped from the end: first seen first
    out: list[EditSession] = []
    while len(out) < count and any(by_dist.values()):
        for dist in sorted(by_dist):
            if by_dist[dist] and len(out) < count:
                out.append(by_dist[dist].pop())
    return out


def session_events(sessions: Sequence[EditSession], root: Path, seed: int = 0, editor: str = "vscode",
                   style: TypingStyle | None = None) -> list[dict[str, Any]]:
    """The events of a person making each session's hunks in turn; documents are named under `root`
    (root/dist/path), so the server sees a Python file in a folder of its own."""
    style = style or TypingStyle()
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    t = 0.0
    for s in sessions:
        uri = (root / s.dist / s.path).as_uri()
        file_events, t = hunk_events(s.old, s.chosen, uri, "python", rng, style, t, editor)
        events.extend(file_events)
        t += 0.5
    return events

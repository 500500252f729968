"""Training and held-out text, without torch: the stdlib split, the PyPI corpus, evaluation cuts.

The held-out split is the stdlib's files whose path hash falls below
`val_percent` (stable across machines); it is never trained on, and
`tabd bench quality` and the training evaluation both measure on it.
"""
from __future__ import annotations

import hashlib
import random
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from tabd.predictor.training.corpus import cap_tests, is_test_path, read_corpus

VAL_PERCENT = 2.0


@dataclass(frozen=True)
class Source:
    group: str  # files of one group share a repository: a distribution, or a stdlib package
    path: str
    text: str
    test: bool
    comment: str = "#"  # the line comment that heads this file's context chunks, as the daemon writes them


# a corpus row's language -> its line comment: the daemon's mapping for these languageIds (daemon/context/languages.py)
COMMENTS = {"python": "#", "javascript": "//", "typescript": "//"}


def stdlib_root(stdlib: str = "") -> Path:
    return Path(stdlib or sysconfig.get_paths()["stdlib"])


def is_held_out(rel_path: str, val_percent: float = VAL_PERCENT) -> bool:
    """Deterministic split by a hash of the relative path, stable across machines and runs."""
    h = int.from_bytes(hashlib.sha256(rel_path.encode("utf-8")).digest()[:8], "big")
    return (h % 10000) < val_percent * 100


def stdlib_sources(stdlib: str = "", val_percent: float = VAL_PERCENT, max_files: int = 0) -> tuple[list[Source], list[Source]]:
    """(train, val) stdlib .py files, sorted by path; site-packages and non-UTF-8 files left out."""
    root = stdlib_root(stdlib)
    train, val = [], []
    for path in sorted(root.rglob("*.py")):
        if max_files and len(train) >= max_files and len(val) >= max(1, max_files // 4):
            break
        rel = path.relative_to(root).as_posix()
        parts = rel.split("/")
        if "site-packages" in parts or "dist-packages" in parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # a few test files are deliberately not UTF-8
        if not text.strip() or len(text) > 400_000:
            continue  # generated tables are not code anyone types
        group = "stdlib/" + (parts[0][:-3] if len(parts) == 1 else parts[0])
        src = Source(group, rel, text, is_test_path(rel) or "idle_test" in parts)
        (val if is_held_out(rel, val_percent) else train).append(src)
    if max_files:
        train, val = train[:max_files], val[: max(1, max_files // 4)]
    return train, val


def corpus_sources(path: str) -> list[Source]:
    return [Source(f.dist, f.path, f.text, f.test, COMMENTS.get(f.lang, "#")) for f in read_corpus(path)]


def cap_test_share(sources: list[Source], share: float, seed: int) -> list[Source]:
    """Drop test files (seeded) until they hold at most `share` of the characters."""
    return cap_tests(sources, share, seed)


def line_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line, end at the '\\n' (exclusive)."""
    spans, start = [], 0
    while start <= len(text):
        end = text.find("\n", start)
        if end < 0:
            spans.append((start, len(text)))
            break
        spans.append((start, end))
        start = end + 1
    return spans


@dataclass(frozen=True)
class Cut:
    """A cursor in a held-out file: what is before and after it, and the rest of its line."""

    prefix: str
    suffix: str
    expected: str
    kind: str  # "line": the cursor at a line's indentation; "mid": inside a line


def eval_cuts(texts: list[str], n: int, seed: int, kind: str = "line", before: int = 2400, after: int = 600) -> list[Cut]:
    """`n` seeded cuts over non-blank lines; windows the daemon's size."""
    candidates = []
    for ti, text in enumerate(texts):
        for start, end in line_spans(text):
            line = text[start:end]
            if start > 0 and line.strip():
                candidates.append((ti, start, end))
    rng = random.Random(seed)
    cuts = []
    for ti, start, end in rng.sample(candidates, min(n, len(candidates))):
        text = texts[ti]
        line = text[start:end]
        indent = start + len(line) - len(line.lstrip())
        if kind == "mid":
            if end - indent < 2:
                cut = indent
            else:
                cut = rng.randint(indent + 1, end - 1)
        else:
            cut = indent  # after the editor's auto-indent, as a user meets a new line
        cuts.append(Cut(text[max(0, cut - before):cut], text[end:end + after], text[cut:end], kind))
    return cuts


def edit_similarity(a: str, b: str) -> float:
    """1 - Levenshtein(a, b) / max(len): 1.0 for equal strings."""
    if a == b:
        return 1.0
    if not a or not b:
        return 0.0
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return 1 - prev[-1] / max(len(a), len(b))

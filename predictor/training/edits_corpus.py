"""`tabd train edits`: pairs of a file's text in two consecutive releases, the raw matter of next-edit rows.

For every pinned distribution (distributions.txt) that `tabd train corpus` may read (the same held-out rule:
nothing `pip list` shows on this machine), pip downloads the release just before the pin (`name<version`) beside
the pinned wheel; their `.py` files are paired by path, and a pair that differs is kept unless the corpus would
reject either side (corpus.reject_reason), a side is not UTF-8, or the diff is a rewrite rather than edits (too
many hunks, too many lines changed). The result is one gzipped JSONL file, a row per pair:
`{"dist": "attrs", "path": "attr/_make.py", "from": "23.1.0", "to": "23.2.0", "old": "...", "new": "..."}`,
in the list's order and then by path, so the same cache gives the same file.
"""
from __future__ import annotations

import argparse
import difflib
import gzip
import json
import random
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tabd.predictor.prompt.edit_prompt import line_hunks
from tabd.predictor.training.corpus import (DEFAULT_CACHE, DISTRIBUTIONS, content_key, installed_names,
                                            python_files, read_distributions, reject_reason, wheel_for)

MAX_HUNKS = 60  # a file's diff with more line hunks is a rewrite, not a run of edits
MAX_CHANGED = 0.4  # nor is one that changes more than this share of the file's lines


@dataclass
class EditsStats:
    distributions: int = 0  # with both releases read
    files: int = 0  # .py files present in both releases
    pairs: int = 0
    chars: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    no_previous: list[str] = field(default_factory=list)
    shares: dict[str, float] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def skip(self, why: str, n: int = 1) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + n


def _version_key(version: str):
    from pip._vendor.packaging.version import InvalidVersion, Version  # pip is always there: it downloads

    try:
        return Version(version)
    except InvalidVersion:
        return None


def previous_wheel(wheels: Path, name: str, version: str) -> Path | None:
    """The cached wheel of `name` with the highest version below `version`."""
    stem = re.sub(r"[-_.]+", "_", name).lower()
    pinned = _version_key(version)
    best = None
    for path in sorted(wheels.glob("*.whl")):
        dist, ver = path.name.split("-")[:2]
        key = _version_key(ver)
        if dist.lower() != stem or key is None or pinned is None or not key < pinned:
            continue
        if best is None or key > best[0]:
            best = (key, path)
    return None if best is None else best[1]


def pip_download(specs: list[str], wheels: Path, find_links: str = "") -> int:
    source = ["--no-index", "--find-links", find_links] if find_links else []
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", *source,
           "-d", str(wheels), *specs]
    return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode


def fetch(specs: list[str], wheels: Path, find_links: str = "", batch: int = 25) -> None:
    """pip-download `specs` in batches; a batch that fails (one spec with no wheel) is retried one by one."""
    wheels.mkdir(parents=True, exist_ok=True)
    for i in range(0, len(specs), batch):
        group = specs[i:i + batch]
        if pip_download(group, wheels, find_links) != 0:
            for spec in group:
                pip_download([spec], wheels, find_links)
        print(f"tabd train edits: {min(i + batch, len(specs))}/{len(specs)} downloads", file=sys.stderr)


def changed_share(old: str, new: str) -> float:
    a, b = old.splitlines(), new.splitlines()
    changed = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2
                  in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if tag != "equal")
    return changed / max(1, len(a), len(b))


def pair_reason(path: str, old: str | None, new: str | None, excluded: set[str]) -> str | None:
    """Why a file's two releases make no edit rows, or None when they do."""
    if old is None or new is None:
        return "not-utf8"
    if "\x00" in old or "\x00" in new:
        return "binary"
    if old == new:
        return "unchanged"
    why = reject_reason(path, old, excluded) or reject_reason(path, new, excluded)
    if why:
        return why
    hunks = line_hunks(old, new)
    if len(hunks) > MAX_HUNKS or changed_share(old, new) > MAX_CHANGED:
        return "rewrite"
    return None


def build(dists: list[tuple[str, str]], cache: Path, out: Path, excluded: set[str] | None = None,
          find_links: str = "") -> EditsStats:
    excluded = installed_names() if excluded is None else excluded
    stats = EditsStats()
    clean = [(n, v) for n, v in dists if n not in excluded]
    stats.skip("held-out", len(dists) - len(clean))
    wheels, prev = cache / "wheels", cache / "wheels-prev"
    fetch([f"{n}=={v}" for n, v in clean if wheel_for(wheels, n, v) is None], wheels, find_links)
    fetch([f"{n}<{v}" for n, v in clean if previous_wheel(prev, n, v) is None], prev, find_links)
    rows, seen = [], set()
    for name, version in clean:
        new_wheel, old_wheel = wheel_for(wheels, name, version), previous_wheel(prev, name, version)
        if new_wheel is None:
            stats.missing.append(f"{name}=={version}")
            continue
        if old_wheel is None:
            stats.no_previous.append(name)
            continue
        stats.distributions += 1
        before = old_wheel.name.split("-")[1]
        old_files, new_files = python_files(old_wheel), python_files(new_wheel)
        for path in sorted(old_files.keys() & new_files.keys()):
            stats.files += 1
            old, new = old_files[path], new_files[path]
            why = pair_reason(path, old, new, excluded)
            if why is None:
                key = (content_key(old or ""), content_key(new or ""))
                why = "duplicate" if key in seen else None
                seen.add(key)
            if why:
                stats.skip(why)
                continue
            rows.append({"dist": name, "path": path, "from": before, "to": version, "old": old, "new": new})
    write_rows(rows, out)
    stats.pairs = len(rows)
    stats.chars = sum(len(r["old"]) + len(r["new"]) for r in rows)
    stats.shares = row_shares(rows)
    return stats


def row_shares(rows: list[dict], draws: int = 2000, seed: int = 0) -> dict[str, float]:
    """What edit rows drawn from these pairs look like (a seeded sample, as `tabd train` draws them): the share
    that answer "no edit" (the window unchanged), and the share cut mid-typing."""
    from tabd.predictor.prompt.edit_prompt import window_text
    from tabd.predictor.training.edit_rows import example

    rng, hunks, made = random.Random(seed), {}, []
    for _ in range(draws if rows else 0):
        i = rng.randrange(len(rows))
        if i not in hunks:
            hunks[i] = line_hunks(rows[i]["old"], rows[i]["new"])
        ex = example(rows[i]["path"], rows[i]["old"], rows[i]["new"], rng, hunks=hunks[i])
        if ex is not None:
            made.append(ex)
    n = max(1, len(made))
    return {"made_per_draw": round(len(made) / max(1, draws), 3),
            "no_edit_share": round(sum(ex.answer == window_text(ex.win) for ex in made) / n, 3),
            "mid_typing_share": round(sum(ex.mid_typing for ex in made) / n, 3)}


def write_rows(rows: list[dict], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with gzip.GzipFile(tmp, "wb", mtime=0) as raw:  # mtime 0: the same pairs give the same bytes
        for row in rows:
            raw.write((json.dumps(row) + "\n").encode("utf-8"))
    tmp.replace(out)


def read_pairs(path: str | Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--list", default=str(DISTRIBUTIONS), help="distributions to read, `name==version` per line")
    parser.add_argument("--cache", default=str(DEFAULT_CACHE), help="where wheels are cached (outside git)")
    parser.add_argument("-o", "--out", dest="edits_out", default="", help="pairs file (default: CACHE/edits.jsonl.gz)")
    parser.add_argument("--find-links", default="", help="take wheels from this folder only, not from an index")


def run(args: argparse.Namespace) -> int:
    cache = Path(args.cache)
    out = Path(args.edits_out) if args.edits_out else cache / "edits.jsonl.gz"
    try:
        stats = build(read_distributions(Path(args.list)), cache, out, find_links=args.find_links)
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"tabd train edits: {exc}", file=sys.stderr)
        return 1
    summary = {"edits": str(out), "distributions": stats.distributions, "files": stats.files, "pairs": stats.pairs,
               "mb": round(stats.chars / 1e6, 1), "skipped": stats.skipped,
               "no_previous": len(stats.no_previous), "missing": stats.missing, **stats.shares}
    print(json.dumps(summary, indent=2))
    return 0

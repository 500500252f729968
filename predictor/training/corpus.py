"""`tabd train corpus`: Python source from pinned PyPI distributions, for training.

The list of distributions is committed (distributions.txt, `name==version`);
their wheels are downloaded with pip into a cache outside git and only their
`.py` files are kept. The rule that makes tabd's quality figures honest: a
distribution whose name appears in this machine's `pip list` (the system
`python3`'s and the running interpreter's) is never read, nor any vendored
copy of one inside another wheel. That code is the held-out world tabd is
judged on.

The corpus is one gzipped JSONL file, a row per source file:
`{"dist": "django", "path": "django/db/models/query.py", "test": false, "text": "..."}`,
deduplicated by content, with generated and minified files dropped and test
files capped to a fair share of the bytes.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

DISTRIBUTIONS = Path(__file__).resolve().parent / "distributions.txt"
DEFAULT_CACHE = Path(os.environ.get("TABD_CACHE", Path.home() / ".cache" / "tabd")) / "corpus"

VENDOR_DIRS = {"_vendor", "vendor", "vendored", "_vendored", "externals", "_externals", "third_party", "_thirdparty", "extern", "_extern"}
GENERATED = re.compile(r"DO NOT EDIT|[Aa]uto-?generated|[Gg]enerated by (the )?(protocol buffer|Django|gapic|stubgen|swagger|openapi)|@generated")
MAX_FILE_CHARS = 300_000


@dataclass(frozen=True)
class SourceFile:
    dist: str
    path: str
    text: str
    test: bool
    lang: str = "python"  # "javascript" and "typescript" in the npm corpus (npm_corpus.py)


@dataclass
class CorpusStats:
    distributions: int = 0
    files: int = 0
    chars: int = 0
    test_chars: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


def normalize(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_distributions(path: Path = DISTRIBUTIONS) -> list[tuple[str, str]]:
    """(name, version) pairs from `name==version` lines; '#' starts a comment."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep or not name.strip() or not version.strip():
            raise ValueError(f"{path}:{n}: expected name==version, got {line!r}")
        out.append((normalize(name.strip()), version.strip()))
    return out


def installed_names(interpreters: Iterable[str] = ("python3", sys.executable)) -> set[str]:
    """Normalised names of every distribution `pip list` shows for these interpreters."""
    names: set[str] = set()
    for exe in interpreters:
        try:
            out = subprocess.run([exe, "-m", "pip", "list", "--format=json"], capture_output=True, text=True,
                                 timeout=120, check=True).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            raise RuntimeError(f"cannot list the distributions of {exe} ({exc}); refusing to build a corpus "
                               "without knowing what is held out") from exc
        names |= {normalize(row["name"]) for row in json.loads(out)}
    return names


def wheel_for(wheels: Path, name: str, version: str) -> Path | None:
    stem = re.sub(r"[-_.]+", "_", name).lower()
    for path in wheels.glob("*.whl"):
        dist, ver = path.name.split("-")[:2]
        if dist.lower() == stem and ver == version:
            return path
    return None


def download(dists: list[tuple[str, str]], wheels: Path, batch: int = 25) -> list[str]:
    """pip-download the wheels not yet cached; returns `name==version` of those that could not be had."""
    wheels.mkdir(parents=True, exist_ok=True)
    todo = [f"{n}=={v}" for n, v in dists if wheel_for(wheels, n, v) is None]
    failed = []
    for i in range(0, len(todo), batch):
        group = todo[i:i + batch]
        if _pip_download(group, wheels) != 0:  # one bad pin fails the batch: retry one by one
            failed += [spec for spec in group if _pip_download([spec], wheels) != 0]
        print(f"tabd train corpus: {min(i + batch, len(todo))}/{len(todo)} downloads", file=sys.stderr)
    return failed


def _pip_download(specs: list[str], wheels: Path) -> int:
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", "-d", str(wheels), *specs]
    return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode


def is_test_path(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    return (any(p in ("test", "tests", "testing", "testsuite") for p in parts[:-1])
            or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py")


def reject_reason(path: str, text: str, excluded: set[str]) -> str | None:
    """Why a file from a wheel is not training data, or None when it is."""
    parts = path.split("/")
    if any(p in VENDOR_DIRS for p in parts[:-1]):
        return "vendored"
    top = parts[0][:-3] if len(parts) == 1 else parts[0]
    if normalize(top) in excluded:
        return "excluded-top-level"
    if len(text) > MAX_FILE_CHARS or len(text) < 64:
        return "size"
    lines = text.splitlines()
    if max(map(len, lines), default=0) > 1000 or len(text) / max(1, len(lines)) > 100:
        return "minified"
    if path.endswith("_pb2.py") or path.endswith("_pb2_grpc.py") or GENERATED.search(text[:2000]):
        return "generated"
    return None


def python_files(wheel: Path) -> dict[str, str | None]:
    """path -> text of a wheel's .py files, line ends made `\\n` (None: not UTF-8); metadata and data left out."""
    out: dict[str, str | None] = {}
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            path = info.filename
            if not path.endswith(".py") or ".dist-info/" in path or ".data/" in path:
                continue
            try:
                out[path] = zf.read(info).decode("utf-8").replace("\r\n", "\n")
            except UnicodeDecodeError:
                out[path] = None
    return out


def wheel_sources(wheel: Path, dist: str, excluded: set[str], stats: CorpusStats) -> Iterator[SourceFile]:
    for path, text in python_files(wheel).items():
        if text is None:
            stats.skip("not-utf8")
            continue
        why = reject_reason(path, text, excluded)
        if why:
            stats.skip(why)
            continue
        yield SourceFile(dist, path, text, is_test_path(path))


def content_key(text: str) -> str:
    """Files equal but for trailing whitespace and blank lines share a key."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    return hashlib.blake2b("\n".join(lines).encode("utf-8"), digest_size=16).hexdigest()


def cap_tests(files: list, share: float, seed: int) -> list:
    """Drop test files at random (seeded) until their characters are at most `share` of the total.

    Works on anything with `.text` and `.test` (corpus files, training sources).
    """
    tests = [i for i, f in enumerate(files) if f.test]
    code_chars = sum(len(f.text) for f in files if not f.test)
    allowed = share / (1 - share) * code_chars if share < 1 else float("inf")
    random.Random(seed).shuffle(tests)
    kept, used = set(), 0
    for i in tests:
        if used + len(files[i].text) <= allowed:
            kept.add(i)
            used += len(files[i].text)
    return [f for i, f in enumerate(files) if not f.test or i in kept]


def build(dists: list[tuple[str, str]], cache: Path, out: Path, test_share: float = 0.15, seed: int = 0,
          excluded: set[str] | None = None) -> CorpusStats:
    excluded = installed_names() if excluded is None else excluded
    stats = CorpusStats()
    clean = [(n, v) for n, v in dists if n not in excluded]
    for n, v in dists:
        if n in excluded:
            print(f"tabd train corpus: {n} is installed on this machine: held out, not read", file=sys.stderr)
    stats.missing = download(clean, cache / "wheels")
    seen: set[str] = set()
    files: list[SourceFile] = []
    for name, version in clean:
        wheel = wheel_for(cache / "wheels", name, version)
        if wheel is None:
            continue
        stats.distributions += 1
        for f in wheel_sources(wheel, name, excluded, stats):
            key = content_key(f.text)
            if key in seen:
                stats.skip("duplicate")
                continue
            seen.add(key)
            files.append(f)
    before = len(files)
    files = cap_tests(files, test_share, seed)
    stats.skipped["tests-over-share"] = before - len(files)
    write_corpus(files, out)
    stats.files = len(files)
    stats.chars = sum(len(f.text) for f in files)
    stats.test_chars = sum(len(f.text) for f in files if f.test)
    return stats


def write_corpus(files: list[SourceFile], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as fh:
        for f in files:
            row = {"dist": f.dist, "path": f.path, "test": f.test, "text": f.text}
            if f.lang != "python":  # the PyPI corpus's rows stay as they were
                row["lang"] = f.lang
            fh.write(json.dumps(row) + "\n")
    tmp.replace(out)


def read_corpus(path: str | Path) -> list[SourceFile]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [SourceFile(r["dist"], r["path"], r["text"], r["test"], r.get("lang", "python"))
                for r in map(json.loads, fh)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--list", default=str(DISTRIBUTIONS), help="distributions to read, `name==version` per line")
    parser.add_argument("--cache", default=str(DEFAULT_CACHE), help="where wheels are cached (outside git)")
    parser.add_argument("-o", "--out", dest="corpus_out", default="", help="corpus file (default: CACHE/corpus.jsonl.gz)")
    parser.add_argument("--test-share", dest="corpus_test_share", type=float, default=0.15,
                        help="most of the corpus's characters that tests may take")
    parser.add_argument("--seed", dest="corpus_seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.corpus_test_share < 1:
        print("tabd train corpus: --test-share must be within 0..1 (exclusive of 1)", file=sys.stderr)
        return 2
    cache = Path(args.cache)
    out = Path(args.corpus_out) if args.corpus_out else cache / "corpus.jsonl.gz"
    try:
        stats = build(read_distributions(Path(args.list)), cache, out, args.corpus_test_share, args.corpus_seed)
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"tabd train corpus: {exc}", file=sys.stderr)
        return 1
    summary = {"corpus": str(out), "distributions": stats.distributions, "files": stats.files,
               "mb": round(stats.chars / 1e6, 1), "test_share": round(stats.test_chars / max(1, stats.chars), 3),
               "skipped": stats.skipped, "missing": stats.missing}
    (out.parent / "manifest.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0

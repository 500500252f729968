"""Word and sentence statistics for plain-text documents, with a small command line."""
from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

WORD_RE = re.compile(r"[A-Za-z][A-Za-z'-]*")
SENTENCE_END_RE = re.compile(r"[.!?]+(?:\s+|$)")
STOPWORDS = frozenset(
    "a an and are as at be but by for from has have he her his i in is it its of on or she that the "
    "their them they this to was were will with you your".split()
)


@dataclass(frozen=True)
class Stats:
    words: int
    unique_words: int
    sentences: int
    characters: int
    top_words: list[tuple[str, int]]

    @property
    def average_sentence_length(self) -> float:
        return self.words / self.sentences if self.sentences else 0.0

    @property
    def lexical_density(self) -> float:
        return self.unique_words / self.words if self.words else 0.0


def words_in(text: str) -> list[str]:
    return [match.group(0).lower() for match in WORD_RE.finditer(text)]


def count_sentences(text: str) -> int:
    stripped = text.strip()
    if not stripped:
        return 0
    ends = len(SENTENCE_END_RE.findall(stripped))
    return ends if stripped[-1] in ".!?" else ends + 1


def top_words(words: list[str], limit: int = 10, skip_stopwords: bool = True) -> list[tuple[str, int]]:
    counts = Counter(word for word in words if not (skip_stopwords and word in STOPWORDS))
    return sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))[:limit]


def analyse(text: str, limit: int = 10) -> Stats:
    words = words_in(text)
    return Stats(
        words=len(words),
        unique_words=len(set(words)),
        sentences=count_sentences(text),
        characters=len(text),
        top_words=top_words(words, limit),
    )


def merge(parts: list[Stats], limit: int = 10) -> Stats:
    totals: Counter[str] = Counter()
    for part in parts:
        totals.update(dict(part.top_words))
    return Stats(
        words=sum(part.words for part in parts),
        unique_words=max((part.unique_words for part in parts), default=0),
        sentences=sum(part.sentences for part in parts),
        characters=sum(part.characters for part in parts),
        top_words=sorted(totals.items(), key=lambda pair: (-pair[1], pair[0]))[:limit],
    )


def format_stats(name: str, stats: Stats) -> str:
    lines = [
        f"{name}",
        f"  words:      {stats.words}",
        f"  unique:     {stats.unique_words} ({stats.lexical_density:.0%})",
        f"  sentences:  {stats.sentences} (avg {stats.average_sentence_length:.1f} words)",
        f"  characters: {stats.characters}",
    ]
    if stats.top_words:
        common = ", ".join(f"{word} ({count})" for word, count in stats.top_words)
        lines.append(f"  common:     {common}")
    return "\n".join(lines)


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return path.read_text(encoding="latin-1")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=10, help="how many common words to list")
    parser.add_argument("--total", action="store_true", help="also print the totals of all files")
    args = parser.parse_args(argv)
    results = []
    for path in args.files:
        if not path.is_file():
            print(f"textstats: {path}: no such file", file=sys.stderr)
            return 1
        stats = analyse(read_text(path), args.top)
        results.append(stats)
        print(format_stats(str(path), stats))
    if args.total and len(results) > 1:
        print(format_stats("total", merge(results, args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

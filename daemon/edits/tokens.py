"""A document's tokens, as the next-edit synthesis reads them: a real lexer for the file's language (Pygments, which
knows the several hundred languages editors send), each token cut into words and single marks and tagged with where
it stands (code, string, comment).

  tokens_of   the significant tokens of a text (whitespace dropped, each line end one "nl" token), cached by content;
              a text that differs from the file's last one in a few lines is lexed on those lines only (spliced)
  tokens_of_lines  the same for a few lines cut from a file, which never become the file's last text

Why Pygments and not tree-sitter: the edit synthesis needs tokens and whether each sits in a string or a comment,
for every language a user opens; Pygments is pure Python, ships its lexers inside its wheel (tree-sitter's language
pack fetches grammars at run time, which tabd never may), and lexes about 600 KB a second here. A file whose
language Pygments does not know is cut by a plain word/mark splitter with "..." and '...' read as strings.
"""
from __future__ import annotations

import bisect
import hashlib
import re
from functools import lru_cache
from typing import Callable, Iterator, NamedTuple

from cachetools import LRUCache

# kinds: "name" (an identifier), "keyword", "number", "string" and "comment" (any piece of one), "mark" (operators,
# brackets, punctuation) and "nl" (one or more line ends)
CODE_KINDS = frozenset({"name", "keyword", "number", "mark"})
_PIECE = re.compile(r"\w+|\n+|[^\w\s]")
_WORD = re.compile(r"\w+\Z")
_NAME = re.compile(r"[^\W\d]\w*\Z")
_PLAIN = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|\w+|\n+|[^\w\s]")
KEPT = 16  # lexed texts kept (a chain of next edits lexes each state once)
SPLICE_CHARS = 4000  # a change whose lines hold more than this is lexed whole
# what may open or close a construct that spans lines (a triple-quoted string, a block comment, a template): lines
# that hold one are never lexed alone
_SPANNING = ('"""', "'''", "/*", "*/", "`", "<!--", "-->", "\\\n", "=begin", "=end", "[[", "]]", "#if", "#end")


class Token(NamedTuple):
    start: int
    end: int
    text: str
    kind: str

    @property
    def code(self) -> bool:
        return self.kind in CODE_KINDS


def is_name(text: str) -> bool:
    return bool(_NAME.match(text))


def place(kind: str) -> str:
    """Where a token stands: "string", "comment" or "code"."""
    return kind if kind in ("string", "comment") else "code"


_cache: LRUCache[tuple[str, bytes], tuple[Token, ...]] = LRUCache(KEPT)
_recent: LRUCache[str, tuple[str, tuple[Token, ...]]] = LRUCache(KEPT)  # file name -> its last text and tokens


def tokens_of(text: str, filename: str = "") -> tuple[Token, ...]:
    """The significant tokens of `text` (a file named `filename`, which picks the lexer), in order."""
    found = _tokens(text, filename, splice=True)
    _recent[filename] = (text, found)
    return found


def tokens_of_lines(text: str, filename: str = "") -> tuple[Token, ...]:
    """The tokens of a few lines cut from a file named `filename`. They are not the file's last text: spliced onto,
    a snippet shares nothing with the next whole text, which was then lexed whole (each request's walk lexes lines
    of each edit it learns from between its reads of the document: 75% of the event loop's time in a replay)."""
    return _tokens(text, filename, splice=False)


def _tokens(text: str, filename: str, splice: bool) -> tuple[Token, ...]:
    key = (_language(filename), hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest())
    found = _cache.get(key)
    if found is None:
        found = _spliced(text, filename, key[0]) if splice else None
        if found is None:
            found = tuple(_lexed(text, key[0]))
        _cache[key] = found
    return found


def _spliced(text: str, filename: str, alias: str) -> tuple[Token, ...] | None:
    """The tokens of `text` from those of the file's last text, its changed lines lexed alone; None when that is not
    safe (the lines may open or close a string or comment that spans lines) or not worth it."""
    last = _recent.get(filename)
    if last is None:
        return None
    old, tokens = last
    p, s = shared_ends(old, text)
    start = text.rfind("\n", 0, p) + 1
    new_end, old_end = _line_end(text, len(text) - s), _line_end(old, len(old) - s)
    if new_end - start > SPLICE_CHARS or old_end - start > SPLICE_CHARS:
        return None
    region, was = text[start:new_end], old[start:old_end]
    if any(mark in region or mark in was for mark in _SPANNING):
        return None
    i = _first_from(tokens, start)
    j = _first_from(tokens, old_end)
    for k in (i, j):
        if k < len(tokens) and tokens[k].kind in ("string", "comment"):
            return None  # next to a string or comment that may run on from another line
    delta = len(text) - len(old)
    lexed = tuple(t._replace(start=t.start + start, end=t.end + start) for t in _lexed(region, alias))
    after = tuple(t._replace(start=t.start + delta, end=t.end + delta) for t in tokens[j:])
    return _one_nl(tokens[:i], lexed, after)


def _one_nl(*parts: tuple[Token, ...]) -> tuple[Token, ...]:
    """The parts joined, a line end that follows another at a seam dropped (as the whole lex keeps one per run)."""
    out: list[Token] = []
    for part in parts:
        if part and out and out[-1].kind == "nl" and part[0].kind == "nl":
            part = part[1:]
        out.extend(part)
    return tuple(out)


def spread(before: str, after: str, start: int, old_end: int, new_end: int,
           inside: Callable[[str, int], bool]) -> tuple[int, str, str] | None:
    """The change of before[start:old_end] into after[start:new_end] widened over the characters around it that
    `inside(text, i)` admits (a dotted name's, a number's): (where it starts, the old run, the new run); None when the
    runs around it differ in the two texts."""
    a, b_old, b_new = start, old_end, new_end
    while a > 0 and inside(before, a - 1):
        a -= 1
    while b_old < len(before) and inside(before, b_old):
        b_old += 1
    while b_new < len(after) and inside(after, b_new):
        b_new += 1
    if b_old - old_end != b_new - new_end or before[a:start] != after[a:start]:
        return None
    return a, before[a:b_old], after[a:b_new]


def shared_ends(a: str, b: str) -> tuple[int, int]:
    """The lengths of the prefix and suffix two texts share (not overlapping), by halving: slices compare in C, so a
    document of 100 KB costs microseconds, not a Python loop over its characters."""
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if a[:mid] == b[:mid] else (lo, mid - 1)
    p, lo, hi = lo, 0, n - lo
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if a[len(a) - mid:] == b[len(b) - mid:] else (lo, mid - 1)
    return p, lo


def _line_end(text: str, at: int) -> int:
    """Just past the line break of the line holding `at` (the text's end when it has none)."""
    end = text.find("\n", max(at, 0))
    return len(text) if end < 0 else end + 1


def _first_from(tokens: tuple[Token, ...], at: int) -> int:
    """The index of the first token that starts at or after `at`."""
    return bisect.bisect_left(tokens, at, key=lambda t: t.start)


@lru_cache(maxsize=256)
def _language(filename: str) -> str:
    """The Pygments lexer's alias for a file name, or "" (the plain splitter)."""
    if not filename:
        return ""
    try:
        from pygments.lexers import get_lexer_for_filename
        from pygments.util import ClassNotFound
    except ImportError:  # pragma: no cover - pygments is a dependency
        return ""
    try:
        lexer = get_lexer_for_filename(filename)
    except ClassNotFound:
        return ""
    return lexer.aliases[0] if lexer.aliases else ""


@lru_cache(maxsize=32)
def _lexer(alias: str):  # type: ignore[no-untyped-def]
    from pygments.lexers import get_lexer_by_name

    return get_lexer_by_name(alias, stripnl=False, ensurenl=False)


def _lexed(text: str, alias: str) -> Iterator[Token]:
    if not alias:
        yield from _plain(text)
        return
    last_nl = False
    for index, ttype, value in _lexer(alias).get_tokens_unprocessed(text):
        kind = _kind(ttype)
        for m in _PIECE.finditer(value):
            piece = m.group()
            if piece[0] == "\n":
                if not last_nl:
                    yield Token(index + m.start(), index + m.end(), "\n", "nl")
                last_nl = True
                continue
            last_nl = False
            yield Token(index + m.start(), index + m.end(), piece, _piece_kind(kind, piece))


def _kind(ttype: object) -> str:
    name = str(ttype)
    if name.startswith("Token.Comment"):
        return "comment"
    if name.startswith("Token.Literal.String"):
        return "string"
    if name.startswith("Token.Literal.Number"):
        return "number"
    if name.startswith("Token.Keyword") or name.startswith("Token.Operator.Word"):
        return "keyword"
    if name.startswith("Token.Name"):
        return "name"
    return "mark"


def _piece_kind(kind: str, piece: str) -> str:
    if kind in ("string", "comment", "number"):
        return kind
    if _WORD.match(piece):
        return kind if kind in ("name", "keyword") else ("name" if is_name(piece) else "number")
    return "mark"


def _plain(text: str) -> Iterator[Token]:
    for m in _PLAIN.finditer(text):
        piece = m.group()
        if piece[0] == "\n":
            yield Token(m.start(), m.end(), "\n", "nl")
        elif piece[0] in "\"'":
            for p in _PIECE.finditer(piece):
                yield Token(m.start() + p.start(), m.start() + p.end(), p.group(), "string")
        elif _WORD.match(piece):
            yield Token(m.start(), m.end(), piece, "name" if is_name(piece) else "number")
        else:
            yield Token(m.start(), m.end(), piece, "mark")

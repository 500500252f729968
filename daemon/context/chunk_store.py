"""The context store: bounded chunks of the workspace to put before the prompt, and which of them to pick.

It keeps the texts of open documents (chunked lazily, when a selection is
made), the places the user edited recently, and reads the current document's
import block and enclosing headers. `select` scores the candidates by
identifier overlap with the text around the cursor (the rule the embedded
model was trained with), leaves out those that repeat the local window, and
takes what fits a token budget. A snapshot also carries the texts to copy
from (the other open documents whole, and the current one above the window,
within the bytes bound): copy candidates cost no prompt tokens. It knows no
LSP and no model: documents are ids and strings, tokens are estimated from
characters.

The result is a Snapshot: the service holds one per document and replaces it
only on an idle timer or a move elsewhere, so keystrokes never change the
prompt's head and the model's kept KV stays valid.
"""
from __future__ import annotations

import hashlib
import re
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Callable, Union

from tabd.daemon.context.languages import family_of

TextSource = Union[str, Callable[[], str]]  # the text, or how to get it when it is needed (not per keystroke)

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
IMPORT_LINE = re.compile(r"\s*(import\s|from\s+\S+\s+import\b|#include\b|use\s|using\s|require\b|package\s|const\s+\w+\s*=\s*require\()")
HEADER_LINE = re.compile(r"\s*(async\s+def|def|class|function|func|fn|impl|struct|interface|trait|module|pub\s+fn|export\s+(?:default\s+)?(?:function|class))\b")
CHARS_PER_TOKEN = 3  # training's estimate for Python; the backend reports the exact count


@dataclass(frozen=True)
class ContextOptions:
    """Bounds and budget. The first five are user settings, without defaults here: their values come from Config
    (runtime/workspace.py context_options), whose table (runtime/settings.py) declares them once."""

    tokens: int  # prompt budget for context, in (estimated) tokens; 0 turns context off
    max_chunks: int  # chunks held, over all documents
    max_bytes: int  # bytes of chunk text held, over all documents
    chunk_lines: int  # lines per chunk of an open document (as in training)
    idle_ms: int  # pause after which the context may change
    max_edits: int = 8  # recently edited regions remembered (not a user setting)


@dataclass(frozen=True)
class Chunk:
    doc: str  # document id it comes from
    path: str  # what the model reads in the `# path` line
    line: int  # first line in its document
    text: str
    kind: str  # "open", "edit", "imports", "scope"
    words: frozenset[str] = frozenset()
    comment: str = "#"  # its language's line comment, which heads it in the prompt (context/languages.py)

    @property
    def cost(self) -> int:
        return estimate_tokens(self.text)

    @property
    def size(self) -> int:
        return len(self.text.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class Snapshot:
    """The context picked for one document: what goes in the prompt, and what it was picked for."""

    chunks: tuple[Chunk, ...] = ()
    digest: str = ""  # "" when empty; part of the cache key
    tokens: int = 0  # estimated
    generation: int = -1  # the store's generation it was picked at
    anchor: int = -1  # prompt window start it was picked for
    suffix: str = ""  # ...and the window's suffix, which typing at the cursor never changes
    # (path, text) searched for copy candidates, never put in the prompt: the other open documents whole, and the
    # current one above the window, as they were at the pick
    sources: tuple[tuple[str, str], ...] = ()
    path: str = ""  # the document's own path: a FIM family with a place for it heads the file with it (its language)

    def pairs(self) -> list[tuple[str, str]]:
        return [(c.path, c.text) for c in self.chunks]


EMPTY = Snapshot()


@dataclass
class _Doc:
    path: str
    text: str | None  # None: skipped (binary-looking or not UTF-8)
    comment: str = "#"  # its language's line comment (context/languages.py)
    chunks: list[Chunk] | None = None  # None: to be chunked again
    edits: deque[int] = field(default_factory=deque)  # offsets of recent edit regions, newest last
    fetch: Callable[[], str] | None = None  # set by an edit: the current text, read when a pick needs it
    family: str = ""  # its language's family (context/languages.py): only its family's documents feed it

    def current(self) -> str | None:
        if self.fetch is not None and self.text is not None:
            self.text, self.fetch = self.fetch(), None
        return self.text


def identifiers(text: str) -> frozenset[str]:
    return frozenset(_IDENT.findall(text))


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / max(1, len(a | b))


def estimate_tokens(text: str) -> int:
    return len(text) // CHARS_PER_TOKEN + 8  # the path line and separators


def unusable(text: str) -> str | None:
    """Why a document's text is not worth chunking, or None."""
    head = text[:65536]
    if "\x00" in head:
        return "binary (NUL bytes)"
    controls = sum(1 for ch in head if ord(ch) < 32 and ch not in "\t\n\r\f")
    if controls > len(head) // 100:
        return "binary (control characters)"
    if head.count("\ufffd") > max(2, len(head) // 200):
        return "not UTF-8 (replacement characters)"
    try:
        head.encode("utf-8")
    except UnicodeEncodeError:
        return "not UTF-8 (lone surrogates)"
    lines = head.count("\n") + 1
    if len(head) > 4000 and len(head) // lines > 500:
        return "minified (very long lines)"
    return None


def chunk_document(doc: str, path: str, text: str, lines_per_chunk: int, limit_chunks: int, limit_bytes: int,
                   comment: str = "#") -> list[Chunk]:
    """Consecutive chunks of `lines_per_chunk` lines, the first `limit_chunks` non-blank ones within `limit_bytes`."""
    out: list[Chunk] = []
    used = 0
    start, line = 0, 0
    while start < len(text) and len(out) < limit_chunks:
        end = start
        for _ in range(lines_per_chunk):
            nl = text.find("\n", end)
            end = len(text) if nl == -1 else nl + 1
            if end >= len(text):
                break
        piece = text[start:end]
        chunk = Chunk(doc, path, line, piece, "open", identifiers(piece), comment)
        if used + chunk.size > limit_bytes:
            break
        if piece.strip():
            out.append(chunk)
            used += chunk.size
        line += piece.count("\n")
        start = end
    return out


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, max(0, min(offset, len(text))))


def lines_around(text: str, offset: int, radius: int) -> tuple[int, str]:
    """(first line, text) of the cursor's line and `radius` lines either side of it."""
    offset = max(0, min(offset, len(text)))
    start = text.rfind("\n", 0, offset) + 1
    for _ in range(radius):
        if start == 0:
            break
        start = text.rfind("\n", 0, start - 1) + 1
    end = offset
    for _ in range(radius + 1):
        nl = text.find("\n", end)
        if nl == -1:
            end = len(text)
            break
        end = nl + 1
    return line_of(text, start), text[start:end]


def import_block(text: str, limit_lines: int = 60) -> tuple[int, str] | None:
    """(last line, text) of the import lines near the top of a document (blank and comment lines between them kept)."""
    picked: list[str] = []
    last = -1
    depth = 0
    for n, line in enumerate(text[:20000].split("\n")[:400]):
        stripped = line.strip()
        if depth > 0:
            picked.append(line)
            depth += line.count("(") - line.count(")")
            last = n
        elif IMPORT_LINE.match(line):
            picked.append(line)
            depth = max(0, line.count("(") - line.count(")"))
            last = n
        elif picked and stripped and not stripped.startswith(("#", "//", '"""', "'''")):
            break
        if len(picked) >= limit_lines:
            break
    if not picked:
        return None
    return last, "\n".join(p for p in picked if p.strip()) + "\n"


def enclosing_headers(text: str, offset: int, above_line: int, limit: int = 4) -> str:
    """The def/class/fn lines that enclose `offset`, outermost first; only those above line `above_line`."""
    cursor_line = line_of(text, offset)
    lines = text.split("\n", cursor_line + 1)[: cursor_line + 1]
    indent = None
    headers: list[tuple[int, str]] = []
    for n in range(len(lines) - 1, -1, -1):
        line = lines[n]
        if not line.strip():
            continue
        width = len(line) - len(line.lstrip())
        if indent is None:
            indent = width
        elif width < indent:
            indent = width
            if HEADER_LINE.match(line) and n < above_line:
                headers.append((n, line.rstrip()))
        if indent == 0 or len(headers) >= limit:
            break
    return "".join(h + "\n" for _, h in reversed(headers))


def repeats_window(chunk: Chunk, window_lines: set[str]) -> bool:
    """More than half of the chunk's non-blank lines are in the prompt window already."""
    lines = [ln.strip() for ln in chunk.text.split("\n") if ln.strip()]
    return bool(lines) and sum(1 for ln in lines if ln in window_lines) * 2 > len(lines)


def _alike(a: Chunk, b: Chunk) -> bool:
    la = {ln.strip() for ln in a.text.split("\n") if ln.strip()}
    lb = {ln.strip() for ln in b.text.split("\n") if ln.strip()}
    return bool(la and lb) and len(la & lb) > 0.9 * min(len(la), len(lb))


class ContextStore:
    """Open documents, recent edits and the rules that pick a context; bounded in chunks and bytes."""

    def __init__(self, options: ContextOptions) -> None:
        self.options = options
        self.docs: OrderedDict[str, _Doc] = OrderedDict()  # least recently touched first
        self.generation = 0  # bumped when what other documents offer may have changed
        self.skipped: dict[str, str] = {}  # doc -> why it is not chunked

    # -- what the editor tells us --------------------------------------------------

    def open(self, doc: str, path: str, text: str, comment: str = "#", language: str = "") -> None:
        """A document the store may read; `language` the editor's languageId ("" : its path's extension says)."""
        why = unusable(text)
        if why:
            self.skipped[doc] = why
        else:
            self.skipped.pop(doc, None)
        self.docs[doc] = _Doc(path, None if why else text, comment, family=family_of(language, path))
        self.docs.move_to_end(doc)
        self.generation += 1

    def path_of(self, doc: str) -> str:
        d = self.docs.get(doc)
        return d.path if d is not None else ""

    def update(self, doc: str, text: TextSource, offset: int | None) -> None:
        """The document's new text after an edit at `offset` (None: a whole-document replace).

        `text` may be a function returning it: it is called only when a pick needs the text, so a
        keystroke costs no copy of the document.
        """
        d = self.docs.get(doc)
        if d is None:
            return
        if d.text is None:  # skipped documents stay skipped until reopened, so a keystroke costs no scan
            return
        if callable(text):
            d.fetch, d.chunks = text, None
        else:
            d.text, d.fetch, d.chunks = text, None, None
        self.docs.move_to_end(doc)
        if offset is None:
            return
        region = self.options.chunk_lines * 40  # ~half a chunk either side, in characters
        if d.edits and abs(d.edits[-1] - offset) <= region:
            d.edits[-1] = offset  # the same region: not a new candidate, the context need not change
            return
        d.edits.append(offset)
        while len(d.edits) > self.options.max_edits:
            d.edits.popleft()
        self.generation += 1

    def close(self, doc: str) -> None:
        if self.docs.pop(doc, None) is not None:
            self.generation += 1
        self.skipped.pop(doc, None)

    def text_of(self, doc: str) -> str | None:
        d = self.docs.get(doc)
        return d.current() if d is not None else None

    # -- bounded chunks -------------------------------------------------------------

    def chunks(self) -> list[Chunk]:
        """Chunks of every usable open document, newest documents first, within the store's bounds."""
        o = self.options
        left_chunks, left_bytes = o.max_chunks, o.max_bytes
        out: list[Chunk] = []
        for doc in reversed(self.docs):
            d = self.docs[doc]
            text = d.current()
            if text is None:
                continue
            if left_chunks <= 0 or left_bytes <= 0:
                d.chunks = None  # out of bounds: nothing held for it, chunked again when there is room
                continue
            if d.chunks is None:  # one document gets at most half the bounds, so a huge file leaves room for others
                d.chunks = chunk_document(doc, d.path, text, o.chunk_lines, max(1, o.max_chunks // 2),
                                          max(1, o.max_bytes // 2), d.comment)
            kept: list[Chunk] = []
            for c in d.chunks:
                if len(kept) >= left_chunks or c.size > left_bytes:
                    break
                kept.append(c)
                left_bytes -= c.size
            d.chunks = kept
            left_chunks -= len(kept)
            out += kept
        return out

    def held(self) -> tuple[int, int]:
        """(chunks, bytes) held now."""
        chunks = [c for d in self.docs.values() for c in (d.chunks or [])]
        return len(chunks), sum(c.size for c in chunks)

    # -- picking ----------------------------------------------------------------------

    def _kin(self, doc: str, other: str) -> bool:
        """Whether `other` may feed `doc`'s context and copies: the same language family, or either one's unknown
        (family_of says "" where neither the languageId nor the extension does: such a document goes with any)."""
        a, b = self.docs.get(doc), self.docs.get(other)
        return a is None or b is None or a.family == b.family or not a.family or not b.family

    def candidates(self, doc: str, offset: int, window_start: int, window_end: int) -> list[Chunk]:
        """Every chunk that could go before the prompt of `doc` at `offset`: other documents' of its language family."""
        radius = max(2, self.options.chunk_lines // 4)
        out = [c for c in self.chunks() if c.doc != doc and self._kin(doc, c.doc)]
        for other, d in self.docs.items():
            current = d.current()
            if current is None or not self._kin(doc, other):
                continue
            for at in d.edits:
                if other == doc and window_start - 200 <= at <= window_end + 200:
                    continue  # the edit is in the window the model sees anyway
                line, text = lines_around(current, at, radius)
                if text.strip():
                    out.append(Chunk(other, d.path, line, text, "edit", identifiers(text), d.comment))
        own = self.docs.get(doc)
        if own is not None and own.current() is not None:
            out += self._own_chunks(doc, own, offset, window_start)
        return out

    def _own_chunks(self, doc: str, own: _Doc, offset: int, window_start: int) -> list[Chunk]:
        text = own.text or ""
        first_window_line = line_of(text, window_start)
        out: list[Chunk] = []
        block = import_block(text)
        if block is not None and block[0] < first_window_line:
            out.append(Chunk(doc, own.path, 0, block[1], "imports", identifiers(block[1]), own.comment))
        headers = enclosing_headers(text, offset, first_window_line)
        if headers:
            out.append(Chunk(doc, own.path, -1, headers, "scope", identifiers(headers), own.comment))
        return out

    def sources(self, doc: str, window_start: int) -> list[tuple[str, str]]:
        """Text to copy from, nearest first, within max_bytes: `doc` above the window, then the other documents of
        its language family (a Python name is no completion in TypeScript).

        Copying costs no prompt tokens, so whole files are offered, where the
        prompt gets a few chunks; the search is a few scans of each text.
        """
        left = self.options.max_bytes
        out: list[tuple[str, str]] = []
        own = self.docs.get(doc)
        own_text = own.current() if own is not None else None
        if own is not None and own_text is not None and window_start > 0:
            out.append((own.path, own_text[max(0, window_start - left):window_start]))
            left -= len(out[-1][1])
        for other in reversed(self.docs):
            d = self.docs[other]
            text = d.current() if other != doc and left > 0 and self._kin(doc, other) else None
            if text is None:
                continue
            out.append((d.path, text[:left]))
            left -= len(out[-1][1])
        return [s for s in out if s[1]]

    def select(self, doc: str, offset: int, prefix: str, suffix: str, window_start: int) -> Snapshot:
        """The context for `doc` with the cursor at `offset` and this prompt window."""
        o = self.options
        if o.tokens <= 0:
            return Snapshot(generation=self.generation, anchor=window_start, suffix=suffix)
        local = identifiers(prefix[-1500:] + suffix[:500])
        window_lines = {ln.strip() for ln in (prefix + suffix).split("\n") if ln.strip()}
        scored: list[tuple[bool, float, int, Chunk]] = []
        for n, chunk in enumerate(self.candidates(doc, offset, window_start, window_start + len(prefix) + len(suffix))):
            own = chunk.kind in ("imports", "scope")
            score = 1.0 if own else similarity(local, chunk.words)
            if not own and (score <= 0 or repeats_window(chunk, window_lines)):
                continue
            if chunk.kind == "edit":
                score += 0.05  # recently touched: a little ahead of an equally alike chunk
            scored.append((own, -score, n, chunk))
        # other files' chunks first, most alike first (the rows the model is trained on); the current file's
        # own frame (imports, enclosing headers) takes what budget is left, last, next to the file itself
        scored.sort(key=lambda s: s[:3])
        chosen: list[Chunk] = []
        used = 0
        for *_, chunk in scored:
            if used + chunk.cost > o.tokens or any(_alike(chunk, c) for c in chosen):
                continue
            chosen.append(chunk)
            used += chunk.cost
        return make_snapshot(chosen, self.generation, window_start, suffix, self.sources(doc, window_start))


def make_snapshot(chunks: list[Chunk], generation: int, anchor: int, suffix: str = "",
                  texts: list[tuple[str, str]] | None = None) -> Snapshot:
    sources = tuple(texts or ())
    if not chunks and not sources:
        return Snapshot(generation=generation, anchor=anchor, suffix=suffix)
    h = hashlib.blake2b(digest_size=8)
    for part in [p for c in chunks for p in (c.comment, c.path, c.text)] + ["\0sources"] + [p for s in sources for p in s]:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return Snapshot(tuple(chunks), h.hexdigest(), sum(c.cost for c in chunks), generation, anchor, suffix, sources)

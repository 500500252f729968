"""Positions and offsets: the one place tabd converts LSP (line, character) to str offsets and back.

Used by the document store (lsp/documents.py), sessions, replay, the demo and
`tabd complete`. No pygls and no lsprotocol here: plain ints and strs.

- Code units: "utf-16" (LSP's default), "utf-8" or "utf-32" (code points).
- Lines break at \\n, \\r\\n and \\r only, as LSP says; not at the form feed,
  U+0085, U+2028/9 or \\x1c-\\x1e that str.splitlines also breaks at.
- Two ways to read a position. Clamped, as a server must: past a line's end
  means the line's end, past the last line the document's end, inside a
  multi-unit character that character's start. Strict (strict=True), for tools
  that read recorded sessions: such a position is a ValueError naming it.

`Text` keeps a document in blocks of whole lines with its line index, so an
edit costs the block it touches plus one pass over the list of blocks, not the
size of the document.
"""
from __future__ import annotations

import bisect
import itertools
import re

LINE_BREAK = re.compile(r"\r\n|\r|\n")
NOT_HIGH_SURROGATE = bytes(b for b in range(256) if not 0xD8 <= b <= 0xDB)  # high bytes of UTF-16 units
NOT_CONTINUATION = bytes(b for b in range(256) if b & 0xC0 != 0x80)  # UTF-8 bytes that start no character
ENCODINGS = ("utf-16", "utf-8", "utf-32")
JOINED_MAX = 1 << 16  # a text this small also keeps one joined copy: str() and slices without joining blocks
BLOCK_LINES = 128  # lines per block: an edit re-splits one to three blocks, about 10-40 kB of ordinary code


def units(text: str, encoding: str = "utf-16") -> int:
    """Code units of `text` in `encoding` (a lone surrogate counts as one UTF-16 unit, three UTF-8 bytes)."""
    if encoding == "utf-32" or text.isascii():
        return len(text)
    if encoding == "utf-16":
        return len(text.encode("utf-16-le", "surrogatepass")) // 2
    return len(text.encode("utf-8", "surrogatepass"))


def index_in_line(line: str, character: int, encoding: str = "utf-16", strict: bool = False) -> int:
    """The index in `line` (a line without its break) that is `character` code units in.

    The line's first `character` code points encoded and counted in C, not a Python step per character: a position
    far into a long non-ASCII line (1 MB of it took 1-2 s per request, and blocked every other request) costs what
    its bytes cost to copy."""
    if character < 0:
        raise ValueError(f"negative character {character}")
    if encoding == "utf-32" or line.isascii():
        if strict and character > len(line):
            raise ValueError(f"character {character} is past the end of the line ({len(line)})")
        return min(character, len(line))
    width, codec = (2, "utf-16-le") if encoding == "utf-16" else (1, "utf-8")
    head = line[:character]  # `character` code points take at least `character` units: the cut lies within
    try:
        encoded = head.encode(codec)
    except UnicodeEncodeError:  # lone surrogates: a pair of them would encode like one astral character
        return _index_by_steps(line, character, encoding, strict)
    if len(encoded) // width <= character:  # the cut is at the head's end (or past the line's)
        if strict and len(encoded) // width < character:
            raise ValueError(f"character {character} is past the end of the line ({len(encoded) // width})")
        return len(head)
    cut = character * width
    if width == 2:  # code points = units - high surrogates; a pair the cut splits counts as its start
        index = character - len(encoded[1:cut:2].translate(None, NOT_HIGH_SURROGATE))
        inside = 0xD8 <= encoded[cut - 1] <= 0xDB
    else:  # code points = bytes that start one; one the cut splits is its start
        inside = encoded[cut] & 0xC0 == 0x80
        index = cut - len(encoded[:cut].translate(None, NOT_CONTINUATION)) - int(inside)
    if inside and strict:
        raise ValueError(f"character {character} is inside a character of {units(line[index], encoding)} code units")
    return index


def _index_by_steps(line: str, character: int, encoding: str, strict: bool) -> int:
    """index_in_line one character at a time (for lines that hold lone surrogates)."""
    used = 0
    for i, ch in enumerate(line):
        if used >= character:
            return i
        step = units(ch, encoding)
        if used + step > character:
            if strict:
                raise ValueError(f"character {character} is inside a character of {step} code units")
            return i  # inside a multi-unit character: its start
        used += step
    if strict and used < character:
        raise ValueError(f"character {character} is past the end of the line ({used})")
    return len(line)


def line_starts(text: str, base: int = 0) -> list[int]:
    """Offsets (plus base) where the lines after the first start."""
    return [base + m.end() for m in LINE_BREAK.finditer(text)]


def _line_span(text: str, line: int) -> tuple[int, int] | None:
    """(start, end without the break) of `line` in `text`, or None when there is no such line."""
    if line < 0:
        raise ValueError(f"negative line {line}")
    start, n = 0, 0
    for m in LINE_BREAK.finditer(text):
        if n == line:
            return start, m.start()
        start, n = m.end(), n + 1
    return (start, len(text)) if n == line else None


def offset_at(text: str, line: int, character: int, encoding: str = "utf-16", strict: bool = False) -> int:
    """The str offset of an LSP position in `text` (clamped, or ValueError when strict)."""
    span = _line_span(text, line)
    if span is None:
        if strict:
            raise ValueError(f"line {line} is past the end of the document")
        return len(text)
    start, end = span
    return start + index_in_line(text[start:end], character, encoding, strict)


def position_at(text: str, offset: int, encoding: str = "utf-16") -> tuple[int, int]:
    """The LSP position of a str offset in `text` (clamped to the text)."""
    offset = max(0, min(offset, len(text)))
    line, start = 0, 0
    for m in LINE_BREAK.finditer(text, 0, offset + 1):  # one past: a \r\n that the offset splits is no break yet
        if m.end() > offset:
            break
        line, start = line + 1, m.end()
    return line, units(text[start:offset], encoding)


def advance(line: int, character: int, inserted: str, encoding: str = "utf-16") -> tuple[int, int]:
    """The position just after `inserted` when it is inserted at (line, character)."""
    breaks = list(LINE_BREAK.finditer(inserted))
    if not breaks:
        return line, character + units(inserted, encoding)
    return line + len(breaks), units(inserted[breaks[-1].end():], encoding)


class Text:
    """A document's text in blocks of whole lines, its line index kept up to date as edits arrive.

    Every block but the last ends with a line break and is not empty, and a
    block never ends with \\r when the next starts with \\n (that pair is one
    break). Each block knows where its lines start; the absolute offset and
    line number of every block are prefix sums, redone from the edited block on.
    """

    def __init__(self, text: str = "", block_lines: int = BLOCK_LINES) -> None:
        self.block_lines = max(1, block_lines)
        self._blocks: list[str] = []
        self._starts: list[list[int]] = []  # per block: offsets in it where its lines start (first 0)
        self._chars: list[int] = []  # per block: absolute offset of its first character
        self._lines: list[int] = []  # per block: absolute number of its first line
        self._joined: str | None = text if len(text) <= JOINED_MAX else None
        self._replace_blocks(0, 0, text, final=True)

    # -- reading --------------------------------------------------------------------

    def __len__(self) -> int:
        return self._chars[-1] + len(self._blocks[-1])

    def __str__(self) -> str:
        if self._joined is None:
            self._joined = "".join(self._blocks)
        return self._joined

    @property
    def line_count(self) -> int:
        return self._lines[-1] + len(self._starts[-1])

    def slice(self, start: int, end: int) -> str:
        """text[start:end], from the blocks it spans."""
        start, end = max(0, start), min(end, len(self))
        if start >= end:
            return ""
        if self._joined is not None:
            return self._joined[start:end]
        k = bisect.bisect_right(self._chars, start) - 1
        parts = []
        while k < len(self._blocks) and self._chars[k] < end:
            base = self._chars[k]
            parts.append(self._blocks[k][max(0, start - base) : end - base])
            k += 1
        return "".join(parts)

    def _line_span(self, line: int) -> tuple[int, int, int]:
        """(block, start in the block, end in the block without the break) of an existing line."""
        k = bisect.bisect_right(self._lines, line) - 1
        starts, block = self._starts[k], self._blocks[k]
        i = line - self._lines[k]
        start = starts[i]
        end = starts[i + 1] if i + 1 < len(starts) else len(block)
        while end > start and block[end - 1] in "\r\n":
            end -= 1
        return k, start, end

    def line_text(self, line: int) -> str:
        """Line `line` without its break."""
        k, start, end = self._line_span(line)
        return self._blocks[k][start:end]

    def line_start(self, line: int) -> int:
        k, start, _ = self._line_span(line)
        return self._chars[k] + start

    def offset_at(self, line: int, character: int, encoding: str = "utf-16", strict: bool = False) -> int:
        """The offset of an LSP position (clamped as LSP says, or ValueError when strict)."""
        if line < 0 or character < 0:
            raise ValueError(f"negative position ({line}, {character})")
        if line >= self.line_count:
            if strict:
                raise ValueError(f"line {line} is past the end of the document")
            return len(self)
        k, start, end = self._line_span(line)
        return self._chars[k] + start + index_in_line(self._blocks[k][start:end], character, encoding, strict)

    def position_at(self, offset: int, encoding: str = "utf-16") -> tuple[int, int]:
        """The LSP position of an offset (clamped to the document)."""
        offset = max(0, min(offset, len(self)))
        k = bisect.bisect_right(self._chars, offset) - 1
        rel = offset - self._chars[k]
        i = bisect.bisect_right(self._starts[k], rel) - 1
        start = self._starts[k][i]
        return self._lines[k] + i, units(self._blocks[k][start:rel], encoding)

    def all_line_starts(self) -> list[int]:
        """Absolute start of every line (whole-document work: for tests and tools, not per keystroke)."""
        return [base + s for base, starts in zip(self._chars, self._starts) for s in starts]

    # -- editing --------------------------------------------------------------------

    def replace(self, a: int, b: int, new_text: str) -> None:
        """Replace text[a:b] (0 <= a <= b <= len) with new_text."""
        n = len(self._blocks)
        first = bisect.bisect_right(self._chars, a) - 1
        if first > 0 and a == self._chars[first]:
            first -= 1  # the edit may join the previous block's last break (a \r before a new \n)
        last = bisect.bisect_right(self._chars, b) - 1
        if last + 1 < n and sum(len(self._starts[k]) for k in range(first, last + 1)) < self.block_lines // 2:
            last += 1  # a small chunk takes in its neighbour, so blocks do not fragment
        joined = self._joined
        self._joined = None if joined is None or len(joined) > JOINED_MAX else joined[:a] + new_text + joined[b:]
        if self._replace_in_block(a, b, new_text):
            return
        base = self._chars[first]
        chunk = "".join(self._blocks[first : last + 1])
        chunk = chunk[: a - base] + new_text + chunk[b - base :]
        self._replace_blocks(first, last + 1, chunk, final=last + 1 == n)

    def _replace_in_block(self, a: int, b: int, new_text: str) -> bool:
        """An edit inside one block, with no \r in or beside it (so no break can join or split): the block's line
        starts are shifted and spliced instead of found again. A keystroke or a Tab then costs its own characters,
        not a regex over the block's lines (measured 0.07-0.16 ms of every didChange at 128 lines). False when the
        edit does not qualify; replace() then re-splits."""
        k = bisect.bisect_right(self._chars, a) - 1
        block, base, final = self._blocks[k], self._chars[k], k == len(self._blocks) - 1
        ra, rb = a - base, b - base
        if rb > len(block) or (rb == len(block) and not final) or (ra == 0 and k > 0):
            return False  # it reaches the block's own last break, or the one before it
        if "\r" in new_text or "\r" in block[max(0, ra - 1) : rb + 1]:
            return False
        starts = self._starts[k]
        kept, after = bisect.bisect_right(starts, ra), bisect.bisect_right(starts, rb)  # (ra, rb]: breaks removed
        delta = len(new_text) - (rb - ra)
        spliced = starts[:kept] + [ra + m.end() for m in LINE_BREAK.finditer(new_text)] + [s + delta for s in starts[after:]]
        if len(spliced) > 2 * self.block_lines or (not final and len(spliced) < self.block_lines // 2):
            return False  # too big or too small a block now: re-split, or merge with a neighbour
        self._blocks[k] = block[:ra] + new_text + block[rb:]
        lines = len(spliced) - len(starts)
        self._starts[k] = spliced
        for j in range(k + 1, len(self._blocks)):
            self._chars[j] += delta
            self._lines[j] += lines
        return True

    def _replace_blocks(self, lo: int, hi: int, chunk: str, final: bool) -> None:
        """Blocks lo..hi-1 become `chunk`, split again; the prefix sums are redone from lo on."""
        starts = [0] + line_starts(chunk)
        if not final and len(starts) > 1:
            starts.pop()  # the chunk ends with a break: its "last line" is the next block's first
        blocks, block_starts = [], []
        for i in range(0, len(starts), self.block_lines):
            group = starts[i : i + self.block_lines]
            end = starts[i + self.block_lines] if i + self.block_lines < len(starts) else len(chunk)
            blocks.append(chunk[group[0] : end])
            block_starts.append([s - group[0] for s in group])
        self._blocks[lo:hi] = blocks
        self._starts[lo:hi] = block_starts
        chars = itertools.accumulate((len(b) for b in self._blocks[lo:-1]), initial=self._chars[lo - 1] + len(self._blocks[lo - 1]) if lo else 0)
        lines = itertools.accumulate((len(s) for s in self._starts[lo:-1]), initial=self._lines[lo - 1] + len(self._starts[lo - 1]) if lo else 0)
        self._chars[lo:] = chars
        self._lines[lo:] = lines

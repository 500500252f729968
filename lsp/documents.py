"""Open documents: text, version and LSP positions, exact under any edit.

pygls' TextDocument splits lines with str.splitlines, which also breaks at
form feeds, \x1c-\x1e, U+0085, U+2028 and U+2029; LSP breaks lines only at
\n, \r\n and \r, so positions after such a character would drift from the
editor's. This store keeps line starts by LSP's rule, counts code units with
pygls' own unit counters (UTF-16 by default, UTF-8/UTF-32 when negotiated) and
clamps positions as LSP specifies: past a line's end means the line's end,
past the last line means the document's end, inside a surrogate pair rounds
down to the character's start.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from pygls.workspace.position_codec import PositionCodec

LINE_BREAK = re.compile(r"\r\n|\r|\n")


class DocumentError(ValueError):
    """A request about a document the server does not have, or an edit it cannot apply."""


def line_starts(text: str, base: int = 0) -> list[int]:
    return [base + m.end() for m in LINE_BREAK.finditer(text)]


@dataclass
class Document:
    uri: str
    text: str
    version: int
    language: str
    starts: list[int]  # offset where each line starts; starts[0] == 0

    @classmethod
    def new(cls, uri: str, text: str, version: int, language: str = "") -> "Document":
        return cls(uri, text, version, language, [0] + line_starts(text))

    def line_text(self, line: int) -> str:
        """Line `line` without its terminator."""
        start = self.starts[line]
        end = self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    def offset_at(self, line: int, character: int, codec: PositionCodec) -> int:
        """The str offset of an LSP position, clamped as LSP says (never an exception)."""
        if line < 0 or character < 0:
            raise DocumentError(f"negative position ({line}, {character})")
        if line >= len(self.starts):
            return len(self.text)
        content = self.line_text(line)
        units = 0
        for i, ch in enumerate(content):
            step = codec.impl.code_units_for_char(ch)
            if units + step > character:
                return self.starts[line] + i  # inside a multi-unit character: its start
            units += step
        return self.starts[line] + len(content)

    def position_at(self, offset: int, codec: PositionCodec) -> tuple[int, int]:
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self.starts, offset) - 1
        return line, codec.client_num_units(self.text[self.starts[line] : offset])

    def apply(self, start: tuple[int, int] | None, end: tuple[int, int] | None, new_text: str, codec: PositionCodec) -> int:
        """Apply one content change (a whole-document one when start is None); returns the offset after the new text."""
        if start is None or end is None:
            self.text = new_text
            self.starts = [0] + line_starts(new_text)
            return len(new_text)
        a = self.offset_at(*start, codec)
        b = self.offset_at(*end, codec)
        if b < a:
            raise DocumentError(f"range end {end} is before its start {start}")
        # A \r\n pair split by the edit changes line starts around it: re-scan one char either side.
        lo = max(0, a - 1)
        self.text = self.text[:a] + new_text + self.text[b:]
        delta = len(new_text) - (b - a)
        first = bisect.bisect_right(self.starts, lo)  # starts <= lo are unaffected
        last = bisect.bisect_right(self.starts, b + 1)  # starts > b+1 only shift
        hi = a + len(new_text) + 1
        middle = line_starts(self.text[lo : hi + 1], lo)
        middle = [s for s in middle if lo < s <= hi]
        tail = [s + delta for s in self.starts[last:]] if delta else self.starts[last:]
        tail = [s for s in tail if s > hi]
        self.starts = self.starts[:first] + middle + tail
        return a + len(new_text)


class DocumentStore:
    def __init__(self) -> None:
        self.docs: dict[str, Document] = {}

    def open(self, uri: str, text: str, version: int, language: str = "") -> Document:
        doc = self.docs[uri] = Document.new(uri, text, version, language)
        return doc

    def get(self, uri: str) -> Document:
        doc = self.docs.get(uri)
        if doc is None:
            raise DocumentError(f"document {uri} is not open (send textDocument/didOpen first)")
        return doc

    def close(self, uri: str) -> None:
        self.docs.pop(uri, None)

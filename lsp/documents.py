"""Open documents: text, version and LSP positions, exact under any edit and cheap in big documents.

pygls' TextDocument splits lines with str.splitlines, which also breaks at
form feeds, \\x1c-\\x1e, U+0085, U+2028 and U+2029; LSP breaks lines only at
\\n, \\r\\n and \\r, so positions after such a character would drift from the
editor's. A document here is a positions.Text: lines by LSP's rule, code units
in the negotiated encoding (UTF-16 by default, UTF-8/UTF-32), positions clamped
as LSP specifies (past a line's end means the line's end, past the last line
the document's end, inside a surrogate pair the character's start), and an
edit costs the lines around it, not the whole document.
"""
from __future__ import annotations

from dataclasses import dataclass

from tabd.lsp.args import doc_id
from tabd.lsp.positions import Text


class DocumentError(ValueError):
    """A request about a document the server does not have, or an edit it cannot apply."""


@dataclass
class Document:
    uri: str
    content: Text
    version: int
    language: str
    id: str = ""  # the URI's short hash (args.doc_id), made once at the open: every request and edit names it

    @classmethod
    def new(cls, uri: str, text: str, version: int, language: str = "") -> "Document":
        return cls(uri, Text(text), version, language, doc_id(uri))

    @property
    def text(self) -> str:
        """The whole text (joined from its blocks: for sync checks, not per keystroke)."""
        return str(self.content)

    @property
    def line_count(self) -> int:
        return self.content.line_count

    def around(self, offset: int, before: int, after: int) -> tuple[str, str]:
        """(up to `before` characters before offset, up to `after` from it)."""
        return self.content.slice(offset - before, offset), self.content.slice(offset, offset + after)

    def offset_at(self, line: int, character: int, encoding: str = "utf-16") -> int:
        """The str offset of an LSP position, clamped as LSP says (never an exception but for negatives)."""
        try:
            return self.content.offset_at(line, character, encoding)
        except ValueError as exc:
            raise DocumentError(str(exc)) from None

    def position_at(self, offset: int, encoding: str = "utf-16") -> tuple[int, int]:
        return self.content.position_at(offset, encoding)

    def apply(self, start: tuple[int, int] | None, end: tuple[int, int] | None, new_text: str, encoding: str = "utf-16") -> int:
        """Apply one content change (a whole-document one when start is None); returns the offset after the new text."""
        if start is None or end is None:
            self.content = Text(new_text)
            return len(new_text)
        return self.replace(self.offset_at(*start, encoding), self.offset_at(*end, encoding), new_text,
                            (start, end))

    def replace(self, a: int, b: int, new_text: str, span: tuple[tuple[int, int], tuple[int, int]] | None = None) -> int:
        """Replace the text between two offsets (as offset_at gives them: `span`, the positions they came from, for
        the error); returns the offset after the new text."""
        if b < a:
            start, end = span if span is not None else (a, b)
            raise DocumentError(f"range end {end} is before its start {start}")
        self.content.replace(a, b, new_text)
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
            shown = uri if len(uri) <= 200 else uri[:200] + "..."  # the message goes into answers and the log
            raise DocumentError(f"document {shown} is not open (send textDocument/didOpen first)")
        return doc

    def close(self, uri: str) -> None:
        self.docs.pop(uri, None)

"""A document in an editor that types the way VS Code does by default for Python, and the edits it sends the server.

The rules (VS Code's defaults; the pairs from its extensions/python/language-configuration.json):
- `editor.autoClosingBrackets` = languageDefined: typing ( [ { inserts the pair, the cursor between,
  when the character after the cursor on its line is in autoCloseBefore's default for brackets,
  ``'"`;:.,=}])>`` space and tab, or the line ends there.
- `editor.autoClosingQuotes` = languageDefined: " and ' the same way, with autoCloseBefore's default for
  quotes (``;:.,=}])>`` space, tab); a lone quote not right after a word character (`don't`); " not
  inside a string, ' neither inside a string nor in a comment. After one of r R u U f F b B the pair
  is the prefixed one (`f"`): no word-character rule, and not in a comment either. "Inside" is the kind
  of the character before the pair (pystrings.py). A triple quote gets no rule of its own: typed
  one quote at a time, the first pair closes, the second overtypes, and the third follows a
  string (the empty one), so it opens the docstring with nothing after it.
- `editor.autoClosingOvertype` = auto: typing a closer the editor inserted, when it is right after
  the cursor, moves the cursor over it: no change is sent, only the move.
- `editor.autoClosingDelete` = auto: backspace between an auto-inserted pair deletes both.
- Enter between brackets, `(|)`: the closer goes to its own line, "\\n" + indent + one level +
  "\\n" + indent in one change, the cursor on the middle line. Any other Enter inserts the line
  break and the indentation the caller asks for (the typist's auto-indent).
- Line breaks: like VS Code, the document keeps one: \\r\\n when more than half of the file's breaks
  carry a \\r, else \\n; a file's mixed or lone-\\r breaks are that one once it is open.

The document is a str with the cursor as an offset; every edit comes back as an `Edit`, with LSP
positions (UTF-16 code units) ready for the session file.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tabd.daemon.sessions import pystrings
from tabd.daemon.sessions.format import advance, make_range, utf16_len

PYTHON_PAIRS = {"(": ")", "[": "]", "{": "}", '"': '"', "'": "'"}
QUOTES = frozenset("'\"")
STRING_PREFIXES = frozenset("rRuUfFbB")
AUTOCLOSE_BEFORE_BRACKETS = "'\"`;:.,=}])> \t"
AUTOCLOSE_BEFORE_QUOTES = ";:.,=}])> \t"
WORD_SEPARATORS = "`~!@#$%^&*()-=+[{]}\\|;:'\",.<>/?"
LINE_BREAK = re.compile(r"\r\n|\r|\n")


def majority_eol(text: str) -> str:
    """The line break VS Code gives a file it opens: \\r\\n when more than half of its breaks carry a \\r."""
    crlf = text.count("\r\n")
    cr = text.count("\r") - crlf
    lf = text.count("\n") - crlf
    total = crlf + cr + lf
    return "\r\n" if total and (crlf + cr) > total / 2 else "\n"


def with_eol(text: str, eol: str) -> str:
    return LINE_BREAK.sub(eol, text)


def indent_unit(text: str) -> str:
    """One level of indentation in `text`: a tab when tab-indented lines are the most, else its smallest step of spaces."""
    tabs = spaces = 0
    steps: list[int] = []
    for line in text.split("\n"):
        if line.startswith("\t"):
            tabs += 1
        elif line.startswith(" ") and line.strip():
            spaces += 1
            steps.append(len(line) - len(line.lstrip(" ")))
    if tabs > spaces:
        return "\t"
    return " " * min([s for s in steps if s >= 2] or [4])


def is_word_character(ch: str) -> bool:
    return bool(ch) and not ch.isspace() and ch not in WORD_SEPARATORS


@dataclass(frozen=True)
class Edit:
    """What the editor sends: a change of [start, end) to `text` leaving the cursor at `cursor`, or a move of the cursor."""

    op: str  # "change" or "move"
    start: dict[str, int]
    end: dict[str, int]
    text: str
    cursor: dict[str, int]

    def event(self, t: float, uri: str) -> dict[str, Any]:
        """The session event; a change carries "cursor" only where it is not the end of its text (an auto-closed pair)."""
        if self.op == "move":
            return {"t": t, "op": "move", "uri": uri, "position": dict(self.cursor)}
        out = {"t": t, "op": "change", "uri": uri, "range": make_range(self.start, self.end), "text": self.text}
        if self.cursor != advance(self.start, self.text):
            out["cursor"] = dict(self.cursor)
        return out


@dataclass
class Buffer:
    """One open document and its cursor, edited by key presses as VS Code would."""

    text: str
    cursor: int = 0
    unit: str = "    "
    pairs: dict[str, str] = field(default_factory=lambda: dict(PYTHON_PAIRS))
    eol: str = ""
    # offsets of the closers the editor inserted and still tracks (VS Code's auto-closed characters)
    auto_closed: list[int] = field(default_factory=list)
    # (offset of a line start, the scanner's state there): the text before it has not changed since
    _lexed: tuple[int, str] = field(default=(0, ""), init=False, repr=False)

    def __post_init__(self) -> None:
        self.eol = self.eol or majority_eol(self.text)
        self.text = with_eol(self.text, self.eol)

    # ------------------------------------------------------------ where things are

    def position(self, offset: int) -> dict[str, int]:
        """The LSP position of `offset`; the text has one kind of line break, so counting is enough."""
        line = self.text.count(self.eol, 0, offset)
        start = self.line_start(offset)
        return {"line": line, "character": utf16_len(self.text[start:offset])}

    def line_start(self, offset: int | None = None) -> int:
        at = self.cursor if offset is None else offset
        found = self.text.rfind(self.eol, 0, at)
        return 0 if found < 0 else found + len(self.eol)

    def line_end(self, offset: int | None = None) -> int:
        at = self.cursor if offset is None else offset
        found = self.text.find(self.eol, at)
        return len(self.text) if found < 0 else found

    def kind_at(self, offset: int) -> str:
        """The kind (code, string, comment) of the character before `offset`, as the auto-closing rules read it."""
        start = self.line_start(offset)
        lexed_at, state = self._lexed
        if lexed_at > start:
            lexed_at, state = 0, ""
        state = pystrings.state_after(state, self.text[lexed_at:start])
        self._lexed = (start, state)
        return pystrings.scan(state, self.text[start:offset])[1]

    # ------------------------------------------------------------ edits

    def _replace(self, start: int, end: int, new: str, cursor: int) -> Edit:
        before = (self.position(start), self.position(end))
        delta = len(new) - (end - start)
        self.auto_closed = [o + delta if o >= end else o for o in self.auto_closed if not start <= o < end]
        if start < self._lexed[0]:
            self._lexed = (0, "")
        self.text = self.text[:start] + new + self.text[end:]
        self.cursor = cursor
        return Edit("change", before[0], before[1], new, self.position(cursor))

    def place(self, offset: int) -> None:
        """Put the cursor somewhere else (a click): the editor stops tracking what it auto-closed; nothing is sent."""
        self.cursor = offset
        self.auto_closed = []

    def move(self, chars: int) -> Edit:
        """The cursor `chars` characters on (arrow keys, End, or an overtype); what it passes is no longer tracked."""
        self.cursor += chars
        self.auto_closed = [o for o in self.auto_closed if o >= self.cursor]
        here = self.position(self.cursor)
        return Edit("move", here, here, "", here)

    def insert(self, text: str) -> Edit:
        return self._replace(self.cursor, self.cursor, text, self.cursor + len(text))

    def type(self, ch: str) -> Edit:
        """One key that types `ch` (not Enter): an overtype, an auto-closed pair, or the character."""
        if self.cursor in self.auto_closed and self.text.startswith(ch, self.cursor) and ch in self.pairs.values():
            return self.move(len(ch))
        close = self._closer_for(ch)
        if close is None:
            return self.insert(ch)
        at = self.cursor
        edit = self._replace(at, at, ch + close, at + len(ch))
        self.auto_closed = sorted(self.auto_closed + [at + len(ch)])
        return edit

    def _closer_for(self, ch: str) -> str | None:
        """The closer VS Code would insert after `ch` here, or None."""
        close = self.pairs.get(ch)
        if close is None:
            return None
        after = self.text[self.cursor:self.line_end()][:1]
        quote = ch in QUOTES
        allowed = AUTOCLOSE_BEFORE_QUOTES if quote else AUTOCLOSE_BEFORE_BRACKETS
        closers = set(self.pairs.values()) - set(self.pairs)  # a closer that is no opener too (not a quote)
        if after and after not in allowed and after not in closers:
            return None
        if not quote:
            return close
        before = self.text[self.line_start():self.cursor][-1:]
        prefixed = before in STRING_PREFIXES  # the pair is f" (or r', b", ...): the longest open that matches
        if not prefixed and is_word_character(before):
            return None
        not_in = (pystrings.STRING,) if ch == '"' and not prefixed else (pystrings.STRING, pystrings.COMMENT)
        if self.kind_at(self.cursor - len(before) if prefixed else self.cursor) in not_in:
            return None
        return close

    def between_brackets(self) -> bool:
        """Whether the cursor sits between an opening bracket and its closer (spaces aside), as `(|)`."""
        before = self.text[self.line_start():self.cursor].rstrip(" \t")
        after = self.text[self.cursor:self.line_end()].lstrip(" \t")
        opener = before[-1:]
        return bool(opener) and opener not in QUOTES and opener in self.pairs and after.startswith(self.pairs[opener])

    def enter(self, indent: str) -> Edit:
        """Enter: between brackets the closer gets its own line; otherwise a line break and `indent`."""
        if self.between_brackets():
            line = self.text[self.line_start():self.line_end()]
            here = line[:len(line) - len(line.lstrip(" \t"))]
            first = self.eol + here + self.unit
            return self._replace(self.cursor, self.cursor, first + self.eol + here, self.cursor + len(first))
        return self.insert(self.eol + indent)

    def backspace(self) -> Edit:
        """Backspace: both halves of an auto-closed pair the cursor is between, else the character before."""
        at = self.cursor
        before = self.text[self.line_start():at][-1:]
        if before and before in self.pairs and at in self.auto_closed and self.text.startswith(self.pairs[before], at):
            return self._replace(at - 1, at + len(self.pairs[before]), "", at - 1)
        width = len(self.eol) if self.text.endswith(self.eol, 0, at) else 1
        return self._replace(at - width, at, "", at - width)

    def delete_forward(self, chars: int) -> Edit:
        """Delete (the key) `chars` characters after the cursor."""
        return self._replace(self.cursor, self.cursor + chars, "", self.cursor)

    def replace_indent(self, indent: str) -> Edit:
        """Set the whitespace between the line's start and the cursor (Tab, Shift+Tab, backspace in the indentation)."""
        start = self.line_start()
        return self._replace(start, self.cursor, indent, start + len(indent))

"""The person at VS Code: retypes spans of a file through editor.Buffer, so the session holds what VS Code would send.

The person types the file's text; the editor adds its closers (editor.py). Where the two
meet, the person does what a VS Code user does:
- the next character is a closer the editor put right after the cursor: typing it overtypes
  it (a move, no change);
- Enter where the editor's closer already sits on the next line and the file has the same
  there (after Enter between brackets): the person goes down to it and past it, one move
  (arrow keys and End);
- the person types a closer the editor had already put further on (the file has it on this
  line, the editor on the next): they delete the doubled one they now see after the cursor;
- Enter between brackets indents one level; where the file's next line is indented
  otherwise, the person sets its indentation (one change);
- whatever the editor inserted that the file does not have is deleted (Delete, one change)
  when the span is done.
Timing, pauses and letter typos are the plain typist's (keyboard.TypingStyle); an opening
bracket is mistyped as often as a letter (the wrong one, then backspace: where
autoClosingDelete shows). At every step the text from the span's start to the cursor is
the file's, and at the end the document is the file, in the editor's line breaks; a
RuntimeError says so otherwise.
"""
from __future__ import annotations

import random
from typing import Any, Callable, Sequence

from tabd.daemon.sessions.editor import Buffer, Edit, indent_unit, majority_eol, with_eol
from tabd.daemon.sessions.keyboard import TYPO_KEYS, Span, TypingStyle

OPENERS = "([{"
CLOSERS = ")]}"


class EditorTypist:
    def __init__(self, buffer: Buffer, uri: str, rng: random.Random, style: TypingStyle, t: float) -> None:
        self.buffer, self.uri, self.rng, self.style, self.t = buffer, uri, rng, style, t
        self.events: list[dict[str, Any]] = []

    def _interval(self) -> float:
        return (1.0 / self.style.cps) * self.rng.lognormvariate(0.0, self.style.jitter)

    def wait(self, seconds: float) -> None:
        self.t += seconds

    def press(self, key: Callable[[], Edit]) -> Edit:
        self.wait(self._interval())
        edit = key()
        self.events.append(edit.event(round(self.t, 3), self.uri))
        return edit

    def _extra(self, tail: int) -> str:
        """What the editor put after the cursor that the file does not have there (the document's last `tail` are the file's)."""
        b = self.buffer
        return b.text[b.cursor:len(b.text) - tail]

    def type_span(self, anchor: int, target: str) -> None:
        """Type `target` (line breaks, indentation and all) at offset `anchor`, the end of the line before the span."""
        b = self.buffer
        b.place(anchor)
        tail = len(b.text) - anchor
        self.wait(self.rng.uniform(*self.style.span_pause))
        k = 0
        while k < len(target):
            if target.startswith(b.eol, k):
                if k:
                    self.wait(self.rng.uniform(*self.style.line_pause))
                k = self._line_break(target, k, tail)
            else:
                k = self._character(target, k, tail)
            if b.text[anchor:b.cursor] != target[:k]:
                raise RuntimeError(f"editor typist out of step at {k} of {target!r}: {b.text[anchor:b.cursor]!r}")
        self.wait(self.rng.uniform(*self.style.line_pause))
        extra = self._extra(tail)
        if extra:
            self.press(lambda: b.delete_forward(len(extra)))

    def _line_break(self, target: str, k: int, tail: int) -> int:
        b = self.buffer
        extra = self._extra(tail)
        if extra.startswith(b.eol):
            run = _closing_run(extra, target, k)
            if run:
                self.press(lambda: b.move(run))
                return k + run
        body = target[k + len(b.eol):]
        indent = body[:len(body) - len(body.lstrip(" \t"))]
        self.press(lambda: b.enter(indent))
        if b.text[b.line_start():b.cursor] != indent:
            self.press(lambda: b.replace_indent(indent))
        return k + len(b.eol) + len(indent)

    def _character(self, target: str, k: int, tail: int) -> int:
        b, rng, style = self.buffer, self.rng, self.style
        ch = target[k]
        if rng.random() < style.think_rate:
            self.wait(rng.uniform(*style.think_pause))
        if ch.isalpha() and ch.isascii() and rng.random() < style.typo_rate:
            self._mistype(rng.choice([key for key in TYPO_KEYS if key != ch.lower()]))
        elif ch in OPENERS and rng.random() < style.typo_rate:
            self._mistype(rng.choice([o for o in OPENERS if o != ch]))
        edit = self.press(lambda: b.type(ch))
        if ch in CLOSERS and edit.op == "change":
            extra = self._extra(tail)
            rest = extra.lstrip(" \t\r\n")
            if rest.startswith(ch):  # the editor's copy of this closer, now doubled further on
                self.wait(rng.uniform(0.2, 0.6))
                self.press(lambda: b.delete_forward(len(extra) - len(rest) + 1))
        return k + 1

    def _mistype(self, wrong: str) -> None:
        self.press(lambda: self.buffer.type(wrong))
        self.wait(self.rng.uniform(0.15, 0.5))  # noticing it
        self.press(self.buffer.backspace)


def _closing_run(extra: str, target: str, k: int) -> int:
    """How much of `extra` the file has next, up to its last closer: where the person's move lands (0: none)."""
    same = 0
    for a, b in zip(extra, target[k:]):
        if a != b:
            break
        same += 1
    while same and extra[same - 1] not in CLOSERS:
        same -= 1
    return same


def line_end(text: str, eol: str, line: int) -> int:
    """The offset where line `line` of `text` ends (its break's start)."""
    at = 0
    for _ in range(line):
        at = text.index(eol, at) + len(eol)
    found = text.find(eol, at)
    return len(text) if found < 0 else found


def file_events(raw: str, uri: str, language: str, spans: Sequence[Span], rng: random.Random, style: TypingStyle,
                t0: float = 0.0) -> tuple[list[dict[str, Any]], float]:
    """Events that open `raw` without `spans` in VS Code and retype them in document order; (events, end time).

    Span lines count the file's lines with any line break (\\n, \\r\\n, \\r) as one, as the plain
    typist's universal-newline reading does.
    """
    eol = majority_eol(raw)
    text = with_eol(raw, "\n")
    lines = text.split("\n")
    removed = {i for s in spans for i in range(s.start, s.end + 1)}
    opened = "\n".join(line for i, line in enumerate(lines) if i not in removed)
    buffer = Buffer(with_eol(opened, eol), eol=eol, unit=indent_unit(text))
    typist = EditorTypist(buffer, uri, rng, style, t0)
    events: list[dict[str, Any]] = [{"t": round(t0, 3), "op": "open", "uri": uri, "language": language,
                                     "text": buffer.text}]
    for s in sorted(spans, key=lambda s: s.start):
        # spans above are retyped already and those below do not move this line
        target = "".join(eol + line for line in lines[s.start:s.end + 1])
        typist.type_span(line_end(buffer.text, eol, s.start - 1), target)
    if buffer.text != with_eol(raw, eol):
        raise RuntimeError(f"{uri}: the editor typist's document is not the file")
    events.extend(typist.events)
    typist.wait(1.0)
    events.append({"t": round(typist.t, 3), "op": "close", "uri": uri})
    return events, typist.t

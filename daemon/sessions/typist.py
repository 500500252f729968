"""Sessions typed from real files: remove a few spans, then retype them as a person would.

`typed_session(files, seed=...)` picks spans in each file (function bodies, blocks,
single lines: from `ast` when the file is Python that parses, else from indentation),
opens the document without them, and retypes each one keystroke by keystroke at a
human rate: jittered intervals, pauses at line ends and before each span, an
occasional typo fixed with backspace, and newline-plus-indent typed as one change as
an editor's auto-indent would. The same files and seed give the same session.
That is the plain buffer; `editor="vscode"` types the same spans through VS Code's
auto-closing pairs, overtype and Enter between brackets (vscode_typist.py).
"""
from __future__ import annotations

import ast
import random
from pathlib import Path
from typing import Any, Iterable, Sequence

from tabd.daemon.sessions.format import make_range, utf16_len
from tabd.daemon.sessions.keyboard import TYPO_KEYS, Span, TypingStyle  # also read from here by the session commands
from tabd.daemon.sessions.vscode_typist import file_events as vscode_file_events

LANGUAGES = {".py": "python", ".pyi": "python", ".js": "javascript", ".ts": "typescript", ".lua": "lua",
             ".rs": "rust", ".go": "go", ".c": "c", ".h": "c", ".java": "java", ".sh": "shellscript"}


def language_of(path: str) -> str:
    return LANGUAGES.get(Path(path).suffix.lower(), "plaintext")


# ---------------------------------------------------------------- choosing spans


def _python_spans(source: str) -> list[Span] | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    spans: list[Span] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                body = body[1:]  # keep the docstring: it is the context a person writes against
            spans.append(Span(body[0].lineno - 1, node.end_lineno - 1, "body"))
        elif isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)):
            spans.append(Span(node.body[0].lineno - 1, node.body[-1].end_lineno - 1, "block"))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Expr, ast.Raise,
                               ast.Import, ast.ImportFrom, ast.Assert)):
            if node.lineno == node.end_lineno:
                spans.append(Span(node.lineno - 1, node.lineno - 1, "line"))
    return spans


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _heuristic_spans(lines: Sequence[str]) -> list[Span]:
    spans: list[Span] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        spans.append(Span(i, i, "line"))
        head = line.rstrip()
        if head.endswith((":", "{", "(", "[")) and i + 1 < len(lines):
            j, last = i + 1, None
            while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > _indent(line)):
                if lines[j].strip():
                    last = j
                j += 1
            if last is not None:
                spans.append(Span(i + 1, last, "block"))
    return spans


def candidate_spans(source: str, path: str = "", max_chars: int = 400, max_lines: int = 15) -> list[Span]:
    """Spans worth retyping, sorted; Python files use `ast`, others indentation."""
    lines = source.split("\n")
    spans = _python_spans(source) if language_of(path) == "python" or not path else None
    if spans is None:
        spans = _heuristic_spans(lines)
    good = set()
    for s in spans:
        if s.start < 1 or s.end >= len(lines) or s.end - s.start + 1 > max_lines:
            continue
        text = "\n".join(lines[s.start:s.end + 1])
        if not text.strip() or len(text) > max_chars:
            continue
        good.add(s)
    return sorted(good, key=lambda s: (s.start, s.end, s.kind))


def choose_spans(candidates: Sequence[Span], count: int, rng: random.Random) -> list[Span]:
    """Up to `count` spans that do not touch each other, mixing kinds, in document order."""
    by_kind: dict[str, list[Span]] = {}
    for s in candidates:
        by_kind.setdefault(s.kind, []).append(s)
    kinds = sorted(by_kind)
    for k in kinds:
        rng.shuffle(by_kind[k])
    rng.shuffle(kinds)
    order: list[Span] = []
    while any(by_kind.values()):
        for k in kinds:
            if by_kind[k]:
                order.append(by_kind[k].pop())
    chosen: list[Span] = []
    for s in order:
        if len(chosen) >= count:
            break
        # the anchor line (start-1) of each span must stay in the document
        if all(s.end < c.start - 1 or c.end < s.start - 1 for c in chosen):
            chosen.append(s)
    return sorted(chosen, key=lambda s: s.start)


# ---------------------------------------------------------------- typing


class _Typist:
    def __init__(self, uri: str, rng: random.Random, style: TypingStyle, t: float) -> None:
        self.uri, self.rng, self.style, self.t = uri, rng, style, t
        self.events: list[dict[str, Any]] = []
        self.line = 0
        self.character = 0

    def _interval(self) -> float:
        return (1.0 / self.style.cps) * self.rng.lognormvariate(0.0, self.style.jitter)

    def wait(self, seconds: float) -> None:
        self.t += seconds

    def _emit(self, start: dict[str, int], end: dict[str, int], text: str) -> None:
        self.events.append({"t": round(self.t, 3), "op": "change", "uri": self.uri,
                            "range": make_range(start, end), "text": text})

    def insert(self, text: str) -> None:
        self.wait(self._interval())
        here = {"line": self.line, "character": self.character}
        self._emit(here, here, text)
        if "\n" in text:
            self.line += text.count("\n")
            self.character = utf16_len(text[text.rfind("\n") + 1:])
        else:
            self.character += utf16_len(text)

    def backspace(self, ch: str) -> None:
        self.wait(self._interval())
        width = utf16_len(ch)
        start = {"line": self.line, "character": self.character - width}
        self._emit(start, {"line": self.line, "character": self.character}, "")
        self.character -= width

    def type_chars(self, text: str) -> None:
        for ch in text:
            if self.rng.random() < self.style.think_rate:
                self.wait(self.rng.uniform(*self.style.think_pause))
            if ch.isalpha() and ch.isascii() and self.rng.random() < self.style.typo_rate:
                wrong = self.rng.choice([k for k in TYPO_KEYS if k != ch.lower()])
                self.insert(wrong)
                self.wait(self.rng.uniform(0.15, 0.5))  # noticing it
                self.backspace(wrong)
            self.insert(ch)

    def move_to(self, line: int, character: int, hunk: int) -> None:
        """The cursor put elsewhere (a click, a jump): a move event that starts the `hunk`-th edit."""
        self.line, self.character = line, character
        self.events.append({"t": round(self.t, 3), "op": "move", "uri": self.uri,
                            "position": {"line": line, "character": character}, "hunk": hunk})

    def delete(self, end_line: int, end_character: int) -> None:
        """The text from the cursor to (end_line, end_character) selected and deleted: one change."""
        self._emit({"line": self.line, "character": self.character}, {"line": end_line, "character": end_character}, "")

    def type_text(self, text: str) -> None:
        """Type `text` at the cursor: its characters, and each line break as Enter with the editor's auto-indent."""
        first, *rest = text.split("\n")
        self.type_chars(first)
        for line in rest:
            self.wait(self.rng.uniform(*self.style.line_pause))
            stripped = line.lstrip(" \t")
            self.insert("\n" + line[: len(line) - len(stripped)])
            self.type_chars(stripped)

    def type_span(self, anchor_line: int, anchor_character: int, lines: Sequence[str]) -> None:
        self.line, self.character = anchor_line, anchor_character
        self.wait(self.rng.uniform(*self.style.span_pause))
        for line in lines:
            stripped = line.lstrip(" \t")
            indent = line[: len(line) - len(stripped)]
            self.insert("\n" + indent)  # Enter, with the editor's auto-indent
            self.type_chars(stripped.rstrip("\r"))
            self.wait(self.rng.uniform(*self.style.line_pause))


Typist = _Typist  # the plain-buffer typist, for the sessions that type other things (diff_typist.py)


def file_events(text: str, uri: str, language: str, spans: Sequence[Span], rng: random.Random,
                style: TypingStyle, t0: float = 0.0) -> tuple[list[dict[str, Any]], float]:
    """Events that open `text` without `spans` and retype them in document order; returns (events, end time)."""
    lines = text.split("\n")
    removed = {i for s in spans for i in range(s.start, s.end + 1)}
    opened = "\n".join(line for i, line in enumerate(lines) if i not in removed)
    typist = _Typist(uri, rng, style, t0)
    events: list[dict[str, Any]] = [{"t": round(t0, 3), "op": "open", "uri": uri, "language": language, "text": opened}]
    for s in sorted(spans, key=lambda s: s.start):
        # spans above are retyped already and those below do not move this line
        anchor = s.start - 1
        typist.type_span(anchor, utf16_len(lines[anchor]), lines[s.start:s.end + 1])
    events.extend(typist.events)
    typist.wait(1.0)
    events.append({"t": round(typist.t, 3), "op": "close", "uri": uri})
    return events, typist.t


def writing_events(text: str, uri: str, language: str, start: int, end: int, rng: random.Random,
                   style: TypingStyle, t0: float = 0.0) -> tuple[list[dict[str, Any]], float]:
    """Events that open the first `start` lines of `text` and write lines [start, end] after them: new code,
    nothing after the cursor (a file being written, not one being edited); returns (events, end time)."""
    lines = text.split("\n")
    if not 0 < start <= end < len(lines):
        raise ValueError(f"lines {start}..{end} of a {len(lines)}-line text: need 0 < start <= end < lines")
    typist = _Typist(uri, rng, style, t0)
    events: list[dict[str, Any]] = [{"t": round(t0, 3), "op": "open", "uri": uri, "language": language,
                                     "text": "\n".join(lines[:start])}]
    typist.type_span(start - 1, utf16_len(lines[start - 1]), lines[start:end + 1])
    events.extend(typist.events)
    typist.wait(1.0)
    events.append({"t": round(typist.t, 3), "op": "close", "uri": uri})
    return events, typist.t


EDITORS = ("plain", "vscode")


def typed_session(files: Iterable[str], seed: int = 0, cps: float = 8.0, spans: int = 3,
                  max_chars: int = 400, style: TypingStyle | None = None,
                  editor: str = "plain") -> tuple[str, list[dict[str, Any]]]:
    """(language, events) of a session that retypes `spans` spans of each file, deterministic for `seed`.

    `editor`: "plain" types every character into a plain buffer; "vscode" types through VS Code's
    default auto-closing, overtype and Enter rules (vscode_typist.py). Both pick the same spans.
    """
    if editor not in EDITORS:
        raise ValueError(f"unknown editor {editor!r}: use {' or '.join(EDITORS)}")
    style = style or TypingStyle(cps=cps)
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    languages: list[str] = []
    t = 0.0
    for name in files:
        path = Path(name)
        text = path.read_text(encoding="utf-8").replace("\r\n", "\n")
        language = language_of(str(path))
        languages.append(language)
        chosen = choose_spans(candidate_spans(text, str(path), max_chars=max_chars), spans, rng)
        uri = path.resolve().as_uri()
        if editor == "vscode":
            raw = path.read_bytes().decode("utf-8")  # the file's own line breaks: VS Code keeps CRLF
            at_vscode = random.Random()
            at_vscode.setstate(rng.getstate())
            file_evts, t_end = vscode_file_events(raw, uri, language, chosen, at_vscode, style, t)
            # the plain typist's draws move the shared generator on, so the next file's spans are plain's too
            file_events(text, uri, language, chosen, rng, style, t)
            t = t_end
        else:
            file_evts, t = file_events(text, uri, language, chosen, rng, style, t)
        events.extend(file_evts)
        t += 0.5
    return (languages[0] if languages else "plaintext"), events

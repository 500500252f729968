"""Stop rules and clean-up of raw model text into a suggestion. Pure string functions."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

Marks = tuple[tuple[int, float], ...]  # a suggestion's confidence: (its length so far, the token's probability)

OPENERS = {"(": ")", "[": "]", "{": "}"}
CLOSERS = {v: k for k, v in OPENERS.items()}


def wants_multiline(line_before: str, line_after: str, previous_line: str, openers: tuple[str, ...] = (":",)) -> bool:
    """Multi-line when the cursor sits on an empty line inside a block: indented, or after a line that opens one
    (`openers`: the language's, `:` in Python, `{` in brace languages)."""
    if line_before.strip() or line_after.strip():
        return False
    return previous_line.rstrip().endswith(openers) or bool(line_before) or previous_line.startswith((" ", "\t"))


def repeats(text: str, min_repeats: int = 4, min_span: int = 16) -> int:
    """The period of a loop at the end of text (a chunk repeated min_repeats times), or 0.

    A small model sometimes repeats itself until the token budget runs out;
    this ends the decode early and cuts the loop from the suggestion.
    """
    for period in range(2, 25):
        span = period * min_repeats
        if span > len(text) or span < min_span:
            continue
        chunk = text[-period:]
        if len(set(chunk)) > 1 and chunk.strip() and text.endswith(chunk * min_repeats):
            return period
    return 0


def cut_repeats(text: str) -> str:
    period = repeats(text)
    if not period:
        return text
    chunk = text[-period:]
    while text.endswith(chunk * 2):
        text = text[:-period]  # keep one copy of the repeated chunk
    return text


def line_done(text: str) -> bool:
    """Single-line mode: the text has content and then a newline.

    Leading newlines are kept, so at the end of a line the suggestion is the
    next line (with its indentation) — what a Tab, Tab, Tab flow needs.
    """
    stripped = text.lstrip("\r\n")
    return bool(stripped.strip()) and "\n" in stripped


def block_done(text: str, indent: str, max_lines: int) -> bool:
    """Multi-line mode: a blank line, a line dedented below the block, or too many lines."""
    lines = text.split("\n")
    if len(lines) > max_lines + 1:
        return True
    for line in lines[1:-1]:
        if not line.strip():
            return True
        if len(line) - len(line.lstrip()) < len(indent):
            return True
    return False


def cut_single_line(text: str) -> str:
    lead = len(text) - len(text.lstrip("\r\n"))
    body = text[lead:]
    newline = body.find("\n")
    if newline != -1:
        body = body[:newline]
    return text[:lead] + body


def cut_block(text: str, indent: str, max_lines: int) -> str:
    lines = text.split("\n")
    kept = [lines[0]]
    for line in lines[1 : max_lines]:
        if not line.strip() or len(line) - len(line.lstrip()) < len(indent):
            break
        kept.append(line)
    return "\n".join(kept)


def balance(text: str, line_before: str) -> str:
    """Cut the suggestion before a closer that nothing on the line (or in it) opened."""
    depth: list[str] = []
    for ch in line_before:
        if ch in OPENERS:
            depth.append(ch)
        elif ch in CLOSERS and depth and depth[-1] == CLOSERS[ch]:
            depth.pop()
    for i, ch in enumerate(text):
        if ch in OPENERS:
            depth.append(ch)
        elif ch in CLOSERS:
            if not depth or depth[-1] != CLOSERS[ch]:
                return text[:i]
            depth.pop()
    return text


def drop_suffix_overlap(text: str, line_after: str) -> str:
    """Stop where the suggestion would repeat what already follows the cursor on this line."""
    rest = line_after.strip()
    if not rest:
        return text
    if text.rstrip().endswith(rest):
        return text.rstrip()[: len(text.rstrip()) - len(rest)]
    at = text.find(rest)
    return text[:at] if at > 0 else text


@dataclass(frozen=True)
class CursorLine:
    """The cursor's line, split at the cursor; its indentation shapes a multi-line suggestion."""

    before: str
    after: str

    @classmethod
    def of(cls, prefix: str, suffix: str) -> "CursorLine":
        return cls(prefix.rsplit("\n", 1)[-1], suffix.split("\n", 1)[0].rstrip("\r"))

    @property
    def indent(self) -> str:
        return self.before[: len(self.before) - len(self.before.lstrip())]


def whole(text: str, line: CursorLine, multiline: bool, max_lines: int) -> bool:
    """The stop rule while decoding: the suggestion has all it will show."""
    return block_done(text, line.indent, max_lines) if multiline else line_done(text)


def finish(text: str, line: CursorLine, multiline: bool, max_lines: int) -> str:
    """The suggestion to show: trimmed, cut by the stop rules, never whitespace only."""
    text = cut_block(text, line.indent, max_lines) if multiline else cut_single_line(text)
    text = cut_repeats(text)
    if line.after.strip():
        text = drop_suffix_overlap(text, line.after)
        text = balance(text, line.before)
    text = "\n".join(row.rstrip() for row in text.split("\n"))
    if not text.strip():
        return ""
    return text


def gate(text: str, confidence: Sequence[tuple[int, float]], min_confidence: float) -> str:
    """The part of a suggestion the model is sure of as a whole: the longest start whose joint probability
    (the product of its tokens' probabilities) is at least min_confidence.

    A Tab takes the whole of what is shown, so what matters is how likely all of it
    is right, not each token alone: ten tokens at 0.6 each are right together
    less than one time in a hundred. `confidence` holds (end of the text after a
    token, that token's probability) in decode order. Without it (an engine that
    gives no probabilities) or with a threshold of 0, the whole text is shown.
    An empty result means: show nothing.
    """
    if min_confidence <= 0 or not confidence:
        return text
    keep, joint = 0, 1.0
    for end, p in confidence:
        joint *= p
        if joint < min_confidence:
            break
        keep = max(keep, end)
    shown = "\n".join(row.rstrip() for row in text[:keep].split("\n"))
    return shown if shown.strip() else ""


WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def word_start(prefix: str) -> int:
    """Where the word the prefix ends in (letters, digits, `_`) starts; len(prefix) when it ends in none."""
    n = len(prefix)
    while n and prefix[n - 1] in WORD_CHARS:
        n -= 1
    return n


def completed_name(prefix: str, text: str, line_after: str = "") -> tuple[str, int] | None:
    """(the name, characters of `text` that complete it) when `text` finishes the word the cursor is in.

    The word is the identifier the prefix ends in (at least one character,
    starting with a letter or `_`); `text` must carry it on and end it (a
    non-word character follows, or `text` ends there), and nothing of a word
    may follow the cursor. None otherwise.
    """
    partial = prefix[word_start(prefix):]
    if not partial or partial[0].isdigit() or (line_after[:1] and line_after[0] in WORD_CHARS):
        return None
    k = 0
    while k < len(text) and text[k] in WORD_CHARS:
        k += 1
    if k == 0:
        return None
    return partial + text[:k], k


def floor_at(confidence: Sequence[tuple[int, float]], end: int, p: float = 1.0) -> tuple[tuple[int, float], ...]:
    """`confidence` with the joint probability of text[:end] raised to at least `p`, and a mark at `end` itself,
    so a gate at or under `p` shows at least text[:end]; the tokens after it are judged as before, from there."""
    head = [(e, q) for e, q in confidence if e <= end]
    joint = 1.0
    for _, q in head:
        joint *= q
    if head and head[-1][0] == end and joint >= p:
        return tuple(confidence)  # the model is surer than the floor
    lifted = [(e, 1.0) for e, _ in head]
    if not lifted or lifted[-1][0] != end:
        lifted.append((end, 1.0))
    lifted[0] = (lifted[0][0], max(p, joint))  # the whole floor on the first token: the joint is p from there to `end`
    return tuple(lifted) + tuple((e, q) for e, q in confidence if e > end)

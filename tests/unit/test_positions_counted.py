"""Positions counted in C (lsp/positions.py index_in_line): the same index as a step per character, for every
encoding, clamped and strict, with astral characters, lone surrogates and positions inside a character (#41)."""
from __future__ import annotations

import random

from tabd.lsp import positions as P
from tabd.lsp.documents import Document

ALPHABET = ["a", "é", "€", "😀", "\u2028", "中", "\U0010ffff", "\x7f", "\x80", "\ud83d", "\ude00"]


def stepped(line: str, character: int, encoding: str, strict: bool):
    """The reference: one character at a time, as index_in_line was."""
    used = 0
    for i, ch in enumerate(line):
        if used >= character:
            return i
        step = P.units(ch, encoding)
        if used + step > character:
            if strict:
                return "error"
            return i
        used += step
    if strict and used < character:
        return "error"
    return len(line)


def test_counted_index_equals_the_stepped_one():
    rng = random.Random(41)
    for _ in range(20000):
        line = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 9)))
        encoding = rng.choice(P.ENCODINGS)
        character = rng.randint(0, 30)
        for strict in (False, True):
            try:
                got = P.index_in_line(line, character, encoding, strict)
            except ValueError:
                got = "error"
            assert got == stepped(line, character, encoding, strict), (line, encoding, character, strict)


def test_a_position_far_into_a_long_non_ascii_line_round_trips():
    line = "é中😀" * 100_000  # 400,000 UTF-16 units: a Python step per unit took about a second per request
    doc = Document.new("file:///w/long.txt", "x\n" + line + "\n", 1)
    for encoding, character in (("utf-16", 399_996), ("utf-8", 899_991), ("utf-32", 299_997)):
        offset = doc.offset_at(1, character, encoding)
        assert doc.position_at(offset, encoding) == (1, character)
        assert offset == 2 + 299_997
    assert doc.offset_at(1, 399_999, "utf-16") == 2 + 299_999  # inside the last 😀: its start

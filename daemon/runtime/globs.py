"""Globs matched in time linear in the path: a bit-parallel automaton, with no backtracking whatever the glob.

Content exclusion (runtime/exclusion.py) asks every opened document's path against the user's globs. The globs
were regular expressions matched with `fullmatch`, and a backtracking engine takes exponential time on a glob
such as `*a*a*a*a*a*a*ab` or `**/**/**/…*a` (one took over 10 s per document, on the event loop). Here a glob is
a sequence of positions, each consuming one character, and every position the glob could be at is one bit of an
int: a character moves all of them at once with a few integer operations (Shift-And, extended to the optional,
repeated and grouped positions globs need: Navarro and Raffinot, "Flexible Pattern Matching in Strings", 4.3).
A match costs a fixed number of operations per character of the path, whatever the glob says.

The language is today's, unchanged: `*` any run within a path part, `?` one character of a part, `**/` any number
of folders (none included), `**` elsewhere any run across parts, `[abc]`, `[!abc]` (never `/`), `{a,b}` (nested),
`\\` escapes; case is ignored. Bounds keep the automaton small: a glob of at most MAX_GLOB_CHARS characters, braces
nested at most MAX_BRACE_DEPTH deep and expanding to at most MAX_ALTERNATIVES alternatives; past them the glob is
a GlobError (reported and left out), like one that does not parse.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Iterable, Union

MAX_GLOB_CHARS = 1024
MAX_BRACE_DEPTH = 8
MAX_ALTERNATIVES = 64
MAX_CLASSES = 32  # distinct [...] sets in one automaton: each costs a test per new character seen
MAX_POSITIONS = 4096  # positions in one automaton (every glob's alternatives together): the width of its ints
CHAR_MASKS_KEPT = 4096  # characters whose masks an automaton remembers; past that it starts again

LIT, ONE, CLASS, STAR, DSTAR, GSTAR = range(6)  # a literal, ?, [...], *, ** (any run), **/ (folders, or none)


class GlobError(ValueError):
    """A glob that does not parse or is past the bounds; the message says where."""


@dataclass(frozen=True)
class Token:
    kind: int
    text: str = ""  # LIT: the (lower-case) character; CLASS: the class as a regular expression


@dataclass
class Alt:
    """{a,b,...}: its alternatives, each a sequence."""

    options: list[list["Item"]] = field(default_factory=list)


Item = Union[Token, Alt]


def parse_glob(glob: str) -> list[list[Token]]:
    """The alternatives a glob matches (braces expanded), each a list of tokens; GlobError when it does not parse
    or is past the bounds."""
    if not glob:
        raise GlobError("an empty glob")
    if len(glob) > MAX_GLOB_CHARS:
        raise GlobError(f"{glob[:40]!r}...: longer than {MAX_GLOB_CHARS} characters")
    return [_collapsed(tokens) for tokens in _expanded(_items(glob), glob)]


def _collapsed(tokens: list[Token]) -> list[Token]:
    """Runs of stars as the fewest that match the same: **/**/ is **/, ** next to any star is **, * * is *
    (`**/` twenty times is one position, not twenty)."""
    out: list[Token] = []
    for token in tokens:
        last = out[-1].kind if out else None
        if token.kind in (STAR, DSTAR, GSTAR) and last in (STAR, DSTAR, GSTAR):
            if last == DSTAR or token.kind == last:
                continue  # absorbed
            if token.kind == DSTAR:
                while out and out[-1].kind in (STAR, DSTAR, GSTAR):
                    out.pop()  # ** absorbs the stars before it
        out.append(token)
    return out


def _items(glob: str) -> list[Item]:
    """The glob as a sequence of tokens and brace groups (a loop with a stack: no recursion on nesting)."""
    top: list[Item] = []
    stack: list[tuple[Alt, list[Item]]] = []  # open braces: the group, and the sequence it interrupted
    seq = top
    i, n = 0, len(glob)
    while i < n:
        ch = glob[i]
        if ch == "*":
            if glob.startswith("**", i):
                i += 2
                if glob.startswith("/", i):  # **/ is any number of folders, none included
                    seq.append(Token(GSTAR))
                    i += 1
                else:
                    seq.append(Token(DSTAR))
                continue
            seq.append(Token(STAR))
        elif ch == "?":
            seq.append(Token(ONE))
        elif ch == "[":
            end = glob.find("]", i + 2 if glob.startswith(("[!", "[^"), i) else i + 1)
            if end == -1:
                raise GlobError(f"{_short(glob)}: '[' at {i} is never closed")
            seq.append(_class(glob, i, glob[i + 1:end]))
            i = end
        elif ch == "{":
            if len(stack) >= MAX_BRACE_DEPTH:
                raise GlobError(f"{_short(glob)}: braces nested deeper than {MAX_BRACE_DEPTH}")
            group = Alt()
            stack.append((group, seq))
            seq = []
        elif ch == "}":
            if not stack:
                raise GlobError(f"{_short(glob)}: '}}' at {i} closes nothing")
            group, outer = stack.pop()
            group.options.append(seq)
            outer.append(group)
            seq = outer
        elif ch == "," and stack:
            stack[-1][0].options.append(seq)
            seq = []
        elif ch == "\\":
            if i + 1 == n:
                raise GlobError(f"{_short(glob)}: ends with a lone backslash")
            i += 1
            seq.extend(Token(LIT, c) for c in glob[i].lower())
        else:
            seq.extend(Token(LIT, c) for c in ch.lower())
        i += 1
    if stack:
        raise GlobError(f"{_short(glob)}: a '{{' is never closed")
    return top


def _class(glob: str, at: int, body: str) -> Token:
    negate = body[:1] in ("!", "^")
    body = body[1:] if negate else body
    if not body:
        raise GlobError(f"{_short(glob)}: an empty [] at {at}")
    regex = ("[^/" if negate else "[") + body.replace("\\", "\\\\").replace("[", "\\[") + "]"
    try:
        with warnings.catch_warnings():  # "possible set difference" and the like: the class means what it says
            warnings.simplefilter("ignore")
            re.compile(regex, re.IGNORECASE | re.DOTALL)
    except (re.error, OverflowError, RecursionError) as exc:
        raise GlobError(f"{_short(glob)}: the class at {at} does not parse ({exc})") from None
    return Token(CLASS, regex)


def _expanded(seq: list[Item], glob: str) -> list[list[Token]]:
    """Every token sequence a sequence of items stands for (brace depth is bounded, so is this recursion)."""
    out: list[list[Token]] = [[]]
    for item in seq:
        if isinstance(item, Token):
            for tokens in out:
                tokens.append(item)
            continue
        options = [tokens for option in item.options for tokens in _expanded(option, glob)]
        if len(out) * len(options) > MAX_ALTERNATIVES:
            raise GlobError(f"{_short(glob)}: its braces make more than {MAX_ALTERNATIVES} alternatives")
        out = [head + tail for head in out for tail in options]
    return out


def _short(glob: str) -> str:
    return repr(glob) if len(glob) <= 80 else repr(glob[:60]) + "..."


class Automaton:
    """Several globs' alternatives side by side in one set of bit masks; `run` says which globs match a text.

    Bit layout: each alternative has a start bit (it consumes nothing, so nothing shifts into it: it also keeps
    alternatives apart) followed by one bit per token. After a character, a set bit means the glob can be just past
    that token. Tokens that may match nothing (*, **, **/) are optional: a run of them is skipped by one subtraction
    (the carry runs from the bit before the run to the first set bit in it). **/ is the one position whose exit
    depends on what it consumed: it may be left only when it ended on '/' (or consumed nothing).
    """

    def __init__(self, globs: Iterable[list[list[Token]]]) -> None:
        self.lit: dict[str, int] = {}
        self.non_slash = 0  # positions that take any character but /
        self.any = 0  # positions that take any character
        self.classes: dict[str, int] = {}  # class regex -> positions
        self.optional = self.repeat = self.folders = 0  # *, **, **/ ; the same ; **/ alone
        self.starts = 0
        self.finals: list[int] = []  # per glob: the last bits of its alternatives
        bit = 0
        kinds: list[int] = []
        for alternatives in globs:
            final = 0
            for tokens in alternatives:
                self.starts |= 1 << bit
                kinds.append(-1)
                bit += 1
                for token in tokens:
                    self._add(token, 1 << bit)
                    kinds.append(token.kind)
                    bit += 1
                final |= 1 << (bit - 1)
            self.finals.append(final)
        self.width = bit
        self.entries, self.ends = _runs(kinds)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._compiled = {regex: re.compile(regex, re.IGNORECASE | re.DOTALL) for regex in self.classes}
            # one test says whether a character is in any class at all: most characters of a path are in none
            self._any_class = re.compile("|".join(self.classes), re.IGNORECASE | re.DOTALL) if self.classes else None
        self._masks: dict[str, int] = {}
        self.begin = self._skip(self.starts, self.starts)

    def _add(self, token: Token, bit: int) -> None:
        kind = token.kind
        if kind == LIT:
            self.lit[token.text] = self.lit.get(token.text, 0) | bit
        elif kind == ONE:
            self.non_slash |= bit
        elif kind == CLASS:
            self.classes[token.text] = self.classes.get(token.text, 0) | bit
        else:
            self.optional |= bit
            self.repeat |= bit
            if kind == STAR:
                self.non_slash |= bit
            else:
                self.any |= bit
                if kind == GSTAR:
                    self.folders |= bit

    def mask(self, ch: str) -> int:
        """The positions that take the character `ch` (lower-case)."""
        found = self._masks.get(ch)
        if found is None:
            found = self.lit.get(ch, 0) | self.any | (self.non_slash if ch != "/" else 0)
            if self._any_class is not None and self._any_class.match(ch):
                for regex, bits in self.classes.items():
                    if self._compiled[regex].match(ch):
                        found |= bits
            if len(self._masks) >= CHAR_MASKS_KEPT:
                self._masks.clear()
            self._masks[ch] = found
        return found

    def _skip(self, exits: int, consumed: int) -> int:
        """The states after `consumed`, where the optional runs are skipped from the bits that may leave (`exits`)."""
        with_ends = exits | self.ends
        return consumed | exits | (self.optional & ~((with_ends - self.entries) ^ with_ends))

    def run(self, text: str, restart_at: int = -1) -> list[int]:
        """Per glob, its final bits reached by the whole (lower-case) text; also from `restart_at` on (the same
        globs on a suffix, in the same pass)."""
        exits = self.begin  # the states that may move on (a **/ that just consumed anything but / may not)
        state = self.begin  # every state we are in
        if 0 <= restart_at:
            exits, state = self._steps(text[:restart_at], exits, state)
            exits = self._skip(exits | self.starts, 0)
            state |= exits
            text = text[restart_at:]
        exits, _ = self._steps(text, exits, state)
        return [exits & final for final in self.finals]

    def _steps(self, text: str, exits: int, state: int) -> tuple[int, int]:
        """(exits, state) after the characters of `text`: the hot loop, a dozen integer operations a character."""
        get, mask = self._masks.get, self.mask
        repeat, stay, optional, entries, ends = self.repeat, ~self.folders, self.optional, self.entries, self.ends
        last, settled = -1, False  # the previous character's mask, and whether it left the states as they were
        for ch in text:
            bits = get(ch) or mask(ch)
            if settled and bits == last and ch != "/":
                continue  # the same step from the same states: the same states (a run of * over like characters)
            took = ((exits << 1) | (state & repeat)) & bits
            if not took:
                return 0, 0
            leaving = took if ch == "/" else took & stay
            with_ends = leaving | ends
            now = leaving | (optional & ~((with_ends - entries) ^ with_ends))
            settled = now == exits and (took | now) == state
            exits, state, last = now, took | now, bits if ch != "/" else -1  # a / step leaves by its own rule
        return exits, state

    def run_parts(self, text: str) -> list[int]:
        """Per glob, its final bits reached by any one /-separated part of the (lower-case) text."""
        reached = 0
        for part in text.split("/"):
            if part:
                exits, _ = self._steps(part, self.begin, self.begin)
                reached |= exits
        return [reached & final for final in self.finals]


def _runs(kinds: list[int]) -> tuple[int, int]:
    """(the bit before each run of optional positions, the last bit of each run)."""
    entries = ends = 0
    i = 0
    while i < len(kinds):
        if kinds[i] in (STAR, DSTAR, GSTAR):
            j = i
            while j + 1 < len(kinds) and kinds[j + 1] in (STAR, DSTAR, GSTAR):
                j += 1
            entries |= 1 << (i - 1)  # a start bit at least precedes every run
            ends |= 1 << j
            i = j + 1
        else:
            i += 1
    return entries, ends

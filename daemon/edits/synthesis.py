"""Edit synthesis: the user's last edit learned as a transformation, and the places where it applies again.

After Blue-Pencil (Miltner et al., OOPSLA 2019; Visual Studio IntelliCode's repeated edits): the edit is read as
tokens (tokens.py), as
- a core: the tokens it replaced (empty for an insertion), and what replaced them (text, with holes for the names
  that differ from place to place);
- a context: up to CONTEXT tokens on each side on its line, nearest first, with "^" and "$" for the line's ends;
- where it stood: code, a string or a comment.
A place applies when its tokens equal the core (a hole takes any name) and its context matches well enough. Each
context token that matches counts 1, a different name where a name stood counts 1/2 (the name that varies from
site to site, `def f(x)` and `def g(x)`), and the first other token ends that side. The gate:
- a whole-name rename (`count` -> `total`) applies at every whole `count`, whatever surrounds it, but never after a
  `.` unless the example was an attribute of the same object (`self.count`);
- any other core needs a context token that matches right beside it, and a share of the context matched: SPECIFIC
  when its old tokens hold a word (the core itself picks the places), GENERIC for marks, keywords or an insertion;
- never half a name (tokens, not characters), never in a string or comment unless the example was there, never where
  the new text already stands.
A dotted name shortened (`node.default_value` -> `default_value`, `key.value` -> `key`; paths.py) is read on the
whole old path, not the tokens typed: it applies wherever that path stands as a path of its own (not after a `.`),
as a rename would, within the function where its first name is a variable of its own.
A version or a year changed (`23.3` -> `23.4`, `2025` -> `2026`; versions.py) goes to that number wherever it stands
whole, in code, strings and comments, and as the head of a longer version (`23.3.0`).
A local import deleted once the module's top imports the same (hoists.py) goes from every body that still has it.
Two examples of one change (the user made it twice) generalise it: the context keeps what both share, the core's
names that differ become holes, so `new_func` -> `t.cast("F", new_func)` then `g` -> `t.cast("F", g)` applies to any
name in that context. Two edits on one line, close in time, are read as one (`(f)` -> `(f: "F") -> "F"` typed as two
insertions).
Whole lines inserted (`import math` at the top of each function) are placed by the lines around them (Lines: the
ends of the line above, the start of the line below, indentation, blank lines), not by their own tokens; text typed
at the start of two lines in turn (`>>> `, `# `) goes down its block (column()).

Plain strings and offsets in and out; the caller (edit_service.py) keeps the history and memory.
"""
from __future__ import annotations

import bisect
import builtins
import re
from dataclasses import dataclass, replace
from typing import Sequence

from tabd.daemon.edits import (aliases, brackets, decorators, hoists, imports, joins, paths, reraise, returns,
                               scopes, versions)
from tabd.daemon.edits.history import Group
from tabd.daemon.edits.tokens import Token, is_name, place, shared_ends, tokens_of, tokens_of_lines

_QUOTES = frozenset("'\"`")
_BUILTIN = frozenset(dir(builtins))  # `int` -> `Any` or `Exception` -> `ParseError` at one place is no rename
CONTEXT = 4  # context tokens kept on each side of the core
SPECIFIC = 0.25  # share of the context a place must match when the core holds a word
SPECIFIC_ONCE = 0.4  # ... and the change was made once (on real histories, below this: 2 right of 9 shown)
GENERIC = 0.7  # ... when the core is marks, keywords or nothing (an insertion)
MAX_CORE = 400  # characters: a larger edit is not a repeatable change
MAX_SITES = 200  # places examined for one transformation
HOLE = None
ONCE_SHARE = 0.9  # a change made once whose old core has no word: the share of its context a place must match
ONCE_EXACT = 3  # ... and how many of its context tokens (not the line's ends) exactly
FRAME = 4  # a change made twice that drops the name that differs: fixed tokens in and around its core, at least
TWICE_FIXED = 2  # a change made twice with no word of its own: context tokens both examples share, at least
PROSE_WORD = 3  # letters, at least, of a word replaced in prose that is replaced wherever it stands in prose
SMALL_CHARS = 60  # a change that writes more, or spans lines, is repeated only once the user has made it twice
SMALL_TOKENS = 12
DELETED_TOKENS = 6  # a deletion this long is repeated from one example, whatever its size
REPLACED_TOKENS = 12  # ... and a replacement of this many tokens, whatever it writes
LINE_CONTEXT = 2  # a whole-line insertion: tokens kept from each end of the line above, and from the start of the one below
LINE_ONCE = 1.0  # ... made once: the share of those a place must match (names count 1/2 when another name stands)
LINE_FIXED = 2  # ... made twice: tokens both examples share (not holes), at least


@dataclass(frozen=True)
class Lines:
    """Where a block of whole lines went, as the lines around it say (a line's own tokens say nothing there: the line
    below an `import` added at the top of each function is whatever that function does first; the line above, a
    docstring's end or the `def`, is what each place shares)."""

    head: tuple[str | None, ...]  # the first tokens of the nearest non-blank line above ("^": none, the file's start)
    tail: tuple[str | None, ...]  # its last tokens, last first
    below: tuple[str | None, ...]  # the first tokens of the line the block went above ("$": none, the file's end)
    indent: str  # the indentation of that line
    above_indent: str  # ... and of the line above
    blank: bool  # blank lines stood between the line above and the one below
    top: bool  # the block went right under the line above (else right over the line below)


@dataclass(frozen=True)
class Transformation:
    core: tuple[str | None, ...]  # the old tokens (None: a hole, any name)
    new: tuple[str | int, ...]  # the new text: pieces of text, and core indexes whose token is copied there
    left: tuple[str | None, ...]  # context, nearest first; "^" the line's start
    right: tuple[str | None, ...]  # "$" the line's end
    where: str  # "code", "string" or "comment": where the core stands (its first token, or the insertion's neighbour)
    rename: bool = False  # one whole name for another: every occurrence, context-free
    lead: str = ""  # whitespace the old core began with (a removed `  # comment` takes its spaces)
    trail: str = ""
    gap: int = -1  # an insertion: characters after the left token where it went (-1: right before the right one)
    old_text: str = ""  # the old core as the example had it (for "already applied" and the signature)
    callee: str = ""  # an argument added at the end of a call: the function whose calls take it (context-free)
    places: tuple[str, ...] = ()  # where each core token stands: a place's tokens must stand in the same places
    once: bool = True  # learned from one example (generalised() clears it): the gate is stricter
    worded: bool = False  # its old core holds a word that is not a keyword: the core itself picks the places
    affix: bool = False  # a string's prefix (`u'...'` -> `'...'`): wherever that prefix opens a string, context-free
    prose: bool = False  # one word of a docstring or comment for another (`bits` -> `bytes`): wherever that word
    # stands in prose, context-free (prose around a word differs from sentence to sentence)
    lines: Lines | None = None  # whole lines inserted (`new` is the block): placed by the lines around, not by tokens
    plain: Transformation | None = None  # ... and the same change read as tokens, for when the lines around differ
    over: str = ""  # an insertion typed over the spaces before a token: those spaces (replaced by `new` at each place)
    column: str | None = None  # typed at the start of each line in turn after this indentation (`>>> `, `# `)
    binds: imports.LocalImport | None = None  # whole lines that are a local import (imports.py): placed in each body
    # that uses a name it binds, unbound, made once or twice
    chain: str | None = None  # ` from err` added to a `raise` in a handler (reraise.py): at each unchained one
    named: decorators.Named | None = None  # a decorator line over the functions whose names it names (decorators.py)
    scope: str | None = None  # a rename of a local variable (scopes.py): the function it is proposed in, alone
    module: bool = False  # a rename made outside each function where the name is a variable of its own (scopes.py):
    # the module's name, not proposed in those functions' bodies
    path: bool = False  # a dotted name shortened (`node.default_value` -> `default_value`; paths.py): the core is the
    # whole old path, wherever it stands as a path of its own, as a rename would go
    version: bool = False  # a version or a year changed (`23.3` -> `23.4`; versions.py): the core is the old number,
    # wherever it stands whole, in code, a string or a comment
    hoisted: str | None = None  # a local import deleted once the module's top has it (hoists.py): that statement,
    # deleted wherever it stands indented
    alias: str | None = None  # `: TypeAlias` added after a module-level alias's name (aliases.py): at each unmarked one
    frame: int = 0  # a name dropped in a frame that stays (`super(Foo, self)` -> `super()`): the context tokens
    # nearest the core on the left that a place must have exactly
    join: joins.Join | None = None  # the first edit of a line joined to the one above (joins.py): at each line that
    # ends the same over the same body
    partner: tuple[str, str] | None = None  # an opening bracket changed (typed, replaced; brackets.py): the closer
    # that closes it goes with it
    turn: bool = False  # the other half of a turn (propagation._alternating), proposed next to where the user is: the
    # turn is evidence the context lacks (a `...` line deleted after each ` ...` joined to its signature)

    @property
    def signature(self) -> tuple[object, ...]:
        """What identifies the change whatever its place: a rejected one is not proposed again."""
        return (self.core, self.new, self.where)


    @property
    def small(self) -> bool:
        """Small enough to repeat on one example's word: within a line, a few tokens (a larger change, a line or a
        block added, needs the user to have made it twice)."""
        new = _joined(self.new)
        return ("\n" not in new and "\n" not in self.old_text and len(new) <= SMALL_CHARS
                and len(self.core) <= SMALL_TOKENS)


    @property
    def rewrites_a_stretch(self) -> bool:
        """A deletion of DELETED_TOKENS or more tokens, or a replacement of REPLACED_TOKENS or more: where the same
        tokens stand in the same context, made once is enough (a line deleted, `@pytest.mark.skipif(...)` at each
        test; `central.localize(dt.datetime(2013, 11, 10), is_dst=False)` written as an aware datetime), whatever the
        new text's size: so long a stretch standing the same elsewhere is the same thing there."""
        return len(self.core) >= (DELETED_TOKENS if not self.new else REPLACED_TOKENS)


@dataclass(frozen=True)
class Site:
    start: int  # the range to replace, in the current text
    end: int
    text: str
    score: float  # the share of the context matched (1.0 for a rename)


# ---------------------------------------------------------------- learning


def undone(text: str, groups: Sequence[Group]) -> str:
    """The text as it was before `groups` (each a range of the current text; they do not overlap)."""
    for g in sorted(groups, key=lambda g: g.start, reverse=True):  # the later one first: the others keep their place
        if g.end > len(text):
            return text
        text = text[:g.start] + g.old + text[g.end:]
    return text


def learn(before: str, after: str, filename: str = "", at: tuple[int, int] | None = None) -> Transformation | None:
    """The change from `before` to `after` (one place: what differs between them) as a transformation; None when it
    is empty, only whitespace, or too large to repeat. `at`: where the user made it, [start, end) in `after`: the
    change is learned there, not wherever a diff of the two texts would slide it (propagation.py passes it when the
    slide would cross another edit)."""
    p, s = shared_ends(before, after)
    if at is not None and 0 <= at[0] <= at[1] <= len(after) and len(after) - at[1] <= len(before) - at[0]:
        start, tail = at[0], len(after) - at[1]
        if before[:start] == after[:start] and before[len(before) - tail:] == after[at[1]:]:  # they agree outside
            inner_p, inner_s = shared_ends(before[start:len(before) - tail], after[start:at[1]])
            p, s = start + inner_p, tail + inner_s
    statement = hoists.learned(before, after, p, len(before) - s, len(after) - s, filename)
    if statement is not None:
        return Transformation((statement,), (), (), (), "code", old_text=statement, worded=True, hoisted=statement)
    new_tokens = tokens_of(after, filename)
    block = _block(before, after, p, s, new_tokens, filename)
    if block is not None:
        return replace(block, plain=_learned(before, after, p, s, new_tokens, filename))
    t = _learned(before, after, p, s, new_tokens, filename)
    if t is not None and t.rename and t.core and t.core[0] is not None:
        scope = scopes.local_scope(after, p, (t.core[0], _joined(t.new)), filename)
        module = scope is None and all(_outside(after, p, name, filename) for name in (t.core[0], _joined(t.new)))
        return replace(t, scope=scope, module=module)
    if t is not None:
        shortened = _shortened(before, after, p, s, filename) if t.where == "code" else None
        if shortened is not None:
            return shortened
        number = versions.learned(before, after, p, len(before) - s, len(after) - s)
        if number is not None:
            return Transformation((number[0],), (number[1],), (), (), t.where, old_text=number[0], worded=True,
                                  version=True)
    if t is not None and not t.core and len(before) == p + s:
        chain = reraise.learned(after[p:len(after) - s], before, tokens_of(before, filename), p, filename)
        if chain is not None:
            return replace(t, chain=chain)
        alias = aliases.learned(after[p:len(after) - s], before, p, filename)
        if alias is not None:
            return replace(t, alias=alias)
    return t


def _shortened(before: str, after: str, p: int, s: int, filename: str) -> Transformation | None:
    """The change read as a dotted name shortened (paths.py), as a transformation on the whole old path: proposed
    wherever that path stands, in the function where its first name is a variable of its own when it is one (`node`,
    a parameter: another function's `node` is another object)."""
    found = paths.learned(before, after, p, len(before) - s, len(after) - s)
    if found is None:
        return None
    old, new, at = found
    core = tuple(t.text for t in tokens_of_lines(old, filename) if t.kind != "nl")
    if "".join(core) != old:
        return None
    root = core[0]
    scope = None if root in ("self", "cls") else scopes.local_scope(before, at, (root,), filename)
    return Transformation(core, (new,), (), (), "code", old_text=old, places=("code",) * len(core), worded=True,
                          path=True, scope=scope)


def _learned(before: str, after: str, p: int, s: int, new_tokens: Sequence[Token],
             filename: str) -> Transformation | None:
    """learn() for the change between the shared prefix p and suffix s, read as tokens."""
    old_tokens = _lines_lexed(before, p, len(before) - s, new_tokens, filename)
    a, b_old, b_new = p, len(before) - s, len(after) - s
    # whole tokens: a change inside a word or a string piece takes the whole of it (the part both sides share)
    a = _token_start(old_tokens, new_tokens, a)
    grow = max(_token_end(old_tokens, b_old) - b_old, _token_end(new_tokens, b_new) - b_new)
    grow = min(grow, s)
    b_old, b_new = b_old + grow, b_new + grow
    if b_old - a > MAX_CORE or b_new - a > MAX_CORE or b_old < a or b_new < a:
        return None
    old_core, new_core = before[a:b_old], after[a:b_new]
    core = [t for t in old_tokens if a <= t.start and t.end <= b_old and t.kind != "nl"]
    if not core and not new_core.strip():
        return None
    if not old_core.strip() and not new_core.strip():
        return None  # whitespace only: indentation is the formatter's
    over = ""
    if not core and old_core and "\n" not in old_core:
        # typed over the spaces before a token (`    ...` -> `) -> T: ...`, a line joined to the one above): the
        # whole run of spaces is what it replaced, and is replaced again at each place, not kept beside the new text
        x, y = a, b_old
        while x > 0 and before[x - 1] in " \t":
            x -= 1
        while y < len(before) and before[y] in " \t":
            y += 1
        if y < len(before) and before[y] != "\n":
            over, old_core, new_core = before[x:y], before[x:y], after[x:b_new + y - b_old]
    qualified = False
    if not core and not over and new_core.endswith(".") and _dotted(new_core[:-1]):
        # a name qualified (`Self` -> `t.Self`, typed as `t.` before it): that name, wherever it stands unqualified,
        # as a rename would go (the module prefix is the change, not the place)
        name = next((t for t in old_tokens if t.start == b_old and t.kind == "name"), None)
        if name is not None:
            core, b_old, b_new = [name], name.end, b_new + len(name.text)
            old_core, new_core, qualified = name.text, after[a:b_new], True
    left, right = _context(old_tokens, a, b_old)
    near = core[0] if core else _neighbour(old_tokens, a, b_old)
    where = place(near.kind) if near is not None else "code"
    lead = old_core[:len(old_core) - len(old_core.lstrip())] if core else ""
    trail = old_core[len(old_core.rstrip()):] if core else ""
    gap = -1
    if not core and not over:
        before_tok = next((t for t in reversed(old_tokens) if t.end <= a), None)
        if before_tok is not None and before[before_tok.end:a].strip() == "" and "\n" not in before[before_tok.end:a]:
            gap = a - before_tok.end
    rename = qualified or (len(core) == 1 and core[0].kind == "name" and is_name(new_core) and new_core != old_core
                           and old_core not in _BUILTIN)
    callee = _callee(before, a) if not core and new_core.lstrip().startswith(",") and right[:1] == (")",) else ""
    worded = any(t.kind in ("name", "number", "string", "comment") and t.text[:1].isalnum() for t in core)
    affix = len(core) == 1 and _affix(old_tokens, core[0])
    prose = (where != "code" and len(core) == 1 and old_core.isalpha() and len(old_core) >= PROSE_WORD
             and new_core.isidentifier() and new_core.lower() != old_core.lower() and _in_prose(before, a, b_old)
             and any(side[:1] and side[0] and side[0][:1].isalnum() for side in (left, right)))  # (a sentence's word,
    # not a string that is one word: `"red"` -> `"crimson"` is a value, not the word `red` wherever it is written)
    return Transformation(tuple(t.text for t in core), (new_core,) if new_core else (), left, right, where, rename,
                          lead, trail, gap, old_core, callee, tuple(place(t.kind) for t in core), True, worded, affix,
                          over=over, prose=prose)


def _block(before: str, after: str, p: int, s: int, tokens: Sequence[Token],
           filename: str = "") -> Transformation | None:
    """Whole lines inserted (the text between p and len(after) - s, nothing removed), learned by the lines around
    them; None for any other change. The insertion is slid along the text it repeats (a block typed after a line's
    end, `\n    import math`, is the same as the line `    import math` typed before the next line) until it starts
    a line and ends with a line break."""
    q = len(after) - s
    if len(before) != p + s or "\n" not in after[p:q] or not after[p:q].strip() or q - p > MAX_CORE:
        return None
    x, y = p, q
    while x > 0 and after[x - 1] == after[y - 1]:
        x, y = x - 1, y - 1  # back as far as the text repeats, then on to the first reading that is whole lines
    while x == y or not (x == 0 or after[x - 1] == "\n") or after[y - 1] != "\n" or after[x] == "\n":
        if y >= len(after) or after[x] != after[y]:
            return None  # no reading as whole lines: a change within lines
        x, y = x + 1, y + 1
    text = after[x:y]
    first = _index_at(tokens, x)
    if first >= len(tokens) or tokens[first].start >= y:
        return None
    context = _line_context(after, tokens, x, y)
    if context is None:
        return None
    binds = imports.local_import(text, filename, after, tokens, x, text[:len(text) - len(text.lstrip(" \t"))])
    if binds:  # a blank line under the imports is part of the change wherever it goes (or nowhere)
        text = text.rstrip("\n") + ("\n\n" if imports.blank_line(after, x + len(text.rstrip("\n")) + 1) else "\n")
    named = decorators.learned(text, after, x, filename) if not binds else None
    return Transformation((), (text,), (), (), place(tokens[first].kind), old_text="", lines=context, binds=binds,
                          named=named)


def _line_context(text: str, tokens: Sequence[Token], x: int, y: int) -> Lines | None:
    """The Lines around a block that stands at [x, y) of `text` (or is to go at x when x == y): the nearest non-blank
    line above x, the line at y."""
    j = _index_at(tokens, y)  # the first token of the line below
    if j < len(tokens) and tokens[j].kind == "nl":
        j += 1
    below_start = text.rfind("\n", 0, tokens[j].start) + 1 if j < len(tokens) else len(text)
    indent = text[below_start:tokens[j].start] if j < len(tokens) else ""
    if indent.strip():
        return None  # the line below starts inside a token (a string that spans lines)
    below = tuple(t.text for t in _line_from(tokens, j)[:LINE_CONTEXT]) or ("$",)
    i = _index_at(tokens, x) - 1  # the last token above the block
    while i >= 0 and tokens[i].kind == "nl":
        i -= 1
    if i < 0:
        head: tuple[str | None, ...] = ("^",)
        tail: tuple[str | None, ...] = ("^",)
        above_indent, gap = "", text[:x]
    else:
        k = i
        while k > 0 and tokens[k - 1].kind != "nl":
            k -= 1
        line = tokens[k:i + 1]
        head = tuple(t.text for t in line[:LINE_CONTEXT])
        tail = tuple(t.text for t in reversed(line[-LINE_CONTEXT:]))
        start = text.rfind("\n", 0, tokens[k].start) + 1
        above_indent = text[start:tokens[k].start] if not text[start:tokens[k].start].strip() else ""
        gap = text[tokens[i].end:x]
    blank_above = gap.count("\n") >= 2 or (i < 0 and x > 0)
    blank_below = "\n" in text[y:below_start]
    # a blank line apart, a line belongs to something else (the end of the function above a decorator added to the
    # next): only the line the block touches is its context
    if blank_above:
        head, tail, above_indent = (), (), ""
    elif blank_below:
        below = ()
    return Lines(head, tail, below, indent, above_indent, blank_above or blank_below, not blank_above)


def _line_from(tokens: Sequence[Token], j: int) -> Sequence[Token]:
    """The first LINE_CONTEXT tokens of the line whose first token is tokens[j]."""
    out: list[Token] = []
    while j < len(tokens) and tokens[j].kind != "nl" and len(out) < LINE_CONTEXT:
        out.append(tokens[j])
        j += 1
    return out


def _affix(tokens: Sequence[Token], tok: Token) -> bool:
    """`tok` is a string's prefix: a few letters lexed as part of a string, touching the quote that opens it."""
    if tok.kind != "string" or not tok.text.isalpha() or len(tok.text) > 3:
        return False
    i = _index_at(tokens, tok.start)
    before = tokens[i - 1] if i > 0 else None
    if before is not None and before.end == tok.start and before.kind == "string":
        return False  # the letters inside a string ('u'), not its prefix
    return i + 1 < len(tokens) and tokens[i + 1].start == tok.end and tokens[i + 1].text[:1] in _QUOTES


def learn_group(text: str, groups: Sequence[Group], filename: str = "") -> Transformation | None:
    """The transformation the newest of `groups` made (taking the ones before it as already made)."""
    if not groups or groups[-1].end > len(text):
        return None
    return learn(undone(text, groups[-1:]), text, filename)


def _lines_lexed(before: str, a: int, b: int, after_tokens: Sequence[Token], filename: str) -> Sequence[Token]:
    """The tokens of `before` on the lines that hold [a, b) (what learning reads: the change and its line), lexed
    alone: a request learns from each of the last few edits, and lexing the whole text before each is what made a
    held answer late. The whole text is lexed when those lines start inside a string or comment that began above
    (a docstring's middle: alone, it would read as code)."""
    start = before.rfind("\n", 0, a) + 1
    end = before.find("\n", max(b, a))
    end = len(before) if end < 0 else end + 1
    i = _index_at(after_tokens, start)
    first = after_tokens[i] if i < len(after_tokens) else None
    if first is not None and first.kind in ("string", "comment"):
        return tokens_of(before, filename)
    lines = tokens_of_lines(before[start:end], filename)
    return tuple(t._replace(start=t.start + start, end=t.end + start) for t in lines)


def generalised(first: Transformation, second: Transformation) -> Transformation | None:
    """One transformation that explains both examples: their shared context, and the names that differ in the core
    (and are copied into the new text) as holes; None when they are not one change."""
    if ((first.core, first.new) == (second.core, second.new) and _spelled_name(first) != _spelled_name(second)
            and (first.rename or second.rename)):
        # a name renamed in code and in a string that spells it (a pytest fixture's `def pep695(` and its
        # `"pep695"`): the rename, which takes such strings too (two strings alone may be values: `"descriptor"`)
        return replace(first if first.rename else second, once=False, scope=_scope(first, second),
                       module=first.module and second.module)
    if first.hoisted or second.hoisted or first.version or second.version:
        # one import, one number: where it goes, the statement or the number says (hoists.py, versions.py)
        same = (first.core, first.new, first.hoisted, first.version) == (second.core, second.new, second.hoisted,
                                                                         second.version)
        return replace(first, once=False) if same else None
    if first.chain is not None and first.chain == second.chain:
        return replace(first, once=False)  # one chain: where it goes, the raise statements say (reraise.py)
    if first.named is not None and first.named == second.named and first.new == second.new:
        return replace(first, once=False)  # one decorator: where it goes, the functions' names say (decorators.py)
    if first.alias is not None and first.alias == second.alias:
        return replace(first, once=False)  # one annotation: where it goes, the assignments say (aliases.py)
    if first.binds and first.binds == second.binds and first.new == second.new:
        return replace(first, once=False)  # one local import: where it goes, its names say (imports.py)
    if first.lines is not None and second.lines is not None:
        general = _lines_generalised(first, second)
        if general is not None:
            return general
    if first.lines is not None or second.lines is not None:
        # the lines around differ (`@override` over each method: what ends the method above is anyone's): the
        # change as tokens may still be one
        a, b = first.plain if first.lines else first, second.plain if second.lines else second
        return generalised(a, b) if a is not None and b is not None else None
    if (first.where != second.where or len(first.core) != len(second.core) or first.rename != second.rename
            or first.over != second.over):
        return None
    holes = [i for i, (x, y) in enumerate(zip(first.core, second.core)) if x != y]
    if any(x is None or y is None or not (is_name(x) and is_name(y)) for i in holes
           for x, y in [(first.core[i], second.core[i])]):
        return None
    new = _template(first, holes)
    core = tuple(HOLE if i in holes else t for i, t in enumerate(first.core))
    left = _shared(first.left, second.left)
    frame = 0
    if new is None and first.new == second.new and _framed(core, left):
        new, frame = first.new, 2  # the name that differs is dropped, in a frame that stays (`super(A, self)`)
    if new is None or _filled(new, second.core) != _joined(second.new) or (holes and first.rename):
        return None
    return replace(first, core=core, new=new, left=left, right=_shared(first.right, second.right), once=False,
                   frame=frame, scope=_scope(first, second), module=first.module and second.module)


def _scope(first: Transformation, second: Transformation) -> str | None:
    """The function two examples of a rename were both made in; None when made in two (the user renames the name
    across functions)."""
    return first.scope if first.scope == second.scope else None


def _outside(text: str, at: int, name: str, filename: str) -> bool:
    """A rename made at offset `at` was made outside each function where `name` is a variable of its own
    (scopes.shadowed)."""
    return not _own_variable(text, at, scopes.shadowed(text, name, filename))


def _own_variable(text: str, at: int, functions: Sequence[tuple[int, int, int]]) -> bool:
    """The name at offset `at` is one of `functions`' own variable (scopes.shadowed's: `def`, body, end): in its
    body, or its parameter in the signature (after `(`, `,` or `*`; an annotation or a default is the module's)."""
    return any(body <= at < end or (top <= at < body and text[max(0, at - 200):at].rstrip()[-1:] in ("(", ",", "*"))
               for top, body, end in functions)


def _spelled_name(t: Transformation) -> bool:
    """A string that is one whole name, changed to another name (`"pep695"` -> `"dummymodule_py312"`)."""
    return (len(t.core) == 1 and t.where == "string" and not t.rename and t.core[0] is not None
            and is_name(t.core[0]) and is_name(_joined(t.new)) and t.core[0] not in _BUILTIN
            and t.left[:1] == t.right[:1] and bool(t.left) and _quote(t.left[0] or ""))


def _framed(core: tuple[str | None, ...], left: tuple[str | None, ...]) -> bool:
    """The core's fixed tokens and the two nearest on its left, both fixed and shared by the examples, say what the
    change is whatever fills its holes: FRAME of them at least, one a word (`super (` and `, self`)."""
    if len(left) < 2 or any(w is None or w in ("^", "$") for w in left[:2]):
        return False
    fixed = [w for w in (*core, *left[:2]) if w is not None]
    return len(fixed) >= FRAME and any(is_name(w) for w in fixed)


def holed(t: Transformation) -> Transformation | None:
    """A change made once with the names it carries over read as holes (`Optional[Foo]` -> `Foo | None`: any name in
    there), gated as any change made once (a word that stays picks the places; with none, the context on both
    sides); None when it carries no name."""
    if (t.rename or t.path or t.version or t.hoisted or t.lines is not None or t.chain is not None
            or t.alias is not None or not t.core):
        return None
    names = [i for i, w in enumerate(t.core) if w is not None and is_name(w) and w not in _BUILTIN]
    new = _template(t, names) if names else None
    if new is None:
        return None
    carried = [i for i in names if i in new]  # the names the new text copies
    core = tuple(HOLE if i in carried else w for i, w in enumerate(t.core))
    worded = any(w is not None and is_name(w) for w in core)
    return replace(t, core=core, new=new, worded=worded)


def _lines_generalised(first: Transformation, second: Transformation) -> Transformation | None:
    """Two whole-line insertions of the same block as one: the tokens of the lines around that both share (the names
    that differ are holes); None when the blocks differ, or sit differently (indentation, blank lines), or too little
    around them is the same (LINE_FIXED: `@override` over some `def`s and not others is a guess)."""
    a, b = first.lines, second.lines
    if a is None or b is None or first.new != second.new or first.where != second.where:
        return None
    if (a.indent, a.above_indent, a.blank, a.top) != (b.indent, b.above_indent, b.blank, b.top):
        return None
    lines = replace(a, head=_shared(a.head, b.head), tail=_shared(a.tail, b.tail), below=_shared(a.below, b.below))
    if sum(_fixed(side) for side in (lines.head, lines.tail, lines.below)) < LINE_FIXED:
        return None
    return replace(first, lines=lines, once=False)


def _template(t: Transformation, holes: list[int]) -> tuple[str | int, ...] | None:
    """The new text with each hole's name, where it stands whole, as a reference to the core token."""
    text = _joined(t.new)
    if not holes:
        return t.new
    out: list[str | int] = []
    i = 0
    names = {t.core[h]: h for h in holes}
    for m in _words(text):
        word, at = m
        if word in names:
            out.append(text[i:at])
            out.append(names[word])
            i = at + len(word)
    out.append(text[i:])
    if not any(isinstance(x, int) for x in out) and holes:
        return None  # the names that differ are not carried: the examples changed different things
    return tuple(x for x in out if x != "")


def _words(text: str) -> list[tuple[str, int]]:
    return [(m.group(), m.start()) for m in re.finditer(r"\w+", text)]


def _shared(a: tuple[str | None, ...], b: tuple[str | None, ...]) -> tuple[str | None, ...]:
    out: list[str | None] = []
    for x, y in zip(a, b):
        if x == y:
            out.append(x)
        elif (x is None or is_name(x)) and (y is None or is_name(y)):  # a hole already (a third example): still one
            out.append(HOLE)
        else:
            break
    return tuple(out)


def _joined(new: tuple[str | int, ...]) -> str:
    return "".join(x for x in new if isinstance(x, str))


def _filled(new: tuple[str | int, ...], core: Sequence[str | None]) -> str:
    return "".join(x if isinstance(x, str) else (core[x] or "") for x in new)


def _token_start(old_tokens: Sequence[Token], new_tokens: Sequence[Token], at: int) -> int:
    """`at` moved back to the start of the token it cuts, in either text (the prefix is common to both)."""
    for tokens in (old_tokens, new_tokens):
        t = _covering(tokens, at)
        if t is not None and t.start < at:
            at = t.start
    return at


def _token_end(tokens: Sequence[Token], at: int) -> int:
    """`at` moved on to the end of the token it cuts."""
    t = _covering(tokens, at)
    return t.end if t is not None and t.start < at else at


def _covering(tokens: Sequence[Token], at: int) -> Token | None:
    """The token that holds the character at `at`, or None (whitespace)."""
    i = _index_at(tokens, at)
    return tokens[i] if i < len(tokens) and tokens[i].start <= at else None


def _index_at(tokens: Sequence[Token], at: int) -> int:
    """The index of the first token that ends after `at`."""
    return bisect.bisect_right(tokens, at, key=lambda t: t.end)


def _context(tokens: Sequence[Token], a: int, b: int) -> tuple[tuple[str | None, ...], tuple[str | None, ...]]:
    i = _index_at(tokens, a)
    while i < len(tokens) and tokens[i].start < a:
        i += 1
    left = _side(tokens, i - 1, -1)
    j = _index_at(tokens, b)
    while j < len(tokens) and tokens[j].start < b:
        j += 1
    right = _side(tokens, j, 1)
    return left, right


def _side(tokens: Sequence[Token], i: int, step: int) -> tuple[str | None, ...]:
    out: list[str | None] = []
    while len(out) < CONTEXT:
        if i < 0 or i >= len(tokens) or tokens[i].kind == "nl":
            out.append("^" if step < 0 else "$")
            break
        out.append(tokens[i].text)
        i += step
    return tuple(out)


def _neighbour(tokens: Sequence[Token], a: int, b: int) -> Token | None:
    i = _index_at(tokens, a)
    prev = tokens[i - 1] if i > 0 else None
    nxt = tokens[i] if i < len(tokens) else None
    if prev is not None and prev.kind != "nl":
        return prev
    return nxt if nxt is not None and nxt.kind != "nl" else prev


def _callee(text: str, at: int) -> str:
    """The (dotted) name of the function whose call's `(` the position `at` is inside (a few lines back at most), or
    ""."""
    depth = 0
    for i in range(at - 1, max(-1, at - 400), -1):
        ch = text[i]
        if ch in ")]}":
            depth += 1
        elif ch in "([{":
            if depth:
                depth -= 1
                continue
            if ch != "(":
                return ""
            j = i
            while j > 0 and text[j - 1] in " \t":
                j -= 1
            k = j
            while k > 0 and (text[k - 1].isalnum() or text[k - 1] in "_."):
                k -= 1  # with what it is called on: `x.fetch` is not `fetch`
            return text[k:j] if all(is_name(p) for p in text[k:j].split(".")) else ""
    return ""


def _dotted(text: str) -> bool:
    return all(is_name(part) for part in text.split("."))


# ---------------------------------------------------------------- applying


def sites(text: str, t: Transformation, filename: str = "", avoid: tuple[int, int] | None = None) -> list[Site]:
    """Every place in `text` where `t` applies, in text order; `avoid`: a range (the example itself) to skip."""
    tokens = tokens_of(text, filename)
    if t.named is not None:
        return [Site(at, at, new, 1.0) for at, new in decorators.places(text, _joined(t.new), t.named)
                if avoid is None or not avoid[0] <= at <= avoid[1]]
    if t.lines is not None:
        return _line_sites(text, tokens, t, t.lines, avoid)
    if t.column is not None:
        return _column_sites(text, tokens, t, t.column, avoid)
    if t.hoisted is not None:
        return [Site(a, b, "", 1.0) for a, b in hoists.places(text, t.hoisted)
                if avoid is None or not a <= avoid[0] <= b]
    if t.version:
        return [Site(at, at + len(t.old_text), _joined(t.new), 1.0) for at in versions.places(text, t.old_text)
                if avoid is None or not avoid[0] <= at <= avoid[1]]
    if t.chain is not None:
        return [Site(at, at, new, 1.0) for at, new in reraise.places(text, tokens, t.chain)
                if avoid is None or not avoid[0] <= at <= avoid[1]]
    if t.alias is not None:
        return [Site(at, at, new, 1.0) for at, new in aliases.places(text, tokens, t.alias)
                if avoid is None or not avoid[0] <= at <= avoid[1]]
    if t.join is not None:
        return [Site(a, b, new, 1.0) for a, b, new in joins.places(text, tokens, t.join)
                if avoid is None or not avoid[0] <= a <= avoid[1]]
    if t.partner is not None:
        return [Site(a, b, new, 1.0) for a, b, new in brackets.places(tokens, t.partner)]
    scope = scopes.span(text, t.scope, filename) if t.scope is not None else None
    # the module's name renamed: a function's own variable of that spelling is another
    shadows = scopes.shadowed(text, t.core[0], filename) if t.module and t.core and t.core[0] is not None else ()
    # `-> None` -> `-> NoReturn`: not over a function that returns, which a type checker rejects
    returning = returns.returning(text, filename) if t.core == ("None",) and returns.never(_joined(t.new)) else None
    found: list[Site] = []
    for i in _anchors(tokens, t):
        if scope is not None and not (i < len(tokens) and scope[0] <= tokens[i].start < scope[1]):
            continue  # a local variable renamed: another function's name of that spelling is another variable
        if i < len(tokens) and _own_variable(text, tokens[i].start, shadows):
            continue
        site = _at(text, tokens, t, i)
        if site is None or (avoid is not None and site.start < avoid[1] and avoid[0] < site.end):
            continue
        if avoid is not None and site.start == site.end == avoid[0] == avoid[1]:
            continue
        if returning is not None and returning(site.start):
            continue
        found.append(site)
        if len(found) >= MAX_SITES:
            break
    return sorted(found, key=lambda s: s.start)


def next_site(text: str, t: Transformation, cursor: int, filename: str = "",
              avoid: tuple[int, int] | None = None, near: bool = False,
              done: Sequence[tuple[int, int]] = (), wrap: bool = True,
              lines: tuple[int, int] | None = None) -> Site | None:
    """The first place at or after the cursor where `t` applies, else (`wrap`) the first before it; `near`: the
    place nearest the cursor, on either side. `done`: ranges the user changed (no place touching one). `lines`: the
    lines a place may start on, counted from the cursor's (-1 the line above)."""
    found = [s for s in sites(text, t, filename, avoid)
             if not any(s.start <= b and a <= s.end for a, b in done)]
    if lines is not None:
        line = text.count("\n", 0, cursor)
        found = [s for s in found if lines[0] <= text.count("\n", 0, s.start) - line <= lines[1]]
    if not found:
        return None
    if near:
        return min(found, key=lambda s: min(abs(s.start - cursor), abs(s.end - cursor)))
    return next((s for s in found if s.start >= cursor), found[0] if wrap else None)


def _line_sites(text: str, tokens: Sequence[Token], t: Transformation, want: Lines,
                avoid: tuple[int, int] | None) -> list[Site]:
    """The places a block of whole lines goes: between two lines that read as the example's did (the same indentation,
    the same blank lines between, the same tokens at the ends of the line above and the start of the one below)."""
    block = _joined(t.new)
    found: list[Site] = []
    for j, tok in enumerate(tokens):
        if j and tokens[j - 1].kind != "nl" or tok.kind == "nl":
            continue
        if place(tok.kind) != t.where:
            continue
        x = text.rfind("\n", 0, tok.start) + 1  # right over this line, or right under the line above it
        if text[x:tok.start] != want.indent:
            continue  # another indentation (checked first: reading the lines around each line is the cost)
        if t.binds:  # a local import: right over the first line of a body, or of its first use, that wants it
            if (avoid is None or not avoid[0] <= x <= avoid[1]) and imports.wanted(text, tokens, x, j, want.indent,
                                                                                   t.binds):
                found.append(Site(x, x, block, 1.0))
            continue
        if want.top and j >= 2:
            x = text.find("\n", tokens[j - 2].end) + 1
        if avoid is not None and avoid[0] <= x <= avoid[1]:
            continue
        got = _line_context(text, tokens, x, x)
        if got is None or (got.indent, got.above_indent, got.blank) != (want.indent, want.above_indent, want.blank):
            continue
        score = _lines_score(want, got, t.once)
        if score is None or text[x:x + len(block)] == block or text[max(0, x - len(block)):x] == block:
            continue
        found.append(Site(x, x, block, score))
        if len(found) >= MAX_SITES:
            break
    return found


def column(text: str, first: Group, second: Group, filename: str = "") -> Transformation | None:
    """The same text typed at the start of two lines in turn, the second right under the first, after the same
    indentation (`>>> ` before each line of a docstring's example, `# ` to comment a block out) as a transformation
    that goes on to the next line; None for any other pair of edits."""
    new = text[second.start:second.end]
    if first.old or second.old or not new.strip() or "\n" in new or text[first.start:first.end] != new:
        return None
    starts = [text.rfind("\n", 0, g.start) + 1 for g in (first, second)]
    indents = [text[a:g.start] for a, g in zip(starts, (first, second))]
    if indents[0] != indents[1] or indents[0].strip() or text.find("\n", starts[0]) + 1 != starts[1]:
        return None
    tokens = tokens_of(text, filename)
    i = _index_at(tokens, second.end)
    if i >= len(tokens) or tokens[i].kind == "nl":
        return None
    return Transformation((), (new,), (), (), place(tokens[i].kind), old_text="", once=False, column=indents[0])


def _column_sites(text: str, tokens: Sequence[Token], t: Transformation, indent: str,
                  avoid: tuple[int, int] | None) -> list[Site]:
    """The lines right under a line that starts with the indentation and the new text, at the same indentation, in
    the same place (code, string, comment), that do not start with it yet: the walk goes down the block and stops at
    its end (a blank line, another indentation, another place)."""
    new = _joined(t.new)
    head = indent + new
    found: list[Site] = []
    for j, tok in enumerate(tokens):
        if (j and tokens[j - 1].kind != "nl") or tok.kind == "nl" or place(tok.kind) != t.where:
            continue
        start = text.rfind("\n", 0, tok.start) + 1
        x = start + len(indent)
        if text[start:tok.start] != indent or text[x:x + len(new)] == new or start == 0:
            continue
        k = j - 2  # the last token of the nearest line above that holds one (blank lines between: one block still)
        above = text.rfind("\n", 0, tokens[k].start) + 1 if k >= 0 else 0
        if k < 0 or not text.startswith(head, above) or (avoid is not None and avoid[0] <= x <= avoid[1]):
            continue
        found.append(Site(x, x, new, 1.0))
    return found


def _lines_score(want: Lines, got: Lines, once: bool) -> float | None:
    """The share of the example's line tokens that stand at a place (a hole takes any name; made once, another name
    where a name stood counts 1/2), or None below the gate: made once, LINE_ONCE; made twice, every token both
    examples shared."""
    score, total = 0.0, 0
    for w_side, g_side in ((want.head, got.head), (want.tail, got.tail), (want.below, got.below)):
        total += len(w_side)
        for w, g in zip(w_side, g_side):
            if w == g or (w is None and g is not None and is_name(g)):
                score += 1
            elif once and w is not None and is_name(w) and is_name(g or ""):
                score += 0.5
            else:
                break
    share = score / total if total else 1.0
    return share if share >= (LINE_ONCE if once else 1.0) else None


def _anchors(tokens: Sequence[Token], t: Transformation) -> list[int]:
    """Token indexes where the core would start: found by its first fixed token, else by a context token."""
    if t.callee:
        return [i for i, tok in enumerate(tokens) if tok.text == ")"]
    for k, want in enumerate(t.core):
        if want is not None:
            return [i - k for i, tok in enumerate(tokens) if tok.text == want and i - k >= 0]
    # an insertion (or a core of holes): by the nearest context token that does not vary from place to place (a mark
    # or keyword; a name only when nothing else is near)
    for side, step in ((t.left, -1), (t.right, 1)):
        for k, want in enumerate(side):
            if want is not None and want not in ("^", "$") and not is_name(want):
                return _offsets(tokens, want, k, step, len(t.core))
    for side, step in ((t.left, -1), (t.right, 1)):
        if side and side[0] not in (None, "^", "$"):
            return _offsets(tokens, side[0], 0, step, len(t.core))
    # the nearest token on each side is a hole (the name that varies: `import NAME` + a comment at the line's end):
    # by the first fixed token past it
    for side, step in ((t.left, -1), (t.right, 1)):
        for k, want in enumerate(side):
            if want is not None and want not in ("^", "$"):
                return _offsets(tokens, want, k, step, len(t.core))
    return []


def _offsets(tokens: Sequence[Token], want: str, k: int, step: int, n: int) -> list[int]:
    """Core starts such that `want` stands k tokens out on that side."""
    shift = k + 1 if step < 0 else -(n + k)
    return [i + shift for i, tok in enumerate(tokens) if tok.text == want and 0 <= i + shift <= len(tokens)]


def _at(text: str, tokens: Sequence[Token], t: Transformation, i: int) -> Site | None:
    """The transformation applied with its core at token i, or None where it does not apply there."""
    n = len(t.core)
    if i < 0 or i + n > len(tokens):
        return None
    core = tokens[i:i + n]
    for want, tok in zip(t.core, core):
        if tok.kind == "nl" or (want is None and tok.kind != "name") or (want is not None and tok.text != want):
            return None
    if n and not _same_places(t, core) and not (t.rename and t.where == "code" and is_name(_joined(t.new))
                                              and _spelled(tokens, i)):
        return None
    if n > 1 and any("\n" in text[x.end:y.start] for x, y in zip(core, core[1:])) and "\n" not in t.old_text:
        return None
    if t.prose and place(core[0].kind) != "code":
        score: float | None = 1.0 if _in_prose(text, core[0].start, core[0].end) else None
    else:  # (in code, a word replaced in prose is read by its context)
        score = (1.0 if not t.once else None) if t.callee else _score(tokens, t, i, n)
    if score is None:
        return None
    if n:
        start, end = core[0].start, core[-1].end
        if t.lead and text[start - len(t.lead):start] == t.lead:
            start -= len(t.lead)
        if t.trail and text[end:end + len(t.trail)] == t.trail:
            end += len(t.trail)
    else:
        prev = tokens[i - 1] if i > 0 else None
        nxt = tokens[i] if i < len(tokens) else None
        if t.over:
            if nxt is None:
                return None
            start, end = nxt.start - len(t.over), nxt.start
            if text[start:end] != t.over or (start > 0 and text[start - 1] in " \t"):
                return None  # the same run of spaces, whole
        elif t.gap >= 0 and prev is not None:
            start = end = min(prev.end + t.gap, nxt.start if nxt is not None else len(text))
        elif nxt is not None:
            start = end = nxt.start
        else:
            return None
        if not n and prev is not None and place(prev.kind) != t.where and (nxt is None or place(nxt.kind) != t.where):
            return None
    if t.callee and (text[end:end + 1] != ")" or _callee(text, start) != t.callee
                     or _joined(t.new) in text[max(0, start - 400):start].rsplit("(", 1)[-1] + ")"):
        return None
    new = _filled(t.new, [tok.text for tok in core])
    if _applied(text, start, end, new, t):
        return None
    return Site(start, end, new, score)


def _in_prose(text: str, a: int, b: int) -> bool:
    """text[a:b] stands as a word written in prose, not as a piece of a path or a URL (`http://`, `docs/bits`)."""
    return not (text[a - 1:a] in ("/", "\\") or text[b:b + 1] in ("/", "\\") or text.startswith("://", b))


def _spelled(tokens: Sequence[Token], i: int) -> bool:
    """tokens[i] is the whole of a string: the name spelled as a string (`getattr(x, "count")`, `__all__ = ["count"]`,
    a test's `"count"`), which a rename of that name to another name renames too."""
    if i < 1 or i + 1 >= len(tokens):
        return False
    before, tok, after = tokens[i - 1], tokens[i], tokens[i + 1]
    return (tok.kind == "string" and before.kind == after.kind == "string" and before.end == tok.start
            and after.start == tok.end and before.text == after.text and _quote(before.text)
            and (i < 2 or tokens[i - 2].kind != "string" or tokens[i - 2].end < before.start))


def _same_places(t: Transformation, core: Sequence[Token]) -> bool:
    """The core's tokens stand where the example's did (code in code, a string's words in a string); a word the
    example changed in a string or comment (a docstring naming a module) may stand anywhere."""
    if len(core) == 1 and t.where != "code" and core[0].text[:1].isalnum():
        return True
    return all(place(tok.kind) == want for tok, want in zip(core, t.places or (t.where,) * len(core)))


def _score(tokens: Sequence[Token], t: Transformation, i: int, n: int) -> float | None:
    """The share of the context matched at a core spanning tokens i..i+n, or None where the gate refuses it."""
    if t.affix:
        return 1.0 if _affix(tokens, tokens[i]) else None
    if t.path:
        return None if i > 0 and tokens[i - 1].text == "." and tokens[i - 1].end == tokens[i].start else 1.0
    if t.rename:
        before = tokens[i - 1] if i > 0 else None
        attribute = before is not None and before.text == "." and before.end == tokens[i].start
        if attribute != (t.left[:1] == (".",)):
            return None
        if attribute and (i < 2 or (t.left[1:2] and t.left[1] is not HOLE and t.left[1] != tokens[i - 2].text)):
            return None  # an attribute of the same object, or of any, once two examples had different ones
        if "." in _joined(t.new) and _line_head(tokens, i) in ("from", "import"):
            return None  # a name qualified: not in an import, where a qualified name cannot stand
        return 1.0
    # a core that took its line break with it (a line deleted) was learned with the next line as its context
    lo, hi = i - 1, i + n
    if "\n" in t.lead and 0 <= lo < len(tokens) and tokens[lo].kind == "nl":
        lo -= 1
    if "\n" in t.trail and hi < len(tokens) and tokens[hi].kind == "nl" and t.right[:1] != ("$",):
        hi += 1  # (a blank line below it was learned as the line's end: the lexer keeps no token for a blank line)
    left, near_left, exact_left = _side_score(tokens, t.left, lo, -1, t.once)
    right, near_right, exact_right = _side_score(tokens, t.right, hi, 1, t.once)
    if exact_left < t.frame:
        return None  # the frame the dropped name stood in is not there
    if not (near_left or near_right):
        return None
    if n and all(w is None for w in t.core) and not (near_left and near_right):
        return None  # a core of holes only: its context is all that picks the place, on both sides
    if not n and t.gap >= 0 and not near_left:
        return None  # an insertion after a token: after that token
    total = len(t.left) + len(t.right)
    share = (left + right) / total if total else 1.0
    if not n and t.gap >= 0 and t.left:
        share = max(share, left / len(t.left))  # an insertion after a token: what it follows is what selects it
    if t.once and not t.worded and (share < ONCE_SHARE or exact_left + exact_right < ONCE_EXACT
                                    or not exact_left or not exact_right):
        return None  # made once, and no word of its own to pick its places: only where the context on both sides
        # says the same (`if` -> `elif` at a line's start is not `None` -> `t.NoReturn` after `->`)
    if not t.once and not t.worded and not t.turn and _fixed(t.left) + _fixed(t.right) + _whole_line(t) < TWICE_FIXED:
        return None  # made twice where little stays the same around it (`@override` before some `def`s): a guess
    specific = any(w is not None and any(ch.isalnum() for ch in w) and len(w) >= 2 for w in t.core)
    need = (SPECIFIC_ONCE if t.once else SPECIFIC) if specific else GENERIC
    return share if share >= need else None


def _line_head(tokens: Sequence[Token], i: int) -> str:
    """The first token of the line that holds tokens[i]."""
    while i > 0 and tokens[i - 1].kind != "nl":
        i -= 1
    return tokens[i].text if i < len(tokens) else ""


def _whole_line(t: Transformation) -> int:
    """1 when the context reaches both ends of its line (`raise NAME()` -> `raise NAME`: the line holds nothing else,
    which says as much as another token would), else 0."""
    return int(t.left[-1:] == ("^",) and t.right[-1:] == ("$",))


def _fixed(side: tuple[str | None, ...]) -> int:
    """The context tokens that are neither a hole nor a line's end."""
    return sum(1 for w in side if w is not None and w not in ("^", "$"))


def _side_score(tokens: Sequence[Token], want: tuple[str | None, ...], i: int, step: int,
                lenient: bool = True) -> tuple[float, bool, int]:
    """(the side's score, whether it holds at the core: its first token matched, or the second past a varying name,
    how many tokens other than the line's ends matched exactly). `lenient`: another name where the example had a
    name scores 1/2 (one example cannot tell the names that vary; two examples made them holes, so not then)."""
    score, first, exact = 0.0, False, 0
    for k, w in enumerate(want):
        got = _text_at(tokens, i + step * k, step)
        if w is None:
            if got is not None and is_name(got):
                score += 1
                first = first or k == 0
                if got in ("^", "$"):
                    break
                continue
            break
        if got == w or (got is not None and _quote(got) and _quote(w)):
            score += 1
            first = first or k == 0
            if got in ("^", "$"):
                break
            exact += 1
            continue
        if lenient and got is not None and is_name(w) and is_name(got):
            score += 0.5
            continue
        break
    # the nearest token matched, or it is the name that varies and the one past it matched (`Color.RED`, `Color.BLUE`)
    return score, first or score >= 1.5, exact


def _quote(text: str) -> bool:
    """A string's quotes: `'` and `"` (and their triples) select the same places."""
    return text[:1] in ("'", '"') and text.strip(text[:1]) == ""


def _text_at(tokens: Sequence[Token], j: int, step: int) -> str | None:
    if j < 0 or j >= len(tokens) or tokens[j].kind == "nl":
        return "^" if step < 0 else "$"
    return tokens[j].text


def _applied(text: str, start: int, end: int, new: str, t: Transformation) -> bool:
    """Whether the place already reads as the change leaves it (the new text stands there, around the old core)."""
    old = text[start:end]
    if old == new:
        return True
    at = new.find(old) if old else -1
    if old and at >= 0:
        head, tail = new[:at], new[at + len(old):]
        return text[start - len(head):start] == head and text[end:end + len(tail)] == tail
    if not old and new:
        return text[start:start + len(new)] == new or text[start - len(new):start] == new
    return False

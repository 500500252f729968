"""Propagation: the user's recent edits read as a transformation (synthesis.py) and proposed where it applies next.

Edits on one line made close together are one change wherever they stand in the history (_fused): `(f)` ->
`(f: "F") -> "F"` is typed as an insertion after `f` and one after `)`, and an editor sends `    yield val` ->
`yield from seq` as the indentation deleted, then `val` typed over.
Which example to learn from, in order:
- the change that followed the last one's previous instance, when the user makes a change in parts at each place
  (A, B, A: B is due; A, B, C, A: B; up to TURN_MAX parts), at the place nearest the cursor that the user has not
  touched;
- the last edit as an opening bracket changed to another kind (brackets.py): the bracket that closes it;
- the last two edits as a line joined to the one above (joins.py: ` ...` typed after a stub's signature, then the
  `...` line under it deleted): the first of them at the next line that ends the same over the same body;
- the last two edits, when they are two examples of one change (synthesis.generalised): the names that differ from
  place to place become holes;
- the last edit alone; a local import (imports.py), a chain added to a `raise` (reraise.py), a `: TypeAlias`
  (aliases.py) or a decorator that names its function (decorators.py) made once too;
- the last edit alone with the names it carries over read as holes (`Optional[Foo]` -> `Foo | None`: any name in
  there, where the word around it stands);
- the rename before it (the user fixed something the rename does not reach, a word in a docstring, and goes on);
  where the last is a rename too, whichever of the two comes first below (two names renamed together);
- a change made twice among the three edits before the last, on the line right below the cursor only (the user
  fixed something on the way: ` as e` given to a handler before ` from e` goes on its `raise`);
- the change made just before the last, within a few lines of it (the first part of one change made in two): never
  alone, only where its next place comes before the place proposed;
- a change made once a few edits back whose kind names its places (a `: TypeAlias`, a string's prefix, a word of
  prose, a chained `raise`, a decorator that names its function, a local import): the user set it aside for another
  edit and goes on with it.
The first that applies somewhere other than where it was made is proposed, at the first place after the cursor; the
walk wraps to the top only once the user takes it (Tab). A transformation the user rejected in this document is not
proposed again. A turn's other half may meet the half before it at a line's end (` ...` joined to a signature,
then the `...` line under it deleted): _fused reads them as one change, so the turn is also looked for in the edits
as made.
It is not proposed while the user may still be typing at the end of the change (still_typing): the request is held
until the pause (edit_service.py), so `tot` is never proposed for `total`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Collection, NamedTuple, Sequence

from tabd.daemon.edits import brackets, joins
from tabd.daemon.edits.history import Group
from tabd.daemon.edits.synthesis import Transformation, column, generalised, holed, learn, next_site, undone
from tabd.daemon.edits.tokens import shared_ends

PAUSE_S = 1.0  # typing at the end of the change, this long without an edit counts as done
COMPOUND_S = 15.0  # two edits on one line this close together are one change
TURN_HALVES = 5  # a turn's two halves this many lines apart, at most, are one place's
TURN_SLACK = 3  # ... and the other half is proposed at most this many lines further than it stood the last time
TURN_MAX = 6  # a change made in this many parts at each place, at most, is walked part by part (A B C A: B is due)
RESUME_BACK = 3  # edits before the last searched for a change made twice that the user may go on with
RESUME_LINES = 1  # ... at its next place, at most this many lines below the cursor (the fix was on the way there)
SET_ASIDE = 5  # edits before the last searched for a change of a kind that names its places, made once and set aside


@dataclass(frozen=True)
class Proposal:
    start: int  # the range to replace, in the current text
    end: int
    text: str  # what replaces it
    transformation: Transformation | None  # None: an edit the model wrote (model_source.py)
    source: str = "propagation"  # or "model"
    # the model's other edits from the same answer, each in the text that taking the ones before leaves: (start, end,
    # text, confidence); the next Tabs
    rest: tuple[tuple[int, int, str, float | None], ...] = ()

    @property
    def kind(self) -> str:
        t = self.transformation
        if t is None:
            return ""
        return "rename" if t.rename else "argument" if t.callee else "insertion" if not t.core else "replacement"


def still_typing(text: str, group: Group, cursor: int, now: float) -> bool:
    """The cursor is at the end of the change being typed and the user has not paused: it may not be done."""
    return not group.done and cursor == group.end and cursor > 0 and now - group.last_t < PAUSE_S


class Candidate(NamedTuple):
    transformation: Transformation
    made: tuple[int, int] | None  # the range it was made in (not proposed there again)
    near: bool = False  # proposed at the place nearest the cursor, either side (the other half of the change just
    # made), not at the first after it
    rival: bool = False  # a rename before the last one: its place is proposed when nearer than the last's (the user
    # renames `blacklist` and `add_blacklist` together; whichever comes next in the text is due)
    lines: tuple[int, int] | None = None  # the lines it may be proposed on, from the cursor's (-1: the line above)
    beside: bool = False  # the first part of a change made in two, right beside the last: never proposed alone, only
    # in place of another proposal whose place comes after its own


def candidates(text: str, groups: Sequence[Group], filename: str = "") -> list[Candidate]:
    """The transformations the recent edits teach, most specific first, each with the range it was made in. A change
    made once is repeated only when it is small (Transformation.small) or deletes a stretch of code that stands the
    same elsewhere (a decorator line); a larger one, a line or a block written, once the user has made it twice."""
    raw = [g for g in groups if g.end <= len(text)]
    live = _fused(text, raw)
    if not live:
        return []
    last = live[-1]
    lesson = _lessons(text, live, filename)
    single = lesson(len(live) - 1)
    out: list[Candidate] = []
    partner = _partner(text, raw)
    if partner is not None:
        out.append(partner)
    turn = _alternating(text, live, single, lesson)
    turn_in_live = turn is not None
    if turn is None and len(raw) > len(live):
        # a turn whose halves meet on one line (` ...` joined to the signature, then the `...` line below deleted)
        # is fused into one change; the edits as made show the turn
        in_raw = _lessons(text, raw, filename)
        turn = _alternating(text, raw, in_raw(len(raw) - 1), in_raw, pieces=True)
    if turn is not None:
        made = live if turn_in_live else raw
        out.append(Candidate(turn[0], turn[1], near=True, lines=_turn_lines(text, made[turn[2]], made[turn[2] + 1])))
    joined = _joined(text, raw)
    if joined is not None:
        out.append(joined)
    if len(live) >= 2:
        down = column(text, live[-2], last, filename)
        if down is not None:
            out.append(Candidate(down, (last.start, last.end)))
    if len(live) >= 2 and single is not None:
        general = _made_twice(text, live, single, lesson)
        if general is not None:  # made twice: whatever its size
            out.append(Candidate(general, (last.start, last.end)))
    if single is not None and (single.small or single.rewrites_a_stretch or single.binds or single.named):
        out.append(Candidate(single, (last.start, last.end)))
        loose = holed(single) if single.small and single.worded else None
        if loose is not None:
            out.append(Candidate(loose, (last.start, last.end)))
    if len(live) >= 2 and not _one_line(text, live[-2], last):
        # the rename before the last change, when the last applies nowhere (a rename, then the same word fixed by hand
        # in a docstring it does not reach): the walk goes on
        prev = live[-2]
        earlier = lesson(len(live) - 2)
        if earlier is not None and earlier != single and earlier.rename:
            out.append(Candidate(earlier, (prev.start, prev.end), rival=single is not None and single.rename))
    resumed = _resumed(text, live, single, lesson)
    if resumed is not None:
        out.append(resumed)
    first_part = _first_part(text, live, single, lesson)
    if first_part is not None:
        out.append(first_part)
    out.extend(_set_aside(text, live, single, lesson))
    return out


def propose(text: str, groups: Sequence[Group], cursor: int, now: float, filename: str = "",
            rejected: Collection[tuple[object, ...]] = (), active: Transformation | None = None) -> Proposal | None:
    """The next place the recent edits apply at this cursor, or None. `active`: the transformation being walked (the
    edit before this one was its proposal, taken), tried first."""
    if groups and groups[-1].end <= len(text) and still_typing(text, groups[-1], cursor, now):
        return None
    done = [(g.start, g.end) for g in groups if g.end <= len(text)]
    tried = [Candidate(active, None)] if active is not None else []
    found: Proposal | None = None
    for t, made, near, rival, lines, beside in [*tried, *candidates(text, groups, filename)]:
        if t.signature in rejected or (found is not None and not rival) or (beside and found is None):
            continue
        # the walk wraps to the top only once the user is taking it (Tab): an edit the user just made is repeated
        # below it (on real histories, every repeat shown above the cursor was one nobody made)
        site = next_site(text, t, cursor, filename, made, near=near, done=done if near else (), wrap=t is active,
                         lines=lines)
        if site is None:
            continue
        if found is None:
            found = Proposal(site.start, site.end, site.text, t)
        elif (found.transformation is not None and (found.transformation.rename or beside)
              and cursor <= site.start < found.start):
            found = Proposal(site.start, site.end, site.text, t)
    return found


def _partner(text: str, raw: Sequence[Group]) -> Candidate | None:
    """The last edit as an opening bracket changed to another kind (brackets.py): the bracket that closes it is due."""
    last = raw[-1]
    change = brackets.learned(last.old, text[last.start:last.end])
    if change is None:
        return None
    t = Transformation((last.old,), (change[0],), (), (), "code", old_text=last.old, once=False, partner=change)
    return Candidate(t, (last.start, last.end))


def _joined(text: str, raw: Sequence[Group]) -> Candidate | None:
    """The last two edits as a line joined to the one above (joins.py), made as two: the first goes on at the next
    line that ends the same over the same body."""
    if len(raw) < 2:
        return None
    join = joins.learned(text, raw[-2], raw[-1])
    if join is None:
        return None
    t = Transformation((), (join.text,) if join.text else (), (), (), "code", old_text=join.lifted, once=False,
                       join=join)
    return Candidate(t, (min(raw[-2].start, raw[-1].start), max(raw[-2].end, raw[-1].end)))


def _turn_lines(text: str, a: Group, b: Group) -> tuple[int, int] | None:
    """The lines, from the cursor's, where a turn's other half may stand, when the two halves stood within a few
    lines the last time (the halves of one place: a walrus added on an `if`, then a name replaced 4 lines under it):
    on that side of the half just made, as far as it stood then and TURN_SLACK lines more. None when they stood
    further apart (the half due is the first of the next place, wherever that is)."""
    d = text.count("\n", 0, b.start) - text.count("\n", 0, a.start)
    if abs(d) > TURN_HALVES:
        return None
    return (0, d + TURN_SLACK) if d >= 0 else (d - TURN_SLACK, 0)


def _resumed(text: str, live: Sequence[Group], single: Transformation | None,
             lesson: Callable[[int], Transformation | None]) -> Candidate | None:
    """The latest change before the last that the user made twice or more, generalised over its two latest
    instances, when the last edit is another change: the user made a change at each place, fixed something else on
    the way (`except ValueError:` given its ` as e` before ` from e` goes on the `raise` under it), and goes on."""
    for i in range(len(live) - 2, max(-1, len(live) - 2 - RESUME_BACK), -1):
        t = lesson(i)
        if t is None or (single is not None and generalised(single, t) is not None):
            continue
        for j in range(i - 1, -1, -1):
            other = lesson(j)
            general = generalised(t, other) if other is not None else None
            if general is not None:
                return Candidate(general, (live[i].start, live[i].end), lines=(0, RESUME_LINES))
    return None


def _set_aside(text: str, live: Sequence[Group], single: Transformation | None,
               lesson: Callable[[int], Transformation | None]) -> list[Candidate]:
    """The changes made once among the SET_ASIDE edits before the last whose kind names their places wherever they
    are (a `: TypeAlias` given to an alias, a string's prefix dropped, a word of prose fixed, a `raise` chained, a
    decorator that names its function, a local import), latest first: the user made one, did something else (an
    import added at the top), and goes on with it. Tried last, when nothing the later edits teach applies."""
    out: list[Candidate] = []
    for i in range(len(live) - 2, max(-1, len(live) - 2 - SET_ASIDE), -1):
        t = lesson(i)
        if t is None or t == single or not (t.alias or t.affix or t.prose or t.chain or t.named or t.binds):
            continue
        if any(_one_line(text, live[i], later) for later in live[i + 1:]):
            continue  # a later edit on its line: the change there was not this alone
        out.append(Candidate(t, (live[i].start, live[i].end)))
    return out


def _first_part(text: str, live: Sequence[Group], single: Transformation | None,
                lesson: Callable[[int], Transformation | None]) -> Candidate | None:
    """The change made just before the last, within TURN_HALVES lines of it, as the first part of one change made
    in two (`.get(` given to a lookup, then its default appended a line below; `__nonzero__` renamed `__bool__`,
    then the alias line under it deleted): at the next place its part comes
    first, so it is proposed where it stands before the last change's next place, and never alone (a change made
    once beside another is not evidence enough on its own)."""
    if len(live) < 2 or _one_line(text, live[-2], live[-1]):
        return None
    first, last = live[-2], live[-1]
    if abs(text.count("\n", 0, first.start) - text.count("\n", 0, last.start)) > TURN_HALVES:
        return None
    t = lesson(len(live) - 2)
    if t is None or t == single or not (t.small or t.rewrites_a_stretch):
        return None
    return Candidate(t, (first.start, first.end), rival=True, beside=True)


def _lessons(text: str, live: Sequence[Group], filename: str) -> Callable[[int], Transformation | None]:
    """What the i-th of the groups taught, learned once (the walks ask for the same ones)."""
    taught: dict[int, Transformation | None] = {}

    def lesson(i: int) -> Transformation | None:
        if i not in taught:
            g = live[i]
            before = undone(text, [g])
            taught[i] = learn(before, text, filename, (g.start, g.end) if _slid_across(before, text, g, live) else None)
        return taught[i]
    return lesson


def _made_twice(text: str, live: Sequence[Group], single: Transformation,
                lesson: Callable[[int], Transformation | None]) -> Transformation | None:
    """The last change generalised with the latest earlier edit that is the same change (the user made it twice,
    with other edits between), or None."""
    for i in range(len(live) - 2, -1, -1):
        if _one_line(text, live[i], live[-1]):
            continue
        other = lesson(i)
        general = generalised(single, other) if other is not None else None
        if general is not None:
            if general.lines is not None:
                # whole lines inserted: every earlier instance narrows the lines around to what all share (the line
                # under an `import` added at the top of each function is whatever each does first: two examples
                # that both begin `x = ...` do not make `=` part of the place)
                for j in range(i - 1, -1, -1):
                    earlier = lesson(j)
                    wider = generalised(general, earlier) if earlier is not None else None
                    if wider is not None and wider.lines is not None:
                        general = wider
            return general
    return None


def _alternating(text: str, live: Sequence[Group], single: Transformation | None,
                 lesson: Callable[[int], Transformation | None],
                 pieces: bool = False) -> tuple[Transformation, tuple[int, int], int] | None:
    """Changes made in turn at each place (a signature's `) -> T:` joined to its line, then the old line deleted):
    after A B A, B is due next, at its next place; after A B C A (a change made in three parts at each place), B.
    The change that followed the last one's previous instance, generalised with its own earlier instance when there
    is one; the range it was made in; and where that previous instance stands in `live`. None when the edits do not
    turn. `pieces`: the edits as made, before _fused, where B met A at a line's end (` ...` joined to a signature,
    then the `...` line under it deleted): a turn of two only."""
    n = len(live)
    if single is None or n < 3:
        return None

    def same(i: int) -> bool:  # the i-th edit is the last change made again
        other = lesson(i)
        return other is not None and generalised(single, other) is not None

    if pieces and not _one_line(text, live[-3], live[-2]):
        return None  # as made, only a B that met its A at a line's end is due here; any other turn is _fused's
    for period in range(2, 3 if pieces else TURN_MAX + 1):
        j = n - 1 - period  # the last change's previous instance, `period` edits back
        if j < 0:
            return None
        span = live[j:]
        if any(_one_line(text, a, b, strict=pieces) for a, b in zip(span, span[1:])):
            return None
        if any(same(i) for i in range(j + 1, n - 1)):
            return None  # the last change made again in between: no turn of this length
        if not same(j):
            continue
        if j >= 1 and same(j - 1):
            return None  # A, A, B, A: the user makes A in a run, and B once between; no turn
        before = lesson(j + 1)
        if before is None:
            return None
        back = j + 1 - period
        earlier = lesson(back) if back >= 0 else None
        general = generalised(before, earlier) if earlier is not None else None
        # the turn is the evidence the context may lack (a `...` line has none)
        return replace(general or before, once=False, turn=True), (live[j + 1].start, live[j + 1].end), j
    return None


def _fused(text: str, live: Sequence[Group]) -> list[Group]:
    """The groups with each run of consecutive ones on one line, made close together, read as one change: an editor
    sends a change made in two pieces (`    yield val` -> `yield from seq`: the indentation deleted, then `val`
    typed over) as two edits a moment apart, which the history keeps as two groups; the change is both."""
    out: list[Group] = []
    for g in live:
        prev = out[-1] if out else None
        if prev is None or not _one_line(text, prev, g) or g.first_t - prev.last_t > COMPOUND_S:
            out.append(g)
            continue
        start, end = min(prev.start, g.start), max(prev.end, g.end)  # both lie within: undone on that stretch alone
        old = undone(text[start:end], [prev.shifted(-start), g.shifted(-start)])
        out[-1] = Group(start, end, old, prev.first_t, g.last_t, g.done)
    return out


def _slid_across(before: str, text: str, g: Group, live: Sequence[Group]) -> bool:
    """Whether a diff of the texts would put g's change elsewhere than g, across another recent edit. A line deleted
    next to a copy of it (`) -> T:` joined to the line below, then the old `) -> T:` line deleted) reads, by the diff,
    as the copy deleted: its context is then the other edit's text, which no other place has. A slide within the
    user's own text (an insertion read one line's break later) changes nothing and is kept: the diff's reading puts
    an insertion before the token it goes with (`@override` before `def`)."""
    p, s = shared_ends(before, text)
    lo, hi = min(p, g.start), max(len(text) - s, g.end)
    return (p, len(text) - s) != (g.start, g.end) and any(o is not g and o.start < hi and lo < o.end for o in live)


def _one_line(text: str, a: Group, b: Group, strict: bool = False) -> bool:
    """Whether two edits stand on one line: with `strict`, not counting one that ends a line and one that deletes the
    line below as one line (` ...` joined to a signature, then the `...` line under it deleted: the two halves of a
    turn, each with its own place)."""
    lo, hi = min(a.start, b.start), max(a.end, b.end)
    return "\n" not in (text[lo:hi] if strict else text[lo:hi].rstrip("\n"))

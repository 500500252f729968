"""The last suggestion shown in a document, kept across edits elsewhere: shifted, kept, consumed or dropped."""
from __future__ import annotations

from tabd.cache.store import RebaseIndex
from tabd.cache.state import DocState

TEXT = "a = 1\nb = 2\nvalue = compute_\nreturn value\n"
CURSOR = TEXT.index("compute_") + len("compute_")


def state(text: str, offset: int) -> DocState:
    return DocState.from_text(text, offset, 400, 100)


def window_of(s: DocState):
    return s.window(400, 100)


def shown_index() -> RebaseIndex:
    index = RebaseIndex()
    s = state(TEXT, CURSOR)
    index.shown("d", s, window_of(s), "total(x)", "k", 0)
    return index


def test_an_edit_above_the_line_shifts_it():
    index = shown_index()
    index.edited("d", 0, 0, "# note\n")
    text = "# note\n" + TEXT
    s = state(text, CURSOR + 7)
    placed, rest = index.lookup("d", s, window_of(s))
    assert rest == "total(x)" and placed.offset == CURSOR + 7
    s = state(text, CURSOR)
    assert index.lookup("d", s, window_of(s)) is None  # not where it was before the shift


def test_typing_its_start_consumes_it_and_other_text_does_not():
    index = shown_index()
    index.edited("d", CURSOR, 0, "to")
    text = TEXT[:CURSOR] + "to" + TEXT[CURSOR:]
    s = state(text, CURSOR + 2)
    assert index.lookup("d", s, window_of(s))[1] == "tal(x)"
    other = TEXT[:CURSOR] + "xy" + TEXT[CURSOR:]
    s = state(other, CURSOR + 2)
    assert index.lookup("d", s, window_of(s)) is None


def test_an_edit_on_its_line_or_in_what_follows_drops_it():
    for offset, removed, inserted in ((TEXT.index("value"), 5, "worth"), (CURSOR + 1, 0, "\n"), (CURSOR, 0, "\n")):
        index = shown_index()
        index.edited("d", offset, removed, inserted)
        s = state(TEXT, CURSOR)
        assert index.lookup("d", s, window_of(s)) is None, (offset, removed, inserted)

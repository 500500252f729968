"""The editor's own closers: what the prompt window leaves out, and what a suggestion closes itself."""
from __future__ import annotations

import pytest

from tabd.predictor.prompt import pairs

NEXT = "\n    return x\n"


@pytest.mark.parametrize("plain_after, editor_after", [
    (NEXT, ")" + NEXT),  # `(` auto-closed: `foo(|)`
    (":" + NEXT, "):" + NEXT),  # in a def's signature: `def f(|):`
    (".bar()" + NEXT, ").bar()" + NEXT),  # VS Code closes before `.` too
    (NEXT, "])" + NEXT),  # `[` inside a call
    (NEXT, '")' + NEXT),  # a quote inside a call
    ("", ")"),  # at the end of the file
])
def test_the_editor_s_closer_after_the_cursor_leaves_the_window_as_it_was(plain_after, editor_after):
    assert pairs.normalised_after(editor_after) == pairs.normalised_after(plain_after) == plain_after


def test_enter_between_brackets_leaves_the_window_as_it_was():
    before_enter = pairs.normalised_after(")" + NEXT)  # `foo(|)`
    after_enter = pairs.normalised_after("\n)" + NEXT)  # `foo(\n    |\n)`
    assert after_enter == before_enter
    assert pairs.normalised_after("\n    ):" + NEXT) == pairs.normalised_after("):" + NEXT)


@pytest.mark.parametrize("after", [
    '"abc")\n',  # a string the cursor is before: its opening quote is text, not a closer
    "  )\n",  # a closer after a space is part of the line the user wrote
    "\n    a)\n",  # a following line of code that ends with a closer
    "x)\n",
])
def test_text_that_is_not_the_editor_s_closer_stays_in_the_window(after):
    assert pairs.normalised_after(after) == after


@pytest.mark.parametrize("text, after, n", [
    ("x)", ")\n", 1),  # the suggestion writes the closer itself: it replaces the editor's
    ("x", ")\n", 0),  # ... or leaves it where it is
    ("f(x)", ")\n", 0),  # its `)` closes its own `(`
    ("f(x))", ")\n", 1),
    ("a, b))", "))\n", 2),
    ("a)", "))\n", 1),  # one of two closers
    ("x]", ")\n", 0),  # not the closer that follows: nothing consumed
    ('hello")', '")\n', 2),  # the string's end quote and the call's closer
    ("x)\n    y", ")\n", 1),  # only the first line of a suggestion closes on the cursor's line
    ("b)", "\n)\n", 0),  # a closer on the next line is never replaced across lines
])
def test_a_suggestion_consumes_the_closers_it_writes_itself(text, after, n):
    assert pairs.consumed(text, after) == n


def test_accepting_over_the_pair_gives_what_the_editor_gives():
    before, after = pairs.apply("foo(", ")" + NEXT, "x)")
    assert before + after == "foo(x)" + NEXT and after == NEXT
    before, after = pairs.apply("foo(", ")" + NEXT, "x")
    assert before + after == "foo(x)" + NEXT and after == ")" + NEXT


def test_a_closer_the_next_line_holds_is_trimmed_from_the_suggestion():
    assert pairs.shown("b)", "\n)" + NEXT) == "b"
    assert pairs.shown("b", "\n)" + NEXT) == "b"
    assert pairs.shown("f(b)", "\n)" + NEXT) == "f(b)"  # balanced: nothing of the next line's
    assert pairs.shown("b)", ")" + NEXT) == "b)"  # on the cursor's line it is consumed instead


def test_a_quote_auto_closed_between_brackets_after_enter_leaves_the_window_as_it_was():
    # `foo(` Enter gives `foo(\n    |\n)`; typing `'` there gives `'|'` with the `)` still on the next line
    blank = pairs.normalised_after("\n)" + NEXT)
    quoted = pairs.normalised_after("'\n)" + NEXT)
    assert quoted == blank == NEXT
    assert pairs.normalised_after("')\n)" + NEXT) == pairs.normalised_after(")\n)" + NEXT)  # `)` is code there


def test_between_brackets_after_enter_the_quote_is_consumed_and_the_next_line_s_closer_trimmed():
    after = "'\n)" + NEXT
    assert pairs.consumed("b')", after) == 1
    assert pairs.shown("b')", after) == "b'"
    assert pairs.shown("b'", after) == "b'"
    assert pairs.shown("b", after) == "b"
    assert pairs.shown("f(b')", after) == "f(b')"  # not the string's end: nothing trimmed

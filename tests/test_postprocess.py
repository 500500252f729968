"""Stop rules and clean-up: what the user sees as ghost text."""
from __future__ import annotations

from tabd.predictor.postprocess import CursorLine, balance, cut_repeats, finish, line_done, wants_multiline


def test_single_line_stops_at_the_end_of_the_line_but_keeps_a_leading_newline():
    assert finish("x + 1\n    return y", CursorLine("    y = ", ""), False, 8) == "x + 1"
    assert finish("\n    return y\n", CursorLine("    y = x", ""), False, 8) == "\n    return y"
    assert line_done("\n    return y\n") and not line_done("\n    ")


def test_never_whitespace_only_and_trailing_space_trimmed():
    assert finish("   \n  ", CursorLine("x = ", ""), False, 8) == ""
    assert finish("value   ", CursorLine("x = ", ""), False, 8) == "value"


def test_does_not_repeat_the_text_after_the_cursor():
    assert finish("a, b)", CursorLine("f(", ")"), False, 8) == "a, b"
    assert finish("name]", CursorLine("x = d[", "]"), False, 8) == "name"


def test_brackets_the_line_did_not_open_are_not_closed():
    assert balance("a, b))", "f(") == "a, b)"
    assert balance("x]", "") == "x"
    assert balance("(1, 2)", "") == "(1, 2)"


def test_multiline_on_an_empty_line_in_a_block_stops_at_dedent():
    assert wants_multiline("    ", "", "def f(x):")
    assert not wants_multiline("    x = ", "", "def f(x):")
    text = "a = 1\n    b = 2\nprint(a)"
    assert finish(text, CursorLine("    ", ""), True, 8) == "a = 1\n    b = 2"


def test_a_loop_is_cut_to_one_copy_but_legit_runs_stay():
    assert cut_repeats("self.assertEqual(" * 4) == "self.assertEqual("
    assert cut_repeats("# " + "-" * 30) == "# " + "-" * 30
    assert cut_repeats("x = [0, 0, 0]") == "x = [0, 0, 0]"


def test_cursor_line_splits_the_line_at_the_cursor():
    line = CursorLine.of("def f():\n    x = ", " + 1\r\n    return x")
    assert (line.before, line.after, line.indent) == ("    x = ", " + 1", "    ")
    assert CursorLine.of("", "") == CursorLine("", "")

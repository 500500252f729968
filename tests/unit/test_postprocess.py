"""Stop rules and clean-up: what the user sees as ghost text."""
from __future__ import annotations

from tabd.predictor.text import postprocess
from tabd.predictor.text.postprocess import CursorLine, balance, cut_repeats, finish, line_done, wants_multiline


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


# ---- confidence gating: show the part the model is sure of


def test_gate_cuts_at_the_first_confidence_drop():
    text = "return self.value + 1"
    confidence = [(6, 0.9), (11, 0.8), (17, 0.7), (19, 0.2), (21, 0.9)]
    assert postprocess.gate(text, confidence, 0.5) == "return self.value"


def test_gate_cuts_where_the_whole_becomes_unsure_though_no_token_is():
    # each token at 0.7 passes a per-token rule; together two are right 49% of the time and three 34%
    text = "self.items.append"
    confidence = [(4, 0.7), (10, 0.7), (17, 0.7)]
    assert postprocess.gate(text, confidence, 0.5) == "self"
    assert postprocess.gate(text, confidence, 0.4) == "self.items"
    assert postprocess.gate(text, confidence, 0.3) == text


def test_gate_shows_nothing_when_the_first_piece_is_unsure():
    assert postprocess.gate("foo(bar)", [(3, 0.1), (8, 0.99)], 0.3) == ""


def test_gate_keeps_everything_at_threshold_zero_or_without_probabilities():
    assert postprocess.gate("foo(bar)", [(3, 0.1), (8, 0.2)], 0.0) == "foo(bar)"
    assert postprocess.gate("foo(bar)", [], 0.9) == "foo(bar)"  # a remote engine that gives no probabilities


def test_gate_drops_trailing_spaces_and_whitespace_only_rests():
    assert postprocess.gate("x = 1  \n    y", [(7, 0.9), (8, 0.9), (13, 0.1)], 0.5) == "x = 1\n"
    assert postprocess.gate("   foo", [(3, 0.9), (6, 0.1)], 0.5) == ""

"""The InlineCompletionList tabd writes: one item for an automatic request, the alternatives after it for an invoked
one (each replacing the editor's closers it writes itself), and the reason when there is nothing."""
from __future__ import annotations

from tabd.daemon.runtime.answer import Answer
from tabd.lsp.server import inline_result

AT = {"line": 3, "character": 8}


def test_alternatives_follow_the_suggestion_each_with_its_own_range():
    answer = Answer("7", "x)", "model", replaces=1, alternatives=(("y", 0), ("z)", 1)))
    items = inline_result(answer, AT, {"line": 3, "character": 9})["items"]
    assert [i["insertText"] for i in items] == ["x)", "y", "z)"]
    assert [i["range"]["end"]["character"] for i in items] == [9, 8, 9]
    # each item's accept names the answer; an alternative's says which text was taken instead (its accept is counted
    # and its state planned as an after-accept one, not the first item's)
    assert [i["command"]["arguments"] for i in items] == [["7"], ["7", {"alternative": "y"}], ["7", {"alternative": "z)"}]]


def test_nothing_says_why():
    assert inline_result(Answer("7", "", "none", reason="unsure"), AT) == {"items": [], "tabd": {"reason": "unsure"}}

"""The model edit source's reading of a prompt and an answer: the recent edits as the prompt shows them, the window's
hunks as edits in the document, nearest first and shifted in turn, undo and cursor insertions dropped, the gate."""
from __future__ import annotations

import asyncio

from tabd.daemon.edits.history import DocHistory
from tabd.daemon.edits.model_source import pairs_of, propose
from tabd.predictor.prompt.edit_prompt import EditPair, line_hunks, narrowed, window

TEXT = "a = 1\nb = count(x)\nc = count(y)\nd = 4\n"


def history_after(start: int, removed: str, inserted: str) -> DocHistory:
    h = DocHistory()
    h.edited(start, removed, inserted, 0.0)
    return h


def test_pairs_are_whole_lines_and_lines_added_or_removed_stand_alone():
    renamed = TEXT.replace("count(x)", "tally(x)")
    h = history_after(TEXT.index("count(x)"), "count", "tally")
    assert pairs_of(renamed, h.groups) == [EditPair(1, "b = count(x)\n", "b = tally(x)\n")]
    added = "z = 0\n" + TEXT
    assert pairs_of(added, history_after(0, "", "z = 0\n").groups) == [EditPair(0, "", "z = 0\n")]
    removed = TEXT.replace("d = 4\n", "")
    assert pairs_of(removed, history_after(len(removed), "d = 4\n", "").groups) == [EditPair(3, "d = 4\n", "")]


def test_line_hunks_apply_back_and_narrow_to_what_changes():
    new = TEXT.replace("count", "tally")
    hunks = line_hunks(TEXT, new)
    assert len(hunks) == 2  # two lines changed in a row: two edits
    out = TEXT
    for h in reversed(hunks):
        out = out[:h.start] + h.text + out[h.end:]
    assert out == new
    n = narrowed(TEXT, hunks[0])
    assert TEXT[n.start:n.end] == "count" and n.text == "tally" and new[n.new_start:n.new_start + 5] == "tally"


def run(text: str, cursor: int, answer: str, groups, probs=(), min_confidence: float = 0.5):
    asked = []

    async def writer(doc, prompt, budget, background):
        asked.append(prompt)
        return answer, probs

    return asyncio.run(propose(writer, "d", "f.py", text, cursor, list(groups), min_confidence, False)), asked


def test_the_nearest_edit_comes_first_and_the_next_is_shifted_by_it():
    text = TEXT.replace("count(x)", "tally(x)")
    h = history_after(TEXT.index("count(x)"), "count", "tally")
    answer = window(text, 0).text.replace("count(y)", "tally(y)").replace("d = 4", "d = tally(4)")
    edits, asked = run(text, text.index("c = "), answer, h.groups)
    assert "<<< edits: f.py\n@@ 1\n-b = count(x)\n+b = tally(x)\n" in asked[0]
    assert [(text[e.start:e.end], e.text) for e in edits][:1] == [("count", "tally")]
    after = text[:edits[0].start] + edits[0].text + text[edits[0].end:]
    second = edits[1]
    assert after[second.start:second.end] == "4" and second.text == "tally(4)"
    assert all(e.confidence is None for e in edits)  # an engine without probabilities: nothing gated


def test_an_undo_of_the_last_edit_and_text_at_the_cursor_are_never_proposed():
    text = TEXT.replace("count(x)", "tally(x)")
    h = history_after(TEXT.index("count(x)"), "count", "tally")
    undo = window(text, 0).text.replace("tally(x)", "count(x)")
    assert run(text, 0, undo, h.groups)[0] == []
    end_of_b = text.index("\nc = ")
    at_cursor = window(text, end_of_b).text.replace("tally(x)\n", "tally(x) + 1\n")
    assert run(text, end_of_b, at_cursor, h.groups)[0] == []
    cut = window(text, 0).text[:-3]  # no last newline: the budget ran out mid-window
    assert run(text, 0, cut, h.groups)[0] == []


def test_the_gate_holds_back_an_edit_the_model_wrote_unsure():
    text = TEXT.replace("count(x)", "tally(x)")
    h = history_after(TEXT.index("count(x)"), "count", "tally")
    answer = window(text, 0).text.replace("count(y)", "tally(y)")
    at = answer.index("tally(y)")
    sure = ((at, 0.99), (at + 5, 0.9), (len(answer), 0.99))
    unsure = ((at, 0.99), (at + 5, 0.1), (len(answer), 0.99))
    assert [e.text for e in run(text, 0, answer, h.groups, sure)[0]] == ["tally"]
    assert run(text, 0, answer, h.groups, unsure)[0] == []

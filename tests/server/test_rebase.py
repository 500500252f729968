"""A suggestion shown at the cursor survives an edit elsewhere: 50 lines above it, the next request at the (shifted)
cursor is answered from memory, at the right place; an edit on the cursor's line drops it. Through a real
`tabd serve` with the copy backend (deterministic text: what followed the last occurrence of the line's start)."""
from __future__ import annotations

import pytest

from support.rawserver import RawServer

URI = "file:///w/ledger.py"
FILLER = [f"    step_{i} = {i}" for i in range(60)]
HEAD = ["def ledger(items, tax):", "    result = compute_total(items, tax) + 1", *FILLER]
TYPED = "    value = compute_"
CODE = "\n".join(HEAD + [TYPED, "    return value", ""])
LINE = len(HEAD)


@pytest.fixture
def server():
    s = RawServer("--backend", "copy", "--no-warmup", "--debounce-ms", "0", "--no-speculation")
    s.initialize()
    s.open(URI, CODE)
    yield s
    s.close()


def item_of(reply: dict) -> dict:
    assert "error" not in reply, reply
    items = reply["result"]["items"]
    assert items, f"no suggestion: {reply}"
    return items[0]


def test_an_edit_fifty_lines_above_keeps_the_suggestion_shifted(server: RawServer):
    first = item_of(server.inline(URI, LINE, len(TYPED)))
    assert first["insertText"].startswith("total(items, tax)")
    assert server.result("tabd/stats", {})["last"]["source"] == "model"
    # 50 lines above: a new line inserted and a name changed on another
    server.change(URI, 2, [{"range": {"start": {"line": 5, "character": 0}, "end": {"line": 5, "character": 0}},
                            "text": "    extra = 0\n"}])
    server.change(URI, 3, [{"range": {"start": {"line": 10, "character": 4}, "end": {"line": 10, "character": 10}},
                            "text": "stage"}])
    again = item_of(server.inline(URI, LINE + 1, len(TYPED)))
    assert server.result("tabd/stats", {})["last"]["source"] == "cache", "recomputed instead of kept"
    assert again["insertText"] == first["insertText"]
    at = {"line": LINE + 1, "character": len(TYPED)}
    assert again["range"]["start"] == at
    # typing the start of it consumes that much
    server.change(URI, 4, [{"range": {"start": at, "end": at}, "text": "to"}])
    rest = item_of(server.inline(URI, LINE + 1, len(TYPED) + 2))
    assert rest["insertText"] == first["insertText"][2:]
    assert server.result("tabd/stats", {})["last"]["source"] in ("cache", "typed")


def test_an_edit_on_the_cursor_s_line_drops_it(server: RawServer):
    item_of(server.inline(URI, LINE, len(TYPED)))
    server.change(URI, 2, [{"range": {"start": {"line": 5, "character": 0}, "end": {"line": 5, "character": 0}},
                            "text": "    extra = 0\n"}])
    server.change(URI, 3, [{"range": {"start": {"line": LINE + 1, "character": 4}, "end": {"line": LINE + 1, "character": 9}},
                            "text": "worth"}])
    server.inline(URI, LINE + 1, len(TYPED))
    assert server.result("tabd/stats", {})["last"]["source"] != "cache"

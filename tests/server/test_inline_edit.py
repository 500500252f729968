"""Next-edit suggestions through a real `tabd serve`, spoken as GitHub Copilot's NES clients speak it: raw JSON with
no tabd fields, version 0 allowed, the client applying the edit itself and then running its command.

The copy backend keeps the server quick and deterministic; propagation needs no model (--edit-min-confidence 0)."""
from __future__ import annotations

import time

import pytest

from support.edits import apply
from support.rawserver import RawServer

URI = "file:///w/stock.py"
CODE = """def restock(count, shelf):
    shelf.add(count)
    if count > 10:
        log("big", count)
    return count_total(count)
"""
# `count` stands alone 5 times, and once inside `count_total`, another name that a rename of `count` never touches
OLD, NEW = "count", "total"


def rng(line: int, a: int, b: int) -> dict:
    return {"start": {"line": line, "character": a}, "end": {"line": line, "character": b}}


@pytest.fixture
def server():
    s = RawServer("--backend", "copy", "--no-warmup", "--edit-min-confidence", "0")
    s.initialize()
    yield s
    s.close()


def inline_edit(server: RawServer, line: int, character: int, version: int = 0) -> dict:
    return server.call("textDocument/copilotInlineEdit", {
        "textDocument": {"uri": URI, "version": version}, "position": {"line": line, "character": character},
        "context": {"triggerKind": 2}})



def test_the_server_advertises_copilot_inline_edit():
    s = RawServer("--backend", "copy", "--no-warmup")
    try:
        caps = s.initialize()["capabilities"]
        assert caps["experimental"]["copilotInlineEdit"] is True
        assert caps["experimental"]["tabd"]["inlineEdit"] is True
    finally:
        s.close()


def test_a_rename_propagates_site_by_site_and_each_next_edit_comes_from_memory(server: RawServer):
    server.open(URI, CODE)
    text, version = CODE, 1
    # the user renames the signature's `count` (select it, type the new name) and moves on to the next line
    version += 1
    server.change(URI, version, [{"range": rng(0, 12, 17), "text": NEW}])
    text = text.replace("(count,", "(total,", 1)
    reply = inline_edit(server, 1, 0)
    assert "error" not in reply, reply
    edits = reply["result"]["edits"]
    assert len(edits) == 1
    edit = edits[0]
    # Copilot's shape, exactly: `text`, not `newText`; the version the range is against; a command to run on accept
    assert set(edit) == {"text", "range", "textDocument", "command"}
    assert edit["text"] == NEW and edit["range"] == rng(1, 14, 19)
    assert edit["textDocument"] == {"uri": URI, "version": version}
    assert edit["command"]["command"] == "tabd.acceptInlineEdit" and len(edit["command"]["arguments"]) == 1
    assert server.result("tabd/stats", {})["edits"]["last"]["origin"] == "computed"
    applied = 0
    while edits:
        edit = edits[0]
        server.notify("textDocument/didShowInlineEdit", {"item": {"command": edit["command"]}})
        text = apply(text, edit)
        version += 1
        server.change(URI, version, [{"range": edit["range"], "text": edit["text"]}])
        # some clients run the command as a notification: no answer is waited for
        server.notify("workspace/executeCommand", {"command": edit["command"]["command"],
                                                   "arguments": edit["command"]["arguments"]})
        applied += 1
        end = edit["range"]["start"]["character"] + len(edit["text"])
        edits = inline_edit(server, edit["range"]["start"]["line"], end, version)["result"]["edits"]
        if edits:
            assert server.result("tabd/stats", {})["edits"]["last"]["origin"] == "cache", \
                "the edit after an accepted one was not answered from memory"
    assert applied == 4  # shelf.add(count), count > 10, log(.., count), count_total(count): not count_total
    assert text == CODE.replace("count", "total").replace("total_total", "count_total")
    assert server.document(URI)["text"] == text
    stats = server.result("tabd/stats", {})["edits"]
    assert stats["accepted"] == 4 and stats["shown"] == 4 and stats["from_memory"] >= 3


def test_a_name_still_being_typed_is_not_propagated(server: RawServer):
    """A request while the user types `tot` (for `total`) is held; the next keystroke answers it empty, and `tot` is
    never proposed."""
    server.open(URI, CODE)
    server.change(URI, 2, [{"range": rng(0, 12, 17), "text": "t"}])
    server.change(URI, 3, [{"range": rng(0, 13, 13), "text": "o"}])
    server.change(URI, 4, [{"range": rng(0, 14, 14), "text": "t"}])
    held = server.request("textDocument/copilotInlineEdit", {"textDocument": {"uri": URI, "version": 4},
                                                             "position": {"line": 0, "character": 15}})
    time.sleep(0.3)
    server.change(URI, 5, [{"range": rng(0, 15, 15), "text": "a"}])  # the user types on
    assert server.response(held)["result"] == {"edits": []}
    server.change(URI, 6, [{"range": rng(0, 16, 16), "text": "l"}])
    edit = inline_edit(server, 0, 17)["result"]["edits"][0]  # held until the pause: then the whole name
    assert edit["text"] == "total" and edit["range"] == rng(1, 14, 19)


def test_bad_requests_get_an_error_or_no_edit_and_the_server_goes_on(server: RawServer):
    server.open(URI, CODE)
    server.change(URI, 2, [{"range": rng(0, 12, 17), "text": NEW}])
    stale = inline_edit(server, 1, 0, version=1)  # the range would be against a text the client no longer has
    assert stale["result"] == {"edits": []}
    unseen = server.call("textDocument/copilotInlineEdit", {"textDocument": {"uri": "file:///w/never.py", "version": 1},
                                                            "position": {"line": 0, "character": 0}})
    assert unseen["error"]["code"] == -32602 and "not open" in unseen["error"]["message"]
    for params in ({"textDocument": {"uri": URI}}, {"position": {"line": 0, "character": 0}},
                   {"textDocument": {"uri": URI}, "position": {"line": -1, "character": "x"}}, None):
        reply = server.call("textDocument/copilotInlineEdit", params)
        assert reply["error"]["code"] == -32602, (params, reply)
    # unknown fields are ignored; a position past a line's end is the line's end, past the last line the document's
    # end, as LSP says (nothing follows it there: repeats are proposed below the cursor until the user takes one)
    end = server.call("textDocument/copilotInlineEdit", {"textDocument": {"uri": URI, "version": 2},
                                                         "position": {"line": 999, "character": 999}})
    assert end["result"] == {"edits": []}
    far = server.call("textDocument/copilotInlineEdit", {"textDocument": {"uri": URI, "version": 2, "extra": 1},
                                                         "position": {"line": 0, "character": 999}, "more": True})
    assert far["result"]["edits"][0]["text"] == NEW
    edit_id = far["result"]["edits"][0]["command"]["arguments"][0]
    assert server.result("workspace/executeCommand", {"command": "tabd.acceptInlineEdit", "arguments": ["nope"]}) \
        == {"accepted": False}
    server.notify("textDocument/didShowInlineEdit", {"item": {}})  # malformed: a warning, nothing else
    server.notify("textDocument/didFocus", {"textDocument": {"uri": URI}})
    assert server.result("workspace/executeCommand", {"command": "tabd.rejectInlineEdit", "arguments": [edit_id]}) \
        == {"rejected": True}
    assert server.result("workspace/executeCommand", {"command": "tabd.rejectInlineEdit", "arguments": [edit_id]}) \
        == {"rejected": False}  # already used
    assert server.document(URI)["text"] == CODE.replace("(count,", "(total,", 1)


def test_editing_elsewhere_while_an_edit_is_shown_rejects_it(server: RawServer):
    server.open(URI, CODE)
    server.change(URI, 2, [{"range": rng(0, 12, 17), "text": NEW}])
    assert inline_edit(server, 1, 0)["result"]["edits"]
    server.change(URI, 3, [{"range": rng(4, 4, 4), "text": "x"}])
    assert server.result("tabd/stats", {})["edits"]["implicit_rejects"] == 1


def test_inline_edits_can_be_switched_off():
    s = RawServer("--backend", "copy", "--no-warmup", "--no-inline-edits")
    try:
        s.initialize()
        s.open(URI, CODE)
        s.change(URI, 2, [{"range": rng(0, 12, 17), "text": NEW}])
        assert inline_edit(s, 1, 0)["result"] == {"edits": []}
    finally:
        s.close()


@pytest.mark.parametrize("blocked", ["excluded", "disabled"])
def test_an_excluded_or_switched_off_document_gets_no_next_edit(server: RawServer, blocked):
    """The same rename as above: a plain .py gets its edit, a .env (excluded) or a switched-off one none."""
    uri = "file:///w/stock_off.py" if blocked == "disabled" else "file:///w/.env.stock"
    for name in (URI, uri):
        server.open(name, CODE)
    if blocked == "disabled":
        server.notify("tabd/setEnabled", {"enabled": False, "uri": uri})
    got = {}
    for name in (URI, uri):
        server.change(name, 2, [{"range": rng(0, 12, 17), "text": NEW}])
        reply = server.call("textDocument/copilotInlineEdit", {
            "textDocument": {"uri": name, "version": 0}, "position": {"line": 1, "character": 0}})
        got[name] = reply["result"]["edits"]
    assert len(got[URI]) == 1 and got[uri] == []


def test_the_completion_where_an_applied_edit_leaves_the_cursor_is_computed_ahead():
    s = RawServer("--backend", "copy", "--no-warmup", "--debounce-ms", "0")
    try:
        s.initialize()
        s.open(URI, CODE)
        s.change(URI, 2, [{"range": rng(0, 12, 17), "text": NEW}])
        edit = inline_edit(s, 1, 0)["result"]["edits"][0]
        deadline = time.monotonic() + 30  # the prefetch of the completion after the edit runs in the background
        while s.result("tabd/stats", {})["prefetch"]["finished"] < 1:
            assert time.monotonic() < deadline, "the completion after the edit was never prefetched"
            time.sleep(0.05)
        s.change(URI, 3, [{"range": edit["range"], "text": edit["text"]}])
        s.notify("workspace/executeCommand", {"command": edit["command"]["command"],
                                              "arguments": edit["command"]["arguments"]})
        line, character = edit["range"]["start"]["line"], edit["range"]["start"]["character"] + len(NEW)
        assert "error" not in s.inline(URI, line, character)
        stats = s.result("tabd/stats", {})
        assert stats["prefetch"]["used"] == 1 and stats["last"]["depth"] == 1, \
            "the completion after the edit was computed again, not answered from the prefetch"
    finally:
        s.close()

"""Next edits written by the model, through a real `tabd serve` in front of a real HTTP engine on 127.0.0.1
(tests/support/stub_model.py, mode "edit": it rewrites the window a next-edit prompt shows by a rule the test sets,
as a model that learnt the edit would). What the user sees: the edit the model wrote, nearest the cursor first; the
model's other edit answered from memory after Tab; an edit that would undo what they just typed never shown; and the
prompt carries their recent edit."""
from __future__ import annotations

from support.edits import apply
from support.rawserver import RawServer
from support.stub_model import stub_model

URI = "file:///w/report.py"
CODE = """def report(items):
    total = 0
    for item in items:
        total += item.price
    print(total)
    return total
"""
TYPED = "    items = list(items)\n"  # the user adds a line at the top of the body


def rng(line: int, a: int, b: int) -> dict:
    return {"start": {"line": line, "character": a}, "end": {"line": line, "character": b}}



def model_edit(window: str) -> str:
    """What the scripted model writes: both uses of `total` after the loop report the count too, and (wrongly) the
    line the user just typed is gone again."""
    return (window.replace(TYPED, "").replace("    print(total)\n", "    print(total, len(items))\n")
            .replace("    return total\n", "    return total, len(items)\n"))


def typed_at_the_top(url: str, sources: str) -> RawServer:
    """A `tabd serve` in front of the engine at `url`, CODE open, TYPED added at the top of its body (version 2)."""
    server = RawServer("--backend", "openai", "--url", url, "--fim", "tabd", "--no-warmup", "--debounce-ms", "0",
                       "--edit-sources", sources)
    server.initialize()
    server.open(URI, CODE)
    server.change(URI, 2, [{"range": rng(1, 0, 0), "text": TYPED}])
    return server


def inline_edit(server: RawServer, line: int, character: int) -> dict:
    return server.call("textDocument/copilotInlineEdit", {
        "textDocument": {"uri": URI, "version": 0}, "position": {"line": line, "character": character}})


def test_the_model_s_edits_are_shown_nearest_first_the_next_from_memory_and_never_an_undo():
    with stub_model("edit") as (engine, url):
        engine.edit_for = staticmethod(model_edit)
        server = typed_at_the_top(url, "both")
        try:
            text = CODE.replace("    total = 0\n", TYPED + "    total = 0\n", 1)
            # the user moves down to the loop: no longer typing, so the model is asked
            reply = inline_edit(server, 3, 8)
            assert "error" not in reply, reply
            edits = reply["result"]["edits"]
            assert len(edits) == 1, edits
            first = edits[0]
            # the nearest of the model's edits to line 3: the print on line 5 (the undo of line 1 is never offered)
            assert first["range"] == rng(5, 15, 15) and first["text"] == ", len(items)"
            stats = server.result("tabd/stats", {})["edits"]
            assert stats["last"]["source"] == "model" and stats["last"]["origin"] == "computed"
            prompts = [b["prompt"] for b in engine.bodies if "<<< window: " in b.get("prompt", "")]
            assert prompts and "<<< edits: report.py\n@@ 1\n+    items = list(items)\n" in prompts[0]
            # Tab: the client applies it and runs the command; the model's other edit is the next, from memory
            text = apply(text, first)
            server.change(URI, 3, [{"range": first["range"], "text": first["text"]}])
            assert server.result("workspace/executeCommand", first["command"]) == {"accepted": True}
            reply = inline_edit(server, 5, 15 + len(first["text"]))
            second = reply["result"]["edits"][0]
            assert second["range"] == rng(6, 16, 16) and second["text"] == ", len(items)"
            assert server.result("tabd/stats", {})["edits"]["last"]["origin"] == "cache"
            text = apply(text, second)
            assert text.endswith("    print(total, len(items))\n    return total, len(items)\n")
            assert TYPED in text
        finally:
            server.close()


def test_edit_sources_propagation_leaves_propagation_alone_and_never_asks_the_engine_for_an_edit():
    with stub_model("edit") as (engine, url):
        engine.edit_for = staticmethod(model_edit)
        server = typed_at_the_top(url, "propagation")
        try:
            assert inline_edit(server, 3, 8)["result"] == {"edits": []}
            assert not [b for b in engine.bodies if "<<< window: " in b.get("prompt", "")]
        finally:
            server.close()


def test_an_edit_that_rewrites_the_rest_of_the_cursor_line_is_offered_as_ghost_text_too():
    with stub_model("edit") as (engine, url):
        engine.edit_for = staticmethod(model_edit)
        server = typed_at_the_top(url, "both")
        try:
            # the cursor in `print(|total)`: the model's edit adds `, len(items)` after `total`, on this line
            edit = inline_edit(server, 5, 10)["result"]["edits"][0]
            assert edit["range"] == rng(5, 15, 15)
            reply = server.call("textDocument/inlineCompletion", {
                "textDocument": {"uri": URI}, "position": {"line": 5, "character": 10}, "context": {"triggerKind": 2}})
            items = reply["result"]["items"]
            # the engine completes nothing there; the edit comes as ghost text: the rest of the line rewritten, the
            # text after the cursor kept in order
            assert items == [{"insertText": "total, len(items))", "range": rng(5, 10, 16),
                              "command": {**edit["command"], "arguments": items[0]["command"]["arguments"]}}]
            server.change(URI, 3, [{"range": rng(5, 10, 16), "text": "total, len(items))"}])
            assert server.result("workspace/executeCommand", items[0]["command"]) == {"accepted": True}
            # a line the edit leaves as it was: nothing as ghost text
            reply = server.call("textDocument/inlineCompletion", {
                "textDocument": {"uri": URI}, "position": {"line": 2, "character": 0}, "context": {"triggerKind": 2}})
            assert reply["result"]["items"] == []
        finally:
            server.close()

"""A session recording (--record) that fails to write stops with one message to the user; the edits still apply.
"""
from __future__ import annotations

from support.inprocess import InProcess


async def test_a_recording_that_fails_stops_with_a_message_and_edits_still_apply(srv: InProcess):
    class FullDisk:
        def record(self, event):
            raise OSError(28, "No space left on device")

    srv.server.recorder = FullDisk()
    await srv.initialize()
    srv.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": "ab"}})
    srv.notify("textDocument/didChange", {"textDocument": {"uri": "file:///a.py", "version": 2}, "contentChanges": [
        {"range": {"start": {"line": 0, "character": 1}, "end": {"line": 0, "character": 1}}, "text": "X"}]})
    srv.request(46, "tabd/document", {"uri": "file:///a.py"})
    assert (await srv.reply(46))["result"]["text"] == "aXb"
    shown = [m["params"]["message"] for m in srv.out.sent if m.get("method") == "window/showMessage"]
    assert len(shown) == 1 and "No space left" in shown[0]

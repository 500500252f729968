"""A Tab's read (lsp/server.py tab_read): the edit, tabd.accept and the next inline completion, which a client sends
together and the server reads at once. When memory holds the completion's answer ready for the document after the
edit, it is written before the services hear the edit and the accept (they hear them after it, in their order): the
answer, the accept's count, the answers' order on the wire and the log lines are what they were, and the write comes
before that work (traced: tests/support/module_trace.py). Where no answer is ready, the read goes as it came.

Through the real TabdServer and its transport's read loop (lsp/transport.py Connection) in process, over the fake
backend; a real `tabd serve` meets the same read in tests/server/test_hotpath.py.
"""
from __future__ import annotations

import asyncio
import json

from support.fakes import FakeBackend
from support.inprocess import InProcess
from support.module_trace import ModuleTrace
from tabd.daemon.edits.edit_service import state_key as edit_state
from tabd.daemon.edits.propagation import Proposal
from tabd.daemon.runtime.config import Config
from tabd.lsp.args import doc_id
from tabd.lsp.framing import frame
from tabd.lsp.transport import Connection
from tabd.predictor.types import Prediction

URI = "file:///w/a.py"
TEXT = "def total(items):\n    \n"
SUGGESTION = "return sum(items)"


class Wire:
    """The server's writes, each cut into its messages."""

    def __init__(self) -> None:
        self.writes: list[list[dict]] = []
        self.trace: ModuleTrace | None = None
        self.heard: bool | None = None  # whether the next-edit side had heard the Tab's edit when its answer went out
        self.server = None

    def write(self, data: bytes) -> None:
        messages, rest = [], bytes(data)
        while rest:
            head, _, rest = rest.partition(b"\r\n\r\n")
            length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
            messages.append(json.loads(rest[:length]))
            rest = rest[length:]
        if self.trace is not None and any(m.get("id") == "tab" for m in messages):
            self.trace.stop()  # the completion's answer is out
            self.heard = self.server is not None and bool(self.server.edits.histories)
        self.writes.append(messages)

    def close(self) -> None:
        pass

    def reply(self, msg_id) -> dict | None:
        return next((m for w in self.writes for m in w if m.get("id") == msg_id and "method" not in m), None)


async def replied(wire: Wire, msg_id) -> dict:
    for _ in range(1000):
        got = wire.reply(msg_id)
        if got is not None:
            return got
        await asyncio.sleep(0.005)
    raise TimeoutError(f"no reply to {msg_id}: {wire.writes[-3:]}")


async def stats(conn: Connection, wire: Wire, n: int) -> dict:
    conn.feed(frame({"jsonrpc": "2.0", "id": f"s{n}", "method": "tabd/stats", "params": {}}))
    return (await replied(wire, f"s{n}"))["result"]


def unsure_after_the_first(prefix: str, suffix: str) -> str | Prediction:
    """The suggestion where nothing is typed on its line yet; after it, one the model is unsure of (gating hides it)."""
    return SUGGESTION if prefix.endswith("\n    ") else Prediction("    pass", confidence=((8, 0.01),))


async def tab(config: Config | None = None, text=SUGGESTION,
              remembered: str = "") -> tuple[Wire, list[dict], dict, ModuleTrace, str]:
    """A suggestion from the model, its prefetch ended (where speculation is on), then its Tab in one read: (the
    wire, the log, tabd/stats after, the trace from the read to the completion's answer, the server's document).
    `remembered`: a next edit the next-edit side holds for the state after the Tab (text put at the cursor)."""
    logged: list[dict] = []
    srv = InProcess(FakeBackend(text=text), config)
    srv.server.events.add_sink(logged.append)
    try:
        await srv.initialize()
        srv.open(TEXT, URI)
        assert await srv.server.service.ready()
        wire = Wire()
        wire.server = srv.server
        srv.server.protocol.set_writer(wire, include_headers=True)
        conn = Connection(srv.server.protocol, asyncio.get_running_loop().create_future())
        at = {"line": 1, "character": 4}
        conn.feed(frame({"jsonrpc": "2.0", "id": "first", "method": "textDocument/inlineCompletion",
                         "params": {"textDocument": {"uri": URI}, "position": at, "context": {"triggerKind": 2}}}))
        item = (await replied(wire, "first"))["result"]["items"][0]
        assert item["insertText"] == SUGGESTION
        for n in range(400):
            if not srv.server.config.speculation or (await stats(conn, wire, n))["prefetch"]["finished"] >= 1:
                break
            await asyncio.sleep(0.01)
        after = {"line": 1, "character": 4 + len(SUGGESTION)}
        read = frame({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": URI, "version": 2},
            "contentChanges": [{"range": {"start": at, "end": at}, "text": SUGGESTION}]}})
        read += frame({"jsonrpc": "2.0", "id": "accept", "method": "workspace/executeCommand",
                       "params": {"command": "tabd.accept", "arguments": item["command"]["arguments"]}})
        read += frame({"jsonrpc": "2.0", "id": "tab", "method": "textDocument/inlineCompletion",
                       "params": {"textDocument": {"uri": URI}, "position": after, "context": {"triggerKind": 2}}})
        if remembered:
            tabbed = "def total(items):\n    " + SUGGESTION + "\n"
            cursor = len("def total(items):\n    " + SUGGESTION)
            srv.server.edits.memory[edit_state(doc_id(URI), tabbed, cursor)] = (
                Proposal(cursor, cursor, remembered, None, source="model"), None)
        trace = wire.trace = ModuleTrace()
        trace.start()
        try:
            conn.feed(read)
            await replied(wire, "tab")
        finally:
            trace.stop()
        report = await stats(conn, wire, "after")
        conn.feed(frame({"jsonrpc": "2.0", "id": "doc", "method": "tabd/document", "params": {"uri": URI}}))
        document = (await replied(wire, "doc"))["result"]["text"]
        await asyncio.sleep(0.05)  # the log lines follow the answers
        return wire, logged, report, trace, document
    finally:
        srv.close()


def _answers_in_order(wire: Wire) -> list:
    return [m["id"] for w in wire.writes for m in w if m.get("id") in ("accept", "tab") and "method" not in m]


async def test_a_tab_s_answer_from_memory_goes_out_before_the_services_hear_its_edit():
    wire, logged, report, trace, document = await tab()
    assert document == "def total(items):\n    " + SUGGESTION + "\n"
    answered = wire.reply("tab")["result"]
    assert answered["items"][0]["insertText"] == SUGGESTION  # the fake's text again: the prefetch's
    assert report["last"]["source"] == "cache" and report["after_accept"]["from_cache"] == 1
    assert wire.reply("accept")["result"] == {"accepted": True}
    assert _answers_in_order(wire) == ["accept", "tab"]  # the answers keep the requests' order
    assert report["accepts"] == 1 and report["accepts_by"] == {"edit": 1}  # seen in the edit, counted once
    events = [e["event"] for e in logged if e["event"] in ("accept", "completion")]
    assert events == ["completion", "accept", "completion"], logged  # the log keeps the order things happened in
    # before the answer's write: the document's edit and the answer (and whether the accept's id was shown, its
    # answer); what hears the edit and the accept (accepts, cancels, the workspace, the next-edit history) runs after
    assert "tabd.lsp.documents" in trace.modules and "tabd.daemon.runtime.memory" in trace.modules
    heard = ("tabd.daemon.runtime.speculator", "tabd.daemon.runtime.accepts", "tabd.daemon.runtime.computations",
             "tabd.daemon.runtime.workspace", "tabd.daemon.edits.edit_service")
    assert not [m for m in heard if m in trace.modules], trace.listing()


async def test_a_tab_with_no_answer_ready_is_read_as_it_came():
    wire, logged, report, trace, document = await tab(Config(speculation=False))
    assert document == "def total(items):\n    " + SUGGESTION + "\n"
    assert report["last"]["source"] == "model"  # nothing prefetched: computed
    assert wire.reply("accept")["result"] == {"accepted": True}
    assert _answers_in_order(wire) == ["accept", "tab"]
    assert report["accepts"] == 1 and report["accepts_by"] == {"edit": 1}
    assert "tabd.daemon.runtime.speculator" in trace.modules  # the edit was heard before the request went on


async def test_a_tab_s_empty_answer_with_no_next_edit_remembered_goes_out_before_the_next_edit_side_hears_it():
    """An empty answer shows a next edit as ghost text only where the next-edit side remembers one at the state after
    the Tab; where it remembers none there, the answer is written first and both services hear the edit after it."""
    wire, logged, report, trace, document = await tab(text=unsure_after_the_first)
    assert document == "def total(items):\n    " + SUGGESTION + "\n"
    assert wire.reply("tab")["result"] == {"items": [], "tabd": {"reason": "unsure"}}
    assert report["last"]["source"] == "cache" and report["after_accept"]["from_cache"] == 1  # hidden, from memory
    assert _answers_in_order(wire) == ["accept", "tab"] and wire.reply("accept")["result"] == {"accepted": True}
    assert report["accepts"] == 1 and report["accepts_by"] == {"edit": 1}
    assert wire.heard is False  # the next-edit side heard the edit after the answer's write
    assert "tabd.daemon.runtime.speculator" not in trace.modules, trace.listing()


async def test_a_tab_s_empty_answer_shows_the_next_edit_remembered_there_once_the_next_edit_side_has_heard_the_edit():
    """An empty answer may show a next edit as ghost text, which the next-edit side finds only once it has heard the
    edit: where it remembers one at the state after the Tab, it hears the edit before that answer's write; the
    completion service still hears it after."""
    wire, logged, report, trace, document = await tab(text=unsure_after_the_first, remembered=" or 0")
    assert document == "def total(items):\n    " + SUGGESTION + "\n"
    items = wire.reply("tab")["result"]["items"]
    assert [item["insertText"] for item in items] == [" or 0"], items  # the next edit, as ghost text
    assert report["last"]["source"] == "cache" and report["after_accept"]["from_cache"] == 1
    assert _answers_in_order(wire) == ["accept", "tab"] and wire.reply("accept")["result"] == {"accepted": True}
    assert report["accepts"] == 1 and report["accepts_by"] == {"edit": 1}
    assert wire.heard is True


async def test_each_edit_of_a_tab_s_read_is_heard_with_the_state_it_left():
    """The service hears each edit of a Tab's read after the answer, with the document's state as that edit left it
    (TabdServer.state_of at its cursor), not as the read's later edits leave it."""
    srv = InProcess(FakeBackend(text=SUGGESTION))
    try:
        await srv.initialize()
        srv.open(TEXT, URI)
        heard: list = []
        docs = srv.server.service.docs
        told = docs.changed
        docs.changed = lambda doc, state, *rest: (heard.append(state), told(doc, state, *rest))
        wire = Wire()
        srv.server.protocol.set_writer(wire, include_headers=True)
        conn = Connection(srv.server.protocol, asyncio.get_running_loop().create_future())
        at, top = {"line": 1, "character": 4}, {"line": 0, "character": 0}
        read = frame({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": URI, "version": 2}, "contentChanges": [{"range": {"start": at, "end": at}, "text": "x"}]}})
        read += frame({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": URI, "version": 3}, "contentChanges": [{"range": {"start": top, "end": top}, "text": "#"}]}})
        read += frame({"jsonrpc": "2.0", "id": "accept", "method": "workspace/executeCommand",
                       "params": {"command": "tabd.accept", "arguments": ["1"]}})
        read += frame({"jsonrpc": "2.0", "id": "tab", "method": "textDocument/inlineCompletion",
                       "params": {"textDocument": {"uri": URI}, "position": {"line": 1, "character": 5},
                                  "context": {"triggerKind": 2}}})
        conn.feed(read)
        await replied(wire, "tab")
        first, second = "def total(items):\n    x\n", "#def total(items):\n    x\n"
        assert heard == [srv.server.state_from(first, first.index("x") + 1), srv.server.state_from(second, 1)]
    finally:
        srv.close()

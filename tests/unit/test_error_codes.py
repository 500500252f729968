"""Protocol errors are answered with their JSON-RPC codes, in process: the real TabdServer and TabdProtocol fed the
values a transport would hand them (tests/support/inprocess.py). A request the server cannot serve gets its code
(-32002 before initialize, -32600 malformed, -32601 unknown, -32602 bad params, -32603 a handler's bug); a
notification it cannot use is dropped quietly; the server serves the next request either way.
"""
from __future__ import annotations

import asyncio

import pytest

from support.inprocess import INLINE, InProcess, code_of, inline_params


async def test_requests_before_initialize_are_refused_and_notifications_dropped(srv: InProcess):
    srv.request(1, "tabd/stats", {})
    assert code_of(await srv.reply(1)) == -32002
    srv.request(2, INLINE, inline_params())
    assert code_of(await srv.reply(2)) == -32002
    srv.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": "x"}})
    await srv.initialize()
    srv.request(3, "tabd/document", {"uri": "file:///a.py"})
    assert code_of(await srv.reply(3)) == -32602  # the early didOpen was dropped, as LSP says
    srv.request(4, "initialize", {"processId": None, "capabilities": {}})
    assert code_of(await srv.reply(4)) == -32600  # initialize only once


@pytest.mark.parametrize("params", [
    None,  # missing
    {},  # missing fields
    {"textDocument": {"uri": "file:///a.py"}},  # no position
    {"textDocument": {"uri": "file:///a.py"}, "position": {"line": "zero", "character": 0}, "context": {"triggerKind": 2}},
    {"textDocument": {"uri": "file:///a.py"}, "position": {"line": -1, "character": 0}, "context": {"triggerKind": 2}},
    {"textDocument": {"uri": 7}, "position": {"line": 0, "character": 0}, "context": {"triggerKind": 2}},
    {"textDocument": {"uri": "file:///a.py"}, "position": {"line": 0, "character": 0}, "context": {"triggerKind": 99}},
    [1, 2, 3],  # an array
    "a string",  # not structured at all
])
async def test_params_that_do_not_parse_are_invalid_params(srv: InProcess, params):
    await srv.initialize()
    srv.request(10, INLINE, params)
    assert code_of(await srv.reply(10)) == -32602


@pytest.mark.parametrize("message,code", [
    ({"jsonrpc": "2.0", "id": 20, "method": 5}, -32600),  # method not a string
    ({"id": 21, "method": "tabd/stats"}, -32600),  # no jsonrpc
    ({"jsonrpc": "1.0", "id": 22, "method": "tabd/stats"}, -32600),
    ({"jsonrpc": "2.0", "id": 23, "method": "no/such/method", "params": {}}, -32601),
    ({"jsonrpc": "2.0", "id": 24, "method": "$/no-such", "params": {}}, -32601),
])
async def test_malformed_requests_get_their_codes(srv: InProcess, message, code):
    await srv.initialize()
    srv.send(message)
    assert code_of(await srv.reply(message["id"])) == code


@pytest.mark.parametrize("msg_id", [1.5, True, {"a": 1}, [1]])
async def test_a_bad_id_is_answered_with_a_null_id(srv: InProcess, msg_id):
    await srv.initialize()
    srv.send({"jsonrpc": "2.0", "id": msg_id, "method": "tabd/stats"})
    assert code_of(await srv.reply(None)) == -32600


async def test_unknown_notifications_and_cancellations_are_ignored_quietly(srv: InProcess):
    await srv.initialize()
    before = len(srv.out.sent)
    srv.notify("no/such/notification", {})
    srv.notify("$/cancelRequest", {"id": 987654})
    srv.notify("$/cancelRequest", {})  # malformed: dropped
    srv.notify("$/cancelRequest", None)
    srv.notify("textDocument/didChange", {"textDocument": {"uri": "file:///never.py", "version": 2}, "contentChanges": [{"text": "x"}]})
    srv.notify("textDocument/didChange", {"garbage": True})
    srv.request(30, "tabd/stats", {})
    assert "result" in await srv.reply(30)
    assert len(srv.out.sent) == before + 1  # nothing but the stats reply


async def test_documents_never_opened_are_invalid_params(srv: InProcess):
    await srv.initialize()
    srv.request(40, INLINE, inline_params("file:///never.py"))
    assert code_of(await srv.reply(40)) == -32602
    srv.request(41, "tabd/document", {"uri": "file:///never.py"})
    assert code_of(await srv.reply(41)) == -32602
    srv.request(42, "tabd/document", {})
    assert code_of(await srv.reply(42)) == -32602
    srv.request(43, "textDocument/completion", {"textDocument": {"uri": "file:///never.py"}, "position": {"line": 0, "character": 0}})
    assert code_of(await srv.reply(43)) == -32602


async def test_an_exception_inside_a_handler_is_an_internal_error(srv: InProcess):
    @srv.server.feature("test/boom")
    def boom(ls, params):
        raise RuntimeError("handler bug")

    @srv.server.feature("test/boom-async")
    async def boom_async(ls, params):
        await asyncio.sleep(0)
        raise KeyError("async handler bug")

    await srv.initialize()
    srv.request(50, "test/boom", {})
    assert code_of(await srv.reply(50)) == -32603
    srv.request(51, "test/boom-async", {})
    assert code_of(await srv.reply(51)) == -32603
    srv.request(52, "tabd/stats", {})
    assert "result" in await srv.reply(52)


async def test_bad_command_arguments_are_invalid_params(srv: InProcess):
    await srv.initialize()
    for i, args in enumerate([[], [{"x": 1}], ["id", "not an object"], [True]]):
        srv.request(60 + i, "workspace/executeCommand", {"command": "tabd.accept", "arguments": args})
        assert code_of(await srv.reply(60 + i)) == -32602
    srv.request(70, "workspace/executeCommand", {"command": "no.such.command", "arguments": []})
    assert code_of(await srv.reply(70)) == -32602


async def test_a_plain_path_handler_that_fails_is_not_run_again(srv: InProcess):
    """A Tab's messages are handled on plain JSON (lsp/rawparams.py); a handler that fails there may have applied its edit
    already, so it is reported, not handed to the structured path to apply a second time."""
    await srv.initialize()
    srv.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": "ab"}})
    apply = srv.server.apply_changes

    def apply_then_fail(*args):
        apply(*args)
        raise RuntimeError("bug after the edit")

    srv.server.apply_changes = apply_then_fail
    srv.notify("textDocument/didChange", {"textDocument": {"uri": "file:///a.py", "version": 2}, "contentChanges": [
        {"range": {"start": {"line": 0, "character": 1}, "end": {"line": 0, "character": 1}}, "text": "X"}]})
    srv.server.apply_changes = apply
    srv.request(90, "tabd/document", {"uri": "file:///a.py"})
    assert (await srv.reply(90))["result"]["text"] == "aXb"  # once

    srv.server.protocol.plain = {**srv.server.protocol.plain, INLINE: lambda params: 1 / 0}
    srv.request(91, INLINE, inline_params(line=0, character=3))
    assert code_of(await srv.reply(91)) == -32603


async def test_notifications_leave_nothing_behind(srv: InProcess):
    """pygls keeps a finished Future per generator-handled notification forever: 20k keystrokes, 20k Futures."""
    await srv.initialize()
    srv.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": ""}})
    for v in range(2, 502):
        srv.notify("textDocument/didChange", {"textDocument": {"uri": "file:///a.py", "version": v}, "contentChanges": [
            {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "x"}]})
        srv.notify("$/setTrace", {"value": "off"})
    srv.request(45, "tabd/document", {"uri": "file:///a.py"})
    assert (await srv.reply(45))["result"]["text"] == "x" * 500
    srv.notify("textDocument/didClose", {"textDocument": {"uri": "file:///a.py"}})
    await asyncio.sleep(0.05)
    assert len(srv.server.protocol._request_futures) == 0

"""A model that fails, stalls, is cancelled or cannot load: the editor gets an answer (empty, or RequestCancelled when
it cancelled), in bounded time, and a load failure is shown to the user. In process, with the fake backend.
"""
from __future__ import annotations

import asyncio
import time

from support.fakes import FakeBackend
from support.inprocess import INLINE, InProcess, code_of, inline_params


async def test_a_cancelled_request_is_answered_request_cancelled():
    srv = InProcess(FakeBackend(delay=2.0))
    try:
        await srv.initialize({"speculation": False})
        srv.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": "def f():\n    "}})
        srv.request(80, INLINE, inline_params(line=1, character=4))
        await asyncio.sleep(0.1)
        srv.notify("$/cancelRequest", {"id": 80})
        t0 = time.monotonic()
        assert code_of(await srv.reply(80)) == -32800
        assert time.monotonic() - t0 < 1.0
    finally:
        srv.close()


async def test_a_model_too_slow_to_answer_is_an_empty_result_in_bounded_time(monkeypatch):
    import tabd.daemon.runtime.service as service_module

    monkeypatch.setattr(service_module, "REQUEST_TIMEOUT_S", 0.3)
    srv = InProcess(FakeBackend(delay=5.0))
    try:
        await srv.initialize({"speculation": False})
        srv.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": "x = "}})
        t0 = time.monotonic()
        srv.request(92, INLINE, inline_params(line=0, character=4))
        assert (await srv.reply(92))["result"] == {"items": [], "tabd": {"reason": "error"}}
        assert time.monotonic() - t0 < 2.0
    finally:
        srv.close()


async def test_a_model_error_is_an_empty_result():
    srv = InProcess(FakeBackend(fail=True))
    try:
        await srv.initialize({"speculation": False})
        srv.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": "x = "}})
        srv.request(90, INLINE, inline_params(line=0, character=4))
        assert (await srv.reply(90))["result"] == {"items": [], "tabd": {"reason": "error"}}
    finally:
        srv.close()


async def test_a_model_that_cannot_load_is_shown_to_the_user():
    def factory(config):
        raise OSError("weights are corrupt")

    srv = InProcess()
    srv.server.backend_factory = factory
    try:
        await srv.initialize()
        srv.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": "x = "}})
        srv.request(91, INLINE, inline_params(line=0, character=4))
        assert (await srv.reply(91))["result"] == {"items": [], "tabd": {"reason": "error"}}
        shown = [m for m in srv.out.sent if m.get("method") == "window/showMessage"]
        assert shown and shown[0]["params"]["type"] == 1 and "weights are corrupt" in shown[0]["params"]["message"]
    finally:
        srv.close()


async def test_a_model_still_loading_when_the_wait_runs_out_answers_loading(monkeypatch):
    import tabd.daemon.runtime.service as service_module

    monkeypatch.setattr(service_module, "LOAD_WAIT_S", 0.2)

    def slow_factory(config):
        time.sleep(1.0)
        return FakeBackend(text="later()")

    srv = InProcess()
    srv.server.backend_factory = slow_factory
    try:
        await srv.initialize({"speculation": False, "debounceMs": 0})
        srv.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1, "text": "x = "}})
        srv.request(93, INLINE, inline_params(line=0, character=4))
        assert (await srv.reply(93))["result"] == {"items": [], "tabd": {"reason": "loading"}}
        await asyncio.sleep(1.5)  # the load went on (it takes 1 s): the next request gets its answer
        srv.request(94, INLINE, inline_params(line=0, character=4))
        assert (await srv.reply(94, timeout=10))["result"]["items"][0]["insertText"] == "later()"
    finally:
        srv.close()

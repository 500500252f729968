"""Invoked requests (triggerKind 1) behind a remote engine: after a Tab, the next one is answered from memory.

A real `tabd serve-model` on 127.0.0.1 and a real `tabd serve --backend openai` in front of it. A remote engine cuts an
automatic request's decode where --min-confidence stops showing it, an invoked one decodes the whole best guess: the
prefetch planned after an invoked answer must be computed under the key the next invoked request asks (issue #42: it
was computed, then missed, every time).
"""
from __future__ import annotations

import asyncio
import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from support.engines import ServeModel
from support.lspclient import change, end_of, init_params, open_doc, stats, until_stats
from support.ports import free_port

PORT = free_port()
TABS = 3

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def engine():
    served = ServeModel(PORT).start()
    yield served
    served.stop()


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=[
        sys.executable, "-m", "tabd.daemon", "serve", "--backend", "openai", "--url", f"http://127.0.0.1:{PORT}",
        "--debounce-ms", "0",
    ]),
)
async def lsp(lsp_client: LanguageClient):
    # the default --min-confidence: an automatic request's engine call would stop decoding where it stops showing
    await lsp_client.initialize_session(init_params({"depth": 2}))
    yield
    await lsp_client.shutdown_session()


async def invoked(client: LanguageClient, uri: str, text: str) -> types.InlineCompletionList:
    line, char = end_of(text)
    params = types.InlineCompletionParams(
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=char),
    )
    return await asyncio.wait_for(client.text_document_inline_completion_async(params), 120)


async def test_after_a_tab_the_next_invoked_request_is_answered_from_memory(engine, lsp: LanguageClient):
    """engine comes first: the server's backend looks at the engine when it loads."""
    uri = "file:///w/invoked.py"
    text = ("import os\nimport sys\n\n\ndef main(argv):\n    config = read_config(argv[1])\n"
            "    for key in sorted(config):\n        ")
    open_doc(lsp, uri, text)
    version = 1
    answer = await invoked(lsp, uri, text)
    served = 0
    for _ in range(TABS):
        assert answer.items and answer.items[0].insert_text, "the model suggested nothing: no Tab to test"
        item = answer.items[0]
        before = await stats(lsp)
        await asyncio.sleep(0.4)  # the user reads it before Tab: a shared engine's prefetch waits for that pause
        version += 1
        change(lsp, uri, version, *end_of(text), item.insert_text)
        await lsp.workspace_execute_command_async(
            types.ExecuteCommandParams(command="tabd.accept", arguments=[item.command.arguments[0]]))
        text += item.insert_text
        await until_stats(lsp, lambda s: s["prefetch"]["finished"] > before["prefetch"]["finished"],
                          "the prefetch for the state after the Tab", timeout=120)
        answer = await invoked(lsp, uri, text)
        after = await stats(lsp)
        assert after["after_accept"]["requests"] == before["after_accept"]["requests"] + 1
        served += after["after_accept"]["from_cache"] - before["after_accept"]["from_cache"]
        assert after["last"]["source"] == "cache", (served, after["last"])
    assert served == TABS

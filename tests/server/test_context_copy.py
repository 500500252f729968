"""Copying from another open file through a real server: a line written there is suggested here, verified by the model.

The server runs the fixture model (tests/fixture_model.py), which writes
` total()` and finds any other token near impossible, so a copy is shown only
as far as it starts with ` total()`: the other file's ` total() + 42` is
suggested whole (confidence 1 for ` total()`, 0 after it; `minConfidence` 0
shows all), and with that file closed the model's own ` total()` is.
"""
from __future__ import annotations

import sys

import pytest
import pytest_lsp
from support.fixture_model import MODEL_DIR, SUGGESTION
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from support.lspclient import init_params, inline, open_doc, stats

pytestmark = pytest.mark.asyncio(loop_scope="module")

OTHER = "def score(items):\n    result = total() + 42\n    return result\n"
HERE = "def main():\n    result ="


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=[
    sys.executable, "-m", "tabd.daemon", "serve", "--model", str(MODEL_DIR), "--no-cache", "--no-speculation"]))
async def client(lsp_client: LanguageClient, fixture_model):
    await lsp_client.initialize_session(init_params({"contextIdleMs": 100, "minConfidence": 0}))
    yield
    await lsp_client.shutdown_session()


async def test_a_line_of_another_open_file_is_copied_and_closing_it_stops_that(client: LanguageClient):
    open_doc(client, "file:///w/pkg/here.py", HERE)
    got = await inline(client, "file:///w/pkg/here.py", 1, len("    result ="))
    assert [i.insert_text for i in got.items] == [SUGGESTION]  # nothing else open: the model's own guess

    open_doc(client, "file:///w/pkg/other.py", OTHER)
    client.protocol.notify("tabd/focus", {"uri": "file:///w/pkg/here.py", "position": {"line": 1, "character": 12}})
    got = await inline(client, "file:///w/pkg/here.py", 1, len("    result ="))
    assert [i.insert_text for i in got.items] == [" total() + 42"]
    active = (await stats(client))["context"]["active"]
    assert active["sources"] == 1 and active["source_bytes"] == len(OTHER)

    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri="file:///w/pkg/other.py")))
    client.protocol.notify("tabd/focus", {"uri": "file:///w/pkg/here.py", "position": {"line": 1, "character": 12}})
    got = await inline(client, "file:///w/pkg/here.py", 1, len("    result ="))
    assert [i.insert_text for i in got.items] == [SUGGESTION]

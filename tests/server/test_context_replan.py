"""A context change while a suggestion is on screen re-plans its after-accept states, so the Tab is still from memory.

The server runs the copy baseline (`--backend copy`): its suggestions are what
followed the last occurrence of the text before the cursor, so they are known
here without depending on a model.
"""
from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import pytest
import pytest_lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from support.lspclient import change, context_of, init_params, inline, open_doc, read_log, stats

LOG = Path(tempfile.mkdtemp(prefix="tabd-replan-")) / "serve.jsonl"

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEXT = "def alpha_widget(x):\n    return x\n\n\ndef beta(y):\n    return y\n\n\ndef alpha_"
OTHER = "def alpha_helper(widget):\n    return widget\n"


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(
    server_command=[sys.executable, "-m", "tabd.daemon", "serve", "--backend", "copy", "--log", str(LOG)]))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(init_params({"contextIdleMs": 100}))
    yield
    await lsp_client.shutdown_session()


async def test_tab_after_a_context_change_is_served_from_memory(client: LanguageClient):
    uri = "file:///w/a.py"
    open_doc(client, uri, TEXT)
    line, char = 8, len("def alpha_")
    shown = await inline(client, uri, line, char)
    assert shown.items and shown.items[0].insert_text == "widget(x):"
    before = await context_of(client, uri)

    open_doc(client, "file:///w/helpers.py", OTHER)  # shares identifiers: the next pick takes it
    deadline = time.monotonic() + 30
    while (await context_of(client, uri))["digest"] == before["digest"] and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    after = await context_of(client, uri)
    assert after["digest"] != before["digest"]
    assert any(c["path"].endswith("helpers.py") for c in after["chunks"])
    await asyncio.sleep(0.3)  # the re-planned prefetch is instant with the copy baseline

    change(client, uri, 2, line, char, "widget(x):")  # Tab
    await inline(client, uri, line, char + len("widget(x):"))
    deadline = time.monotonic() + 10  # the log line is written after the answer: wait for the Tab's line
    while len(lines := [e for e in read_log(LOG) if e.get("event") == "completion"]) < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    last = lines[-1]
    assert last["after_accept"] and last["origin"] == "cache"  # planned again under the new context, before the Tab
    assert (await stats(client))["context"]["changes"] >= 1

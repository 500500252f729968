"""Workspace context through a real server: it reaches the prompt, keystrokes keep it, closing drops it, warm-up reuses it.

The server runs without the completion cache and speculation, so every request
is a model run and its prompt counts in the log say what the model was given;
nothing here depends on what the model writes.
"""
from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from support.lspclient import change, context_of, end_of, init_params, inline, open_doc, read_log, stats

pytestmark = pytest.mark.asyncio(loop_scope="module")

LOG = Path(tempfile.mkdtemp(prefix="tabd-context-")) / "serve.jsonl"
IDLE_MS = 150

WIDGETS = '''class WidgetRegistry:
    """Keeps every widget by name."""

    def __init__(self):
        self.widgets_by_name = {}

    def register_widget(self, name, widget):
        self.widgets_by_name[name] = widget
        return widget

    def lookup_widget(self, name):
        return self.widgets_by_name.get(name)
'''
SECRET = "Keeps every widget by name."  # source text that must not reach the log

PANEL = '''import os


def build_panel(registry):
    panel = registry.lookup_widget("panel")
    registry.register_widget("'''

OTHER = "def unrelated():\n    return 42\n\n\ndef main():\n    value = unrelated()\n    print(value)\n"


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=[
    sys.executable, "-m", "tabd.daemon", "serve", "--no-cache", "--no-speculation", "--log", str(LOG)]))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(init_params({"contextIdleMs": IDLE_MS}))
    yield
    await lsp_client.shutdown_session()


def completions() -> list[dict]:
    return [e for e in read_log(LOG) if e.get("event") == "completion" and e.get("origin") == "model"]


async def logged(n: int) -> list[dict]:
    """The model's completion log lines once there are n: a line is written after its reply (the answer goes out
    first), so a test that reads the log as soon as the reply comes waits for it."""
    async def enough():
        got = completions()
        return got if len(got) >= n else None
    got = await until(enough)
    assert got, f"fewer than {n} completion log lines after 60 s"
    return got


async def until(predicate, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.05)


async def test_open_file_reaches_the_prompt_and_a_keystroke_keeps_it(client: LanguageClient):
    open_doc(client, "file:///w/pkg/widgets.py", WIDGETS)
    open_doc(client, "file:///w/pkg/panel.py", PANEL)
    line, char = end_of(PANEL)
    await inline(client, "file:///w/pkg/panel.py", line, char)
    ctx = await context_of(client, "file:///w/pkg/panel.py")
    assert any(c["path"].endswith("pkg/widgets.py") for c in ctx["chunks"])
    assert any("register_widget" in c["text"] for c in ctx["chunks"])
    first = (await logged(1))[-1]
    assert first["context_tokens"] > 20 and first["context_chunks"] >= 1
    assert SECRET not in LOG.read_text()  # counts and digests in the log, never the chunks' text

    change(client, "file:///w/pkg/panel.py", 2, line, char, "p")
    await inline(client, "file:///w/pkg/panel.py", line, char + 1)
    again = await context_of(client, "file:///w/pkg/panel.py")
    assert again["digest"] == ctx["digest"]
    second = (await logged(2))[-1]
    assert second["context_tokens"] == first["context_tokens"]
    # the context and the window before the keystroke come from the kept KV: only the new tokens run
    assert second["reused_tokens"] >= second["context_tokens"]
    assert second["prefill_tokens"] <= 4 and second["reuse"] >= 0.95


async def test_closing_a_file_drops_its_chunks(client: LanguageClient):
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri="file:///w/pkg/widgets.py")))

    async def dropped():
        ctx = await context_of(client, "file:///w/pkg/panel.py")
        return all(not c["path"].endswith("widgets.py") for c in ctx["chunks"]) and ctx
    ctx = await until(dropped)
    assert ctx, "the closed file's chunks stayed in the context after the idle timer"
    s = await stats(client)
    assert s["context"]["documents"] == 1
    line, char = end_of(PANEL + "p")
    await inline(client, "file:///w/pkg/panel.py", line, char)
    got = await logged(3)
    assert got[-1]["context_tokens"] < got[0]["context_tokens"]


async def test_focus_warms_up_so_the_next_request_reuses_its_prompt(client: LanguageClient):
    before = (await stats(client))["context"]["warmups"]["started"]
    open_doc(client, "file:///w/pkg/other.py", OTHER)
    client.protocol.notify("tabd/focus", {"uri": "file:///w/pkg/other.py", "position": {"line": 5, "character": 11}})

    async def warmed():  # every warm-up started since the focus has ended, and at least one finished
        w = (await stats(client))["context"]["warmups"]
        return w["started"] > before and w["finished"] + w["cancelled"] == w["started"] and w
    assert await until(warmed), "no warm-up finished after tabd/focus"
    n = len(completions())
    await inline(client, "file:///w/pkg/other.py", 5, 11)
    got = await logged(n + 1)
    assert len(got) == n + 1
    # the whole prompt was prefilled in the background: the request runs the one token it must
    assert got[-1]["prefill_tokens"] <= 1 and got[-1]["reused_tokens"] > 20

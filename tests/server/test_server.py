"""The core daemon through a real pygls server in a subprocess, driven by pytest-lsp.

The server runs the fixture model (tests/fixture_model.py), whose suggestions are
known (` total()` at a line's end), so every assertion here is about the daemon.
"""
from __future__ import annotations

import asyncio
import sys
import time

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from support.fixture_model import MODEL_DIR, SUGGESTION
from support.lspclient import change, document_text, end_of, init_params, inline, open_doc, stats, until_stats

pytestmark = pytest.mark.asyncio(loop_scope="module")

SOURCE = '''import os
import sys


def read_config(path):
    """Read a key=value file into a dict."""
    result = {}
    with open(path) as handle:
        for line in handle:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, _, value = line.partition("=")
            result[key.strip()] = value.strip()
    return result


def main(argv):
    config = read_config(argv[1])
    for key in sorted(config):
        print(key, config[key])
'''


INIT: dict = {}  # the server's InitializeResult, kept by the fixture for the capabilities test


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(
    # --min-confidence 0: these tests are about the LSP path, not about which suggestions gating would hide
    server_command=[sys.executable, "-m", "tabd.daemon", "serve", "--model", str(MODEL_DIR), "--min-confidence", "0"]))
async def client(lsp_client: LanguageClient, fixture_model):
    INIT["result"] = await lsp_client.initialize_session(init_params({"depth": 2}))
    yield
    await lsp_client.shutdown_session()


async def test_advertises_inline_completion_and_incremental_sync(client: LanguageClient):
    caps = INIT["result"].capabilities
    assert caps.inline_completion_provider
    sync = caps.text_document_sync
    kind = sync.change if isinstance(sync, types.TextDocumentSyncOptions) else sync
    assert kind == types.TextDocumentSyncKind.Incremental
    assert caps.position_encoding == types.PositionEncodingKind.Utf16  # the client offered none: LSP's default
    assert {"tabd.accept", "tabd.dismiss"} <= set(caps.execute_command_provider.commands)
    assert INIT["result"].server_info.name == "tabd"


async def test_stats_report_resident_memory_and_the_weight_format(client: LanguageClient):
    s = await until_stats(client, lambda s: s.get("engine") is not None, "the engine loaded")
    assert s["weights"].startswith("fp32 (auto: ")  # the embedded model is small: auto keeps fp32, and says so
    # the server's own resident memory: more than its runtime and the weights (107 MB torch-free with this model, the
    # torch runtime adds ~200 MB after the hand-over), far less than a second model copy
    assert (50 << 20 if s["engine"] == "torch-free" else 250 << 20) < s["rss_bytes"] < 2 << 30


ENDINGS = [
    "\n\nif __name__ == \"__main__\":\n    main(sys.",
    "\n\ndef write_config(path, config):\n    with open(path, \"w\") as handle:\n        for key in ",
    "\n\nclass Config:\n    def __init__(self, path):\n        self.",
    "\n\ndef count(items):\n    total = 0\n    for item in items:\n        total += ",
]


async def suggestion_somewhere(client, name: str) -> tuple[str, str, types.InlineCompletionItem]:
    """(uri, text, item) at the first of a few ordinary places where the model suggests something."""
    for i, ending in enumerate(ENDINGS):
        uri, text = f"file:///w/{name}{i}.py", SOURCE + ending
        open_doc(client, uri, text)
        result = await inline(client, uri, *end_of(text))
        if result.items:
            return uri, text, result.items[0]
    pytest.fail("the model suggested nothing at any of the usual places")


async def test_first_suggestion_then_tab_is_served_from_cache(client: LanguageClient):
    uri, text, item = await suggestion_somewhere(client, "accept")
    line, char = end_of(text)
    assert item.insert_text == SUGGESTION
    assert item.range.start == types.Position(line=line, character=char) == item.range.end
    assert item.command.command == "tabd.accept"
    before = await stats(client)
    # Tab: the editor inserts the text, then runs the item's command.
    change(client, uri, 2, line, char, item.insert_text)
    await asyncio.wait_for(
        client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="tabd.accept", arguments=[item.command.arguments[0]])
        ),
        30,
    )
    # the state after Tab was prefetched when the suggestion showed: it may have finished before `before` was read
    await until_stats(client, lambda s: s["prefetch"]["started"] > 0 and s["prefetch"]["started"] == (
        s["prefetch"]["finished"] + s["prefetch"]["cancelled"] + s["prefetch"].get("preempted", 0)),
        "the prefetch of the state after Tab, and none in flight")
    line2, char2 = end_of(text + item.insert_text)
    await inline(client, uri, line2, char2)
    after = await stats(client)
    assert after["sources"]["cache"] == before["sources"]["cache"] + 1
    assert after["last"]["source"] == "cache"
    assert after["after_accept"]["requests"] == before["after_accept"]["requests"] + 1
    assert after["after_accept"]["from_cache"] == before["after_accept"]["from_cache"] + 1
    assert after["accepts"] == before["accepts"] + 1


async def test_typing_into_a_suggestion_is_served_without_the_model(client: LanguageClient):
    uri, text, item = await suggestion_somewhere(client, "typed")
    line, char = end_of(text)
    suggestion = item.insert_text
    assert suggestion == SUGGESTION
    before = await stats(client)
    change(client, uri, 2, line, char, suggestion[:2])
    line2, char2 = end_of(text + suggestion[:2])
    second = await inline(client, uri, line2, char2)
    after = await stats(client)
    assert second.items[0].insert_text == suggestion[2:]
    assert after["sources"]["typed"] == before["sources"]["typed"] + 1
    assert after["requests_to_model"]["started"] == before["requests_to_model"]["started"]


async def test_utf16_positions_with_emoji_and_cjk(client: LanguageClient):
    uri = "file:///w/unicode.py"
    text = 'greeting = "😀 你好"  # 😀\nname = "'
    open_doc(client, uri, text)
    # after '"😀 ' on line 0: the emoji is 2 UTF-16 units, so character 15 is right after the space
    change(client, uri, 2, 0, 15, "x")
    assert await document_text(client, uri) == 'greeting = "😀 x你好"  # 😀\nname = "'
    # a position inside the surrogate pair is clamped, never an error
    result = await inline(client, uri, 0, 13)
    assert [item.insert_text for item in result.items] == [SUGGESTION]
    assert result.items[0].range.start == types.Position(line=0, character=12)
    result = await inline(client, uri, 1, 8)
    assert [item.insert_text for item in result.items] == [SUGGESTION]
    assert result.items[0].range.start == types.Position(line=1, character=8)


async def test_unknown_document_is_a_clear_error(client: LanguageClient):
    with pytest.raises(Exception) as info:
        await inline(client, "file:///w/never-opened.py", 0, 0)
    assert "not open" in str(info.value)


async def test_positions_out_of_range_are_clamped(client: LanguageClient):
    uri = "file:///w/range.py"
    text = "def f(x):\n    return x\n"
    open_doc(client, uri, text)
    result = await inline(client, uri, 999, 999)
    assert len(result.items) == 1
    assert result.items[0].range.start == types.Position(line=2, character=0)
    result = await inline(client, uri, 0, 999)
    assert len(result.items) == 1
    assert result.items[0].range.start == types.Position(line=0, character=9)


async def test_bad_params_and_unknown_methods_get_error_codes(client: LanguageClient):
    # params that do not parse are sent as raw JSON in tests/unit/test_error_codes.py (pygls' client refuses to send them)
    proto = client.protocol
    with pytest.raises(Exception) as info:
        await asyncio.wait_for(proto.send_request_async("tabd/no-such-method", {}), 30)
    assert "-32601" in repr(info.value) or "not found" in str(info.value).lower()
    with pytest.raises(Exception) as info:
        await asyncio.wait_for(
            client.workspace_execute_command_async(types.ExecuteCommandParams(command="tabd.accept", arguments=[{"bad": 1}])), 30
        )
    assert "tabd.accept expects" in str(info.value)
    # the next good request works
    assert (await stats(client))["model"]


async def test_a_200k_line_document_is_answered(client: LanguageClient):
    uri = "file:///w/huge.py"
    text = "".join(f"value_{i} = {i}\n" for i in range(200_000))
    open_doc(client, uri, text)
    t0 = time.monotonic()
    change(client, uri, 2, 100_000, 0, "x")
    result = await inline(client, uri, 200_000, 0, timeout=120)
    assert isinstance(result, types.InlineCompletionList)
    assert time.monotonic() - t0 < 120
    assert (await document_text(client, uri)).startswith("value_0 = 0\n")


async def test_completion_request_returns_the_same_suggestion(client: LanguageClient):
    uri = "file:///w/plain.py"
    text = SOURCE + "\n\ndef other(path):\n    return read_config("
    open_doc(client, uri, text)
    line, char = end_of(text)
    inline_result = await inline(client, uri, line, char)
    result = await asyncio.wait_for(
        client.text_document_completion_async(
            types.CompletionParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=char))
        ),
        60,
    )
    items = result.items if hasattr(result, "items") else result
    assert [i.insert_text for i in inline_result.items] == [SUGGESTION]
    assert [i.text_edit.new_text for i in items] == [SUGGESTION]
    assert items[0].text_edit.range.start == types.Position(line=line, character=char)
    assert items[0].command.command == "tabd.accept"


@pytest.mark.slow
async def test_a_request_cancelled_while_the_model_loads_does_not_break_the_server():
    """Editors cancel requests while typing; the first ones arrive while the model still loads."""
    from pygls.lsp.client import LanguageClient as Client
    from lsprotocol.types import CancelParams

    from support.lspclient import CAPS

    client = Client("t", "1")
    await client.start_io(sys.executable, "-m", "tabd.daemon", "serve")
    try:
        await client.initialize_async(types.InitializeParams(capabilities=CAPS))
        client.initialized(types.InitializedParams())
        uri = "file:///w/cancel.py"
        open_doc(client, uri, "def main():\n    return ")
        params = types.InlineCompletionParams(
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=1, character=11),
        )
        for msg_id in (4242, 4243, 4244):  # typing: each keystroke cancels the last request
            client.protocol.send_request(types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id)
            await asyncio.sleep(0.05)  # the model is still loading
            client.cancel_request(CancelParams(id=msg_id))
        result = await inline(client, uri, 1, 11, timeout=120)
        assert isinstance(result, types.InlineCompletionList)
        assert (await stats(client))["model"] != "loading"
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(
    server_command=[sys.executable, "-m", "tabd.daemon", "serve", "--model", str(MODEL_DIR), "--no-kv-reuse", "--depth", "1"]))
async def cold_client(lsp_client: LanguageClient, fixture_model):
    """A server that recomputes every prompt: a prefetch of a long prompt takes a few hundred ms to prefill."""
    await lsp_client.initialize_session(init_params())
    yield
    await lsp_client.shutdown_session()


async def test_a_tab_while_its_prefetch_computes_is_answered_in_flight(cold_client: LanguageClient):
    uri = "file:///w/inflight.py"
    text = SOURCE * 6 + "\n\nif __name__ == \"__main__\":\n    main(sys."  # ~2,400 characters before the cursor
    open_doc(cold_client, uri, text)
    line, char = end_of(text)
    first = await inline(cold_client, uri, line, char)
    assert [i.insert_text for i in first.items] == [SUGGESTION]
    # Tab at once: the prefetch of the state after it was queued before the answer was sent, and its prefill
    # (~800 tokens, no KV reuse) is still running when this request arrives.
    change(cold_client, uri, 2, line, char, SUGGESTION)
    line2, char2 = end_of(text + SUGGESTION)
    second = await inline(cold_client, uri, line2, char2)
    after = await stats(cold_client)
    assert [i.insert_text for i in second.items] == ["\n total()"]
    assert after["last"]["source"] == "inflight"
    assert after["sources"]["inflight"] == 1
    assert after["prefetch"]["started"] >= 1 and after["requests_to_model"]["started"] == 1

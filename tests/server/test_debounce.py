"""The server's debounce, through a real `tabd serve` with the fixture model (tests/fixture_model.py).

Only a request that needs the model waits; answers from memory go out with a recorded wait of 0; a newer
keystroke during the wait answers the waiting request empty and it never reaches the model. The base is set
high (1000 ms, the ceiling) so every wait here is exactly that long and a keystroke surely lands inside it.
"""
from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from support.fixture_model import MODEL_DIR, SUGGESTION
from support.lspclient import change, init_params, inline, open_doc, read_log, stats, until_stats

pytestmark = pytest.mark.asyncio(loop_scope="module")
LOG = Path(tempfile.mkdtemp(prefix="tabd-debounce-")) / "serve.jsonl"
BASE_MS = 1000
INIT: dict = {}
BODY = "def count(items):\n    total = 0\n    for item in items:\n        total += 1\n    return"


def text(name: str) -> str:
    """A document of its own per test (the same text would be answered from the cache the last test filled)."""
    return f"# {name}\n" + BODY


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=[
    sys.executable, "-m", "tabd.daemon", "serve", "--model", str(MODEL_DIR), "--min-confidence", "0",
    "--debounce-ms", str(BASE_MS), "--log", str(LOG)]))
async def client(lsp_client: LanguageClient, fixture_model):
    INIT["result"] = await lsp_client.initialize_session(init_params({"depth": 1}))
    yield
    await lsp_client.shutdown_session()


def completions() -> list[dict]:
    return [e for e in read_log(LOG) if e.get("event") == "completion"]


async def test_the_server_says_it_debounces(client: LanguageClient):
    assert INIT["result"].capabilities.experimental["tabd"]["debounceMs"] == BASE_MS


async def test_a_lone_request_is_answered_after_its_debounce(client: LanguageClient):
    await until_stats(client, lambda s: s["engine"] is not None, "the model loads", every=0.02)
    uri = "file:///w/lone.py"
    open_doc(client, uri, text("lone"))
    before = await stats(client)
    result = await inline(client, uri, 5, 10)
    assert result.items and result.items[0].insert_text == SUGGESTION
    s = await stats(client)
    assert s["last"]["source"] == "model" and s["last"]["debounce_ms"] == BASE_MS
    assert s["debounce"]["waited"] == before["debounce"]["waited"] + 1
    assert s["requests_to_model"]["started"] == before["requests_to_model"]["started"] + 1
    await until_stats(client, lambda s: any(e["source"] == "model" for e in completions()), "the log line", every=0.02)
    line = [e for e in completions() if e["source"] == "model"][-1]
    assert line["debounce_ms"] == BASE_MS and line["debounce_why"]


async def test_answers_from_memory_are_not_delayed(client: LanguageClient):
    uri = "file:///w/hit.py"
    open_doc(client, uri, text("hit"))
    before = await stats(client)
    first = await inline(client, uri, 5, 10)
    assert first.items[0].insert_text == SUGGESTION
    change(client, uri, 2, 5, 10, SUGGESTION[:2])  # typing into the suggestion: type-through
    typed = await inline(client, uri, 5, 12)
    assert typed.items[0].insert_text == SUGGESTION[2:]
    s = await stats(client)
    assert s["last"]["source"] == "typed" and s["last"]["debounce_ms"] == 0
    await until_stats(client, lambda s: s["prefetch"]["finished"] > before["prefetch"]["finished"] and s["queue_depth"] == 0,
                      "the prefetch after the suggestion", every=0.02)
    change(client, uri, 3, 5, 12, SUGGESTION[2:])  # Tab: the rest inserted, the next suggestion is in the cache
    await inline(client, uri, 5, 10 + len(SUGGESTION))
    s = await stats(client)
    assert s["last"]["source"] == "cache" and s["last"]["debounce_ms"] == 0
    await until_stats(client, lambda s: len([e for e in completions() if e["doc"] == completions()[-1]["doc"]]) >= 3,
                      "three log lines", every=0.02)
    mine = [e for e in completions() if e["doc"] == completions()[-1]["doc"]]
    assert [(e["source"], e["debounce_ms"]) for e in mine[-2:]] == [("typed", 0), ("cache", 0)]


async def test_a_keystroke_during_the_debounce_answers_empty_and_skips_the_model(client: LanguageClient):
    uri = "file:///w/burst.py"
    open_doc(client, uri, text("burst"))
    before = await stats(client)
    waiting = asyncio.ensure_future(inline(client, uri, 5, 10))
    await until_stats(client, lambda s: s["debounce"]["waiting"] == 1, "the request waits out its debounce", every=0.02)
    change(client, uri, 2, 5, 10, " ")  # the next keystroke, before the wait ran out
    assert list((await waiting).items) == []
    s = await stats(client)
    assert s["debounce"]["superseded"] == before["debounce"]["superseded"] + 1
    assert s["requests_to_model"]["started"] == before["requests_to_model"]["started"]  # it never reached the model
    assert s["last"]["reason"] == "debounced"  # what the client shows: waiting for typing to pause
    await inline(client, uri, 5, 11)  # the newer request goes on to the model after its own wait
    s = await stats(client)
    assert s["requests_to_model"]["started"] == before["requests_to_model"]["started"] + 1
    cancels = [e for e in read_log(LOG) if e.get("event") == "cancel" and e.get("reason") == "stale"]
    assert cancels and cancels[-1]["debounce_ms"] < BASE_MS


async def test_a_newer_request_supersedes_one_still_waiting(client: LanguageClient):
    uri = "file:///w/move.py"
    open_doc(client, uri, text("move"))
    before = await stats(client)
    older = asyncio.ensure_future(inline(client, uri, 5, 10))
    await until_stats(client, lambda s: s["debounce"]["waiting"] == 1, "the request waits out its debounce", every=0.02)
    newer = asyncio.ensure_future(inline(client, uri, 4, 18))  # the cursor moved: no edit, a new request
    assert list((await older).items) == []
    await newer
    s = await stats(client)
    assert s["debounce"]["superseded"] == before["debounce"]["superseded"] + 1
    assert s["requests_to_model"]["started"] == before["requests_to_model"]["started"] + 1
    await until_stats(client, lambda s: any(e["doc"] == completions()[-1]["doc"] and e["source"] == "none"
                                            for e in completions()), "the older request's log line", every=0.02)
    older_line = next(e for e in completions() if e["doc"] == completions()[-1]["doc"] and e["source"] == "none")
    assert older_line["reason"] == "superseded"


async def test_a_client_cancel_during_the_debounce_gets_an_error_and_no_model_call(client: LanguageClient):
    uri = "file:///w/cancel.py"
    open_doc(client, uri, text("cancel"))
    before = await stats(client)
    params = types.InlineCompletionParams(
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=5, character=10))
    fut = client.protocol.send_request(types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=777001)
    await until_stats(client, lambda s: s["debounce"]["waiting"] == 1, "the request waits out its debounce", every=0.02)
    client.cancel_request(types.CancelParams(id=777001))
    with pytest.raises(Exception, match="(?i)cancel"):
        await asyncio.wait_for(asyncio.wrap_future(fut) if not asyncio.isfuture(fut) else fut, 30)
    s = await until_stats(client, lambda s: s["debounce"]["waiting"] == 0, "the wait ends", every=0.02)
    assert s["requests_to_model"]["started"] == before["requests_to_model"]["started"]


async def test_the_wait_follows_the_rhythm_and_the_model():
    """The rule itself, on plain numbers: no wait for a model well inside the typing gap, else min(rhythm, model)."""
    from tabd.daemon.runtime.debounce import Debounce

    d = Debounce(20)
    assert d.wait_for("a").ms == 20  # nothing measured yet: the base
    for i in range(6):
        d.edited("a", i * 0.150)  # typing at 150 ms a key
    d.model_answered(10)  # the embedded model: about 10 ms
    assert d.wait_for("a").ms == 0
    slow = Debounce(20)
    for i in range(6):
        slow.edited("a", i * 0.150)
    slow.model_answered(300)  # a 0.5B model: the wait is the typing gap
    assert slow.wait_for("a").ms == 150
    assert slow.wait_for("a", invoked=True).ms == 0 and slow.wait_for("a", after_accept=True).ms == 0
    assert Debounce(0).wait_for("a").ms == 0


async def test_the_wait_grows_with_the_model_s_share_of_the_gap():
    """Between half the typing gap and all of it the wait grows in proportion: a few percent more model latency
    (others' prefetches on a shared engine) is a few ms more wait, not a step from nothing to most of the gap
    (it was, and a fleet's users with speculation on waited for a third more of their requests than with it off)."""
    from tabd.daemon.runtime.debounce import Debounce

    def wait(model_ms: float) -> float:
        d = Debounce(20)
        for i in range(6):
            d.edited("a", i * 0.120)  # typing at 120 ms a key
        d.model_answered(model_ms)
        return d.wait_for("a").ms

    assert wait(58) == 0  # inside half the gap: no wait
    waits = [wait(m) for m in range(58, 162, 2)]
    assert waits == sorted(waits)
    assert max(b - a for a, b in zip(waits, waits[1:])) <= 20  # the base (the floor when it waits) is the one step
    assert wait(90) == pytest.approx(45, abs=0.5)  # three quarters of the gap: half of min(rhythm, model)
    assert wait(120) == wait(300) == 120  # the whole gap from there on

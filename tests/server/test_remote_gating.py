"""Confidence gating on a remote engine: a real `tabd serve --backend openai` in front of a real HTTP engine on
127.0.0.1 (tests/support/stub_model.py) that streams each token's OpenAI `logprobs`. The editor is shown the part of
the suggestion the model is sure of as a whole (--min-confidence, 0.4 by default), as with the local backend; an
engine that refuses the field gets the whole suggestion shown, and tabd/stats says its answers carry no
probabilities."""
from __future__ import annotations

import asyncio
import os
import sys

import pytest

from support.stub_model import stub_model
from tabd.lsp.client import Client

TEXT = "def total(items):\n    "


async def shown(url: str, tmp_path, *extra: str, invoked: tuple[bool, ...] = (False,)) -> tuple[list[str], dict]:
    """What the editor is shown at the end of TEXT, for each request in `invoked` in turn (the last one's items),
    and tabd/stats after."""
    client = Client("test-remote-gating")
    await client.start([sys.executable, "-m", "tabd.daemon", "serve", "--backend", "openai", "--url", url,
                        "--fim", "tabd", "--debounce-ms", "0", "--no-warmup", *extra], env=dict(os.environ))
    try:
        await client.initialize(root_uri=(tmp_path / "w").as_uri())
        uri = (tmp_path / "w" / "total.py").as_uri()
        client.open(uri, "python", 1, TEXT)
        for how in invoked:
            future = client.inline_completion(uri, {"line": 1, "character": 4}, invoked=how)
            result = await asyncio.wait_for(asyncio.wrap_future(future), 60)
        stats = await asyncio.wait_for(asyncio.wrap_future(client.request("tabd/stats", {})), 30)
        await asyncio.wait_for(client.shutdown(), 30)
    finally:
        await client.stop()
    return [item["insertText"] for item in result["items"]], stats


@pytest.mark.asyncio
async def test_a_remote_suggestion_is_shown_as_far_as_the_model_is_sure(tmp_path):
    with stub_model("tokens") as (engine, url):
        engine.tokens = [("return", 0.95), (" sum", 0.9), ("(x * 3", 0.2), (" for x in items)", 0.9)]
        texts, stats = await shown(url, tmp_path)
        assert texts == ["return sum"]  # 0.95 * 0.9 >= 0.4; with "(x * 3" the whole is 0.17
        assert stats["engine_confidence"] is True
        assert all(body.get("logprobs") == 0 for body in engine.bodies)
        texts, _ = await shown(url, tmp_path, "--min-confidence", "0")
        assert texts == ["return sum(x * 3 for x in items)"]  # gating off: all of it


@pytest.mark.asyncio
async def test_an_engine_without_probabilities_has_its_suggestion_shown_whole(tmp_path):
    with stub_model("tokens") as (engine, url):
        engine.tokens = [("return", 0.95), (" sum", 0.9), ("(x * 3", 0.2), (" for x in items)", 0.9)]
        engine.refuse_logprobs = True
        texts, stats = await shown(url, tmp_path)
        assert texts == ["return sum(x * 3 for x in items)"]
        assert stats["engine_confidence"] is False


@pytest.mark.asyncio
async def test_the_engine_decodes_no_further_than_what_is_shown_and_an_invoked_request_gets_it_all(tmp_path):
    """An automatic request's stream is closed once the model's joint probability falls under the gate: the engine's
    decode after that is another user's time. Asking with Alt+\\ (invoked) shows the best guess whole, so it is
    decoded whole, not taken from the cut answer in the cache."""
    with stub_model("tokens") as (engine, url):
        engine.token_gap = 0.2
        engine.tokens = [("return", 0.95), (" sum", 0.9), ("(x * 3", 0.2)] + [(" + 1", 0.9)] * 20
        texts, _ = await shown(url, tmp_path)
        assert texts == ["return sum"]
        assert engine.closed.wait(5)  # tabd hung up on the engine mid-answer
        engine.token_gap, engine.tokens = 0.0, engine.tokens[:5]
        texts, stats = await shown(url, tmp_path, invoked=(False, True))
        assert texts == ["return sum(x * 3 + 1 + 1"]
        assert stats["last"]["source"] == "model"


@pytest.mark.asyncio
async def test_a_suggestion_cut_at_its_first_token_is_unsure_not_nothing(tmp_path):
    """The decode stops after the token that takes the joint under the gate, with that token: the answer then says
    the model was unsure (its layer hid it), as it would with the whole suggestion, not that it had nothing."""
    with stub_model("tokens") as (engine, url):
        engine.token_gap, engine.text_lag = 0.1, True
        engine.tokens = [("maybe", 0.2)] + [("_this()", 0.9)] * 20
        texts, stats = await shown(url, tmp_path)
        assert texts == []
        assert (stats["last"]["source"], stats["last"]["reason"]) == ("model", "unsure")
        assert engine.closed.wait(5)

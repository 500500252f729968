"""The per-request budget on a remote engine (--max-prompt-ms, --max-predict-ms), as llama.vim sends it: a real
`tabd serve --backend openai` in front of a real HTTP engine on 127.0.0.1 (tests/support/stub_model.py) that records
what it was asked. llama-server gets llama.vim's `t_max_prompt_ms` / `t_max_predict_ms` on the requests a user waits
for; an engine without them has its stream cut once the decode budget is spent (the answer is what came) and is
asked for no more `max_tokens` than its measured decode rate fits in the budget."""
from __future__ import annotations

import asyncio
import json
import math
import os
import sys

import pytest

from support.stub_model import stub_model
from tabd.lsp.client import Client


def sent_limit(tmp_path, prompt_ms: int) -> set[int]:
    """The t_max_prompt_ms the first request must have been sent: --max-prompt-ms less what it waited before its call,
    in whole ms rounded up, as its log line's wait_ms says. The log writes the wait to the thousandth of a ms, so a
    wait within half a thousandth of a whole ms could have been sent either side of it: both are allowed then."""
    lines = [json.loads(line) for line in (tmp_path / "budget.log").read_text().splitlines()]
    wait = next(e for e in lines if e["event"] == "completion").get("wait_ms", 0.0)
    return {max(1, math.ceil(prompt_ms - wait + d)) for d in (-5e-4, 5e-4)}


async def ask(url: str, tmp_path, text: str, *extra: str, keys: str = "") -> list[str]:
    """What the editor is shown at the end of the first line of `text`, then after each of `keys` typed there; the
    server's log in tmp_path/budget.log (a fresh one each time)."""
    log = tmp_path / "budget.log"
    log.unlink(missing_ok=True)
    client = Client("test-remote-budget")
    await client.start([sys.executable, "-m", "tabd.daemon", "serve", "--backend", "openai", "--url", url,
                        "--debounce-ms", "0", "--no-warmup", "--min-confidence", "0", "--log", str(log), *extra],
                       env=dict(os.environ))
    shown = []
    try:
        await client.initialize(root_uri=(tmp_path / "w").as_uri())
        uri = (tmp_path / "w" / "budget.py").as_uri()
        line, _, rest = text.partition("\n")
        client.open(uri, "python", 1, text)
        for version, key in enumerate([""] + list(keys), start=1):
            if key:
                line += key
                client.change(uri, version, None, line + "\n" + rest)
            future = client.inline_completion(uri, {"line": 0, "character": len(line)})
            result = await asyncio.wait_for(asyncio.wrap_future(future), 60)
            shown.append(result["items"][0]["insertText"] if result["items"] else "")
        await asyncio.wait_for(client.shutdown(), 30)
    finally:
        await client.stop()
    return shown


@pytest.mark.asyncio
async def test_llama_server_is_sent_llama_vims_time_limits_on_the_request_the_user_waits_for(tmp_path):
    with stub_model("infill") as (engine, url):
        engine.props = {"default_generation_settings": {}, "total_slots": 1}  # llama-server: /infill is there
        shown = await ask(url, tmp_path, "x = \n", "--max-prompt-ms", "300", "--max-predict-ms", "700")
        assert shown == ["42"] and engine.hits[0] == "/infill"
        asked = engine.bodies[0]
        assert asked["t_max_prompt_ms"] in sent_limit(tmp_path, 300) and asked["t_max_predict_ms"] == 700, asked
        # the prefetches that follow (the state after a Tab) have no one waiting for them: no limit
        later = [b for b in engine.bodies[1:] if b.get("input_prefix") != "x = "]
        assert all("t_max_predict_ms" not in b and "t_max_prompt_ms" not in b for b in later)


@pytest.mark.asyncio
async def test_llama_servers_openai_route_gets_the_limits_too_and_zero_sends_none(tmp_path):
    with stub_model("tokens") as (engine, url):
        engine.models = [{"id": "qwen2.5-coder-0.5b", "owned_by": "llamacpp"}]
        engine.tokens = [("1", 0.99)]
        await ask(url, tmp_path, "x = \n", "--max-prompt-ms", "250", "--max-predict-ms", "900")
        first = engine.bodies[0]
        assert first["t_max_prompt_ms"] in sent_limit(tmp_path, 250) and first["t_max_predict_ms"] == 900, first
        assert engine.bodies[0]["cache_prompt"] is True
        engine.bodies.clear()
        await ask(url, tmp_path, "x = \n", "--max-prompt-ms", "0", "--max-predict-ms", "0")
        assert engine.bodies and not any(k.startswith("t_max") for b in engine.bodies for k in b)


@pytest.mark.asyncio
async def test_an_engine_without_time_limits_has_its_stream_cut_at_the_budget_and_its_max_tokens_sized_by_it(tmp_path):
    """A stream of 60 tokens 50 ms apart (3 s): the decode budget of 600 ms ends it early, tabd hangs up on the
    engine, and the next request asks for no more tokens than the rate it measured fits in the budget."""
    with stub_model("tokens") as (engine, url):
        engine.token_gap = 0.05
        engine.tokens = [("y", 0.999)] + [("z", 0.999)] * 59
        shown = await ask(url, tmp_path, "x = \n", "--fim", "tabd", "--max-predict-ms", "600", "--no-speculation",
                          keys="(")
        assert engine.closed.wait(10)  # tabd hung up on the engine mid-answer
        whole = "y" + "z" * 59
        assert shown[0] and whole.startswith(shown[0]) and len(shown[0]) < len(whole)
        first, second = engine.bodies[0], engine.bodies[1]
        assert "t_max_predict_ms" not in first and first["max_tokens"] == 48  # no rate measured yet: the setting's
        assert 1 <= second["max_tokens"] < 48

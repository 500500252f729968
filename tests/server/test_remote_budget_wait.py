"""A request's wait before its call counts against its budget on a remote engine too (issue 43), through a real
`tabd serve --backend openai` in front of a real HTTP engine on 127.0.0.1 (tests/support/stub_model.py) that records
what it was asked.

The engine is llama-server's /v1/completions (owned_by llamacpp: sent llama.vim's t_max_prompt_ms and
t_max_predict_ms), streaming 60 tokens 50 ms apart. Document A's request is in flight when document B's comes: B
pre-empts it (tabd hangs up on the engine), runs for its decode budget (its stream is cut 1 s after its first token,
with 2 s still to come), and then A is asked again. By then A has waited more than B's second: its prefill budget
(300 ms) is used up and its decode budget (1,000 ms) has lost what the wait took past it, so the engine is sent the
floor and what is left, and A's log line says how long it waited. Asserted on the fields sent and the log, whose
bounds follow from the engine's own pace (B's stream outlasts B's budget), never on a clock of tabd's.
"""
from __future__ import annotations

import asyncio
import os
import sys

import pytest

from support.lspclient import read_log
from support.stub_model import stub_model
from tabd.daemon.bench.turns import doc_hash
from tabd.lsp.client import Client
from tabd.predictor.backends.remote import BUDGET_FLOOR_MS

PROMPT_MS, PREDICT_MS = 300, 1000
GAP_MS = 50  # the engine's time between tokens


def sent_for(bodies: list[dict], text: str) -> list[dict]:
    """The completion requests whose prompt holds `text` (a document's line), in the order the engine got them."""
    return [b for b in bodies if text in b.get("prompt", "")]


async def paused_behind(tmp_path, models: list[dict], *extra: str) -> tuple[list[dict], list[dict], dict]:
    """Document A asked, and document B while A's call streams: the bodies the engine got for A and for B, in order,
    and A's completion log line. Both answers are checked to have come."""
    log = tmp_path / "tabd.jsonl"
    with stub_model("tokens") as (engine, url):
        engine.models = models
        engine.token_gap = GAP_MS / 1000
        engine.tokens = [("1", 0.99)] * 60  # a 3 s stream: longer than any budget here
        client = Client("test-remote-budget-wait")
        await client.start([sys.executable, "-m", "tabd.daemon", "serve", "--backend", "openai", "--url", url,
                            "--debounce-ms", "0", "--no-warmup", "--no-speculation", "--min-confidence", "0",
                            "--max-prompt-ms", str(PROMPT_MS), "--max-predict-ms", str(PREDICT_MS),
                            "--log", str(log), *extra], env=dict(os.environ))
        try:
            await client.initialize(root_uri=(tmp_path / "w").as_uri())
            a, b = ((tmp_path / "w" / f"{name}.py").as_uri() for name in ("a", "b"))
            client.open(a, "python", 1, "alpha = \n")
            client.open(b, "python", 1, "beta = \n")
            a_future = client.inline_completion(a, {"line": 0, "character": len("alpha = ")})
            for _ in range(1000):  # A's call is at the engine, streaming (for its budget's second at least)
                if sent_for(engine.bodies, "alpha = "):
                    break
                await asyncio.sleep(0.01)
            b_future = client.inline_completion(b, {"line": 0, "character": len("beta = ")})
            results = await asyncio.wait_for(
                asyncio.gather(asyncio.wrap_future(a_future), asyncio.wrap_future(b_future)), 60)
            await asyncio.wait_for(client.shutdown(), 30)
        finally:
            await client.stop()
    for result in results:  # both answered, A with what its engine had by its budget's end
        assert result["items"] and result["items"][0]["insertText"].startswith("1")
    a_sent, b_sent = sent_for(engine.bodies, "alpha = "), sent_for(engine.bodies, "beta = ")
    assert len(a_sent) == 2 and len(b_sent) == 1  # A's call, hung up on for B's, then A's again after B's
    lines = {e["doc"]: e for e in read_log(log) if e["event"] == "completion"}
    a_line = lines[doc_hash(a)]
    assert a_line["source"] == "model" and a_line["preemptions"] == 1
    assert a_line["wait_ms"] >= PREDICT_MS  # its wait, taken from its budgets, in the log: B's run at least
    return a_sent, b_sent, a_line


@pytest.mark.asyncio
async def test_a_request_paused_behind_another_documents_is_sent_what_its_wait_left_of_the_budgets(tmp_path):
    a_sent, b_sent, _ = await paused_behind(tmp_path, [{"id": "qwen2.5-coder-0.5b", "owned_by": "llamacpp"}])
    first, again = a_sent
    # asked again after B's second-long run, A's prefill budget is used up (the floor, never 0: no limit to
    # llama-server) and its decode budget lost what the wait took past the prefill's: B's run less 300 ms at least
    assert again["t_max_prompt_ms"] == BUDGET_FLOOR_MS
    assert BUDGET_FLOOR_MS <= again["t_max_predict_ms"] <= PREDICT_MS - (PREDICT_MS - PROMPT_MS)
    # asked on a free engine, A had more of both; B, asked while A's call ran, waited only for tabd to hang up on it
    for asked in (first, b_sent[0]):
        assert asked["t_max_prompt_ms"] > again["t_max_prompt_ms"]
        assert asked["t_max_predict_ms"] > again["t_max_predict_ms"]


@pytest.mark.asyncio
async def test_an_engine_without_time_fields_is_asked_for_the_tokens_that_what_the_wait_left_fits(tmp_path):
    """The same order on an engine that takes no time limits: B's run (cut 1 s after its first token) measured its
    decode rate, at least GAP_MS a token, and A asked again is asked for no more tokens than the 300 ms at most that
    its wait left of the decode budget fit (1,000 ms, before: 20 tokens and more)."""
    a_sent, b_sent, _ = await paused_behind(tmp_path, [], "--fim", "tabd")
    first, again = a_sent
    assert not any(k.startswith("t_max") for k in again)
    assert first["max_tokens"] == b_sent[0]["max_tokens"] == 48  # no rate measured yet: the setting's
    assert 1 <= again["max_tokens"] <= (PREDICT_MS - (PREDICT_MS - PROMPT_MS)) // GAP_MS + 1

"""A request's wait before its run counts against its prefill budget (issue 43), through `tabd serve`.

The budget (--max-prompt-ms, llama.vim's t_max_prompt_ms) bounds how long the
user waits for a suggestion, so a request that waited behind work already under
way (a cold document's whole-window warm-up, run in one chunk here) has less of
it left: it runs on a shorter window than the same cold prompt asked with the
worker free, instead of waiting the whole budget again on top of its wait.

The model is the fixture model (` total()` at the end of any line), loaded as
users load theirs. At its size a 6,000-character prompt prefills in tens of ms;
the child runs every pass 1 ms a token slower (a real model's order of speed on
a laptop) and each prefill in one chunk (as a slow machine's chunk takes long),
so the wait is seconds against a 600 ms budget. What is asserted is read from
the server's log, in tokens and characters, never from a clock.
"""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
from support.lspclient import read_log
from support.rawserver import RawServer

from tabd.daemon.bench.preempt import long_text
from tabd.daemon.bench.turns import doc_hash

SLOW = 0.001  # seconds a token added to every model pass
LAUNCH = ("import runpy, sys, time; import tabd.predictor.engine.generate as g, tabd.predictor.engine.chunking as c; "
          "g.chunk_for = lambda parameters: 4096; c.chunk_within = lambda largest, ms, most=0: largest; "
          "run = g.forward_last; "
          f"g.forward_last = lambda model, ids, cache: (time.sleep({SLOW} * len(ids)), run(model, ids, cache))[1]; "
          "sys.argv = ['tabd', *sys.argv[1:]]; runpy.run_module('tabd.daemon', run_name='__main__')")
OPTIONS = {"debounceMs": 0, "speculation": False, "warmup": False, "minConfidence": 0, "contextTokens": 0,
           "prefixChars": 8000}
SHORTEST = 64  # tokens: the shortest window (32 tokens of text, a line or two) and its template's markers


def slow_machine(cmd, **kwargs):
    """`tabd serve` (cmd is [python, -m, tabd.daemon, serve, ...]) whose passes take SLOW a token more, in one chunk."""
    return subprocess.Popen([sys.executable, "-c", LAUNCH, *cmd[3:]], **kwargs)


def end(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines) - 1, len(lines[-1])


def cold_text(turn: int = 0) -> str:
    """6,000 characters of code, its lines turned by `turn` thousand characters (another file, as the model sees it)."""
    text = long_text(6000)
    text = text[turn * 1000 :] + text[: turn * 1000]
    return text[: text.rfind("\n")] + "\nx = 1"  # ends a line: the fixture model writes ` total()` there


@pytest.mark.slow
def test_a_cold_request_that_waited_behind_a_warmup_runs_on_a_shorter_window_than_one_asked_on_a_free_worker(
        tmp_path, fixture_model):
    log = tmp_path / "tabd.jsonl"
    s = RawServer("--model", fixture_model, "--log", str(log), "--max-prompt-ms", "600", "--max-predict-ms", "0",
                  stderr=tmp_path / "stderr.txt", popen=slow_machine)
    docs = {name: f"file:///w/{name}.py" for name in ("b1", "b2", "c", "a")}
    try:
        s.initialize(OPTIONS)
        # two prompts of ~300 tokens measure the prefill's speed (a model's first pass is not its rate)
        for i, name in enumerate(("b1", "b2")):
            text = "".join(f"def f{i}_{j}(x):\n    return x * {j} + {i}\n" for j in range(30)) + "y = 2"
            s.open(docs[name], text)
            assert s.inline(docs[name], *end(text))["result"]["items"]
        text, a_text = cold_text(), cold_text(3)  # the same size, other lines: nothing of A is kept from C
        s.open(docs["c"], text)
        s.open(docs["a"], a_text)
        # C, cold, with the worker free: a short window that fits the budget; its whole window is then prefilled in
        # the background, in one chunk of seconds
        c_reply = s.inline(docs["c"], *end(text))
        time.sleep(0.5)  # the warm-up is into its chunk (it takes seconds), past its check for a request waiting
        a_reply = s.inline(docs["a"], *end(a_text), timeout=120)  # A, as cold as C, asked during that chunk
        assert s.shutdown_exit() == 0
    finally:
        s.close()
    lines = {e["doc"]: e for e in read_log(log) if e["event"] == "completion"}
    c_line, a_line = lines[doc_hash(docs["c"])], lines[doc_hash(docs["a"])]
    for reply in (c_reply, a_reply):
        assert [item["insertText"] for item in reply["result"]["items"]] == [" total()"]
    assert c_line["source"] == a_line["source"] == "model"
    # both ran on the lines nearest the cursor; A on fewer, for the budget its wait had used
    assert a_line["window_chars"] < c_line["window_chars"] < len(text)
    assert a_line["prefill_tokens"] + a_line["reused_tokens"] <= SHORTEST
    assert c_line["prefill_tokens"] + c_line["reused_tokens"] > SHORTEST
    assert "wait_ms" in a_line  # the wait taken from its budget is logged

"""Documents take turns on the one model worker, and a request has a prefill budget (issue 43), through `tabd serve`.

The model is the fixture model (its suggestion is ` total()` at the end of any
line), loaded as users load theirs. Its prefill runs in chunks of CHUNK tokens
(set in the child before it starts: a small model's whole prompt would be one
chunk), so document A's cold prompt of about 1,900 tokens takes many chunks,
and a request in B can come while A is half-way. What is asserted is read from
the server's log, in tokens and order, never from a clock.
"""
from __future__ import annotations

import subprocess
import sys
import time

from support.lspclient import read_log
from support.rawserver import RawServer

from tabd.daemon.bench.turns import doc_hash
from tabd.daemon.bench.preempt import long_text

CHUNK = 32
LAUNCH = ("import runpy, sys; import tabd.predictor.engine.generate as g; "
          f"g.chunk_for = lambda parameters: {CHUNK}; "
          "sys.argv = ['tabd', *sys.argv[1:]]; runpy.run_module('tabd.daemon', run_name='__main__')")
A, B = "file:///w/a.py", "file:///w/b.py"
OPTIONS = {"debounceMs": 0, "speculation": False, "warmup": False, "minConfidence": 0, "contextTokens": 0,
           "prefixChars": 8000}


def small_chunks(cmd, **kwargs):
    """`tabd serve` with prefill chunks of CHUNK tokens (cmd is [python, -m, tabd.daemon, serve, ...])."""
    return subprocess.Popen([sys.executable, "-c", LAUNCH, *cmd[3:]], **kwargs)


def end(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines) - 1, len(lines[-1])


def a_text() -> str:
    text = long_text(6000)
    return text[: text.rfind("\n")] + "\nx = 1"  # ends a line: the fixture model writes ` total()` there


def completions(log) -> list[dict]:
    return [e for e in read_log(log) if e["event"] == "completion"]


def until(check, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_request_in_another_document_is_answered_while_a_cold_one_runs_which_resumes_from_its_kv(
        tmp_path, fixture_model):
    log = tmp_path / "tabd.jsonl"
    s = RawServer("--model", fixture_model, "--log", str(log), "--max-prompt-ms", "0",
                  stderr=tmp_path / "stderr.txt", popen=small_chunks)
    try:
        s.initialize(OPTIONS)
        text = a_text()
        s.open(A, text)
        s.open(B, "def f():\n    y = 2")
        assert s.inline(B, 1, 9)["result"]["items"]  # the model is loaded and B has run once
        a = s.request("textDocument/inlineCompletion", {"textDocument": {"uri": A}, "position": dict(
            zip(("line", "character"), end(text))), "context": {"triggerKind": 2}})
        until(lambda: s.result("tabd/stats", {})["requests_to_model"]["started"] == 2, "A's run to start")
        time.sleep(0.3)  # A is some chunks into its prefill (it has dozens)
        s.change(B, 2, [{"range": {"start": {"line": 1, "character": 9}, "end": {"line": 1, "character": 9}},
                         "text": "3"}])
        b_reply = s.inline(B, 1, 10)
        a_reply = s.response(a, timeout=120)
        assert s.shutdown_exit() == 0
    finally:
        s.close()
    lines = completions(log)
    assert len(lines) == 3
    b_line, a_line = lines[1], lines[2]  # B was answered first, though asked after A
    assert [item["insertText"] for item in b_reply["result"]["items"]] == [" total()"]
    assert [item["insertText"] for item in a_reply["result"]["items"]] == [" total()"]  # A's answer still came
    assert a_line["preemptions"] == 1 and "preemptions" not in b_line
    # A resumed from the chunks it had run before B came: those were reused, not run again
    assert a_line["reused_tokens"] >= CHUNK and a_line["reused_tokens"] % CHUNK == 0
    assert a_line["prefill_tokens"] + a_line["reused_tokens"] > 1500  # its whole prompt, cold
    assert b_line["doc"] != a_line["doc"]


def test_a_preempted_request_stops_once_the_user_goes_on_in_the_other_document(tmp_path, fixture_model):
    log = tmp_path / "tabd.jsonl"
    s = RawServer("--model", fixture_model, "--log", str(log), "--max-prompt-ms", "0",
                  stderr=tmp_path / "stderr.txt", popen=small_chunks)
    try:
        s.initialize(OPTIONS)
        text = a_text()
        s.open(A, text)
        s.open(B, "def f():\n    y = 2")
        assert s.inline(B, 1, 9)["result"]["items"]
        a = s.request("textDocument/inlineCompletion", {"textDocument": {"uri": A}, "position": dict(
            zip(("line", "character"), end(text))), "context": {"triggerKind": 2}})
        until(lambda: s.result("tabd/stats", {})["requests_to_model"]["started"] == 2, "A's run to start")
        time.sleep(0.3)
        for version, char in ((2, 9), (3, 10)):  # two keystrokes in B: the second says the user went on there
            s.change(B, version, [{"range": {"start": {"line": 1, "character": char},
                                             "end": {"line": 1, "character": char}}, "text": "3"}])
            assert s.inline(B, 1, char + 1)["result"]["items"]
        a_reply = s.response(a, timeout=120)
        assert s.shutdown_exit() == 0
    finally:
        s.close()
    events = read_log(log)
    assert a_reply["result"]["items"] == []  # A stopped instead of resuming for a user who is in B now
    assert any(e["event"] == "cancel" and e.get("reason") == "elsewhere" for e in events)
    a_line = [e for e in completions(log) if e["source"] == "none"]
    assert len(a_line) == 1 and "preemptions" not in a_line[0]  # answered empty, nothing computed for it


def test_a_cold_prompt_over_the_budget_runs_on_the_nearest_lines_and_the_next_keystroke_reuses_the_whole(
        tmp_path, fixture_model):
    log = tmp_path / "tabd.jsonl"
    s = RawServer("--model", fixture_model, "--log", str(log), "--max-prompt-ms", "1",
                  stderr=tmp_path / "stderr.txt", popen=small_chunks)
    try:
        s.initialize(OPTIONS)
        text = a_text()
        b_text = "".join(f"def f{i}(x):\n    return x * {i}\n" for i in range(12)) + "y = 2"
        s.open(B, b_text)
        # the prefill's speed is measured on a prompt of several chunks (a model's first pass is not the rate)
        assert s.inline(B, *end(b_text))["result"]["items"]
        s.open(A, text)
        line, char = end(text)
        first = s.inline(A, line, char)
        until(lambda: any(e["event"] == "warmup" and e.get("whole") and e["doc"] == doc_hash(A) for e in read_log(log)),
              "the whole window's warm-up")
        s.change(A, 2, [{"range": {"start": {"line": line, "character": char}, "end": {"line": line, "character": char}},
                         "text": "2"}])  # not the suggestion's first character: the model is asked again
        second = s.inline(A, line, char + 1)
        assert s.shutdown_exit() == 0
    finally:
        s.close()
    cold, warm = [line for line in completions(log) if line["doc"] == doc_hash(A)]
    assert warm["source"] == "model"
    assert [item["insertText"] for item in first["result"]["items"]] == [" total()"]
    # the cold request ran on a few lines (its window logged), the keystroke after it on the whole window
    assert cold["window_chars"] < 600 < 6000 < warm["window_chars"]
    assert cold["prefill_tokens"] + cold["reused_tokens"] < 300
    warmup = next(e for e in read_log(log) if e["event"] == "warmup" and e.get("whole") and e["doc"] == doc_hash(A))
    assert warmup["prefill_tokens"] > 1500
    assert warm["reused_tokens"] / (warm["reused_tokens"] + warm["prefill_tokens"]) >= 0.95

"""A Tab's hot path through a real `tabd serve` (the copy backend: deterministic, no model), in raw bytes.

A Tab sends three messages in a row: the edit, tabd.accept, and the inline completion at the new cursor. They are
handled on plain JSON (lsp/rawparams.py) and their answers leave through the outbox (lsp/outbox.py): the accept's answer
may wait for the completion's, never the other way round. Checked here: the answer from memory is the suggestion a
fresh computation gives at that state, the accept counts once, the answers keep their order, and an accept's answer
that waits still reaches the client, alone or when the client exits.
"""
from __future__ import annotations

import os
import sys
import time

import pytest

from support.rawserver import RawServer, frame

TEXT = "total = compute_total(items, tax)\ntotal = "
URI = "file:///w/a.py"


def copy_server(*extra: str) -> RawServer:
    srv = RawServer("--backend", "copy", *extra)
    srv.initialize()
    srv.open(URI, TEXT)
    return srv


def inline(line: int, character: int) -> dict:
    return {"textDocument": {"uri": URI}, "position": {"line": line, "character": character},
            "context": {"triggerKind": 2}}


def until_stats(srv: RawServer, check, what: str, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        s = srv.result("tabd/stats", {})
        if check(s):
            return s
        assert time.monotonic() < deadline, f"{what}: {s}"
        time.sleep(0.05)


def arrived_in_order(srv: RawServer, first, second, timeout: float = 10.0) -> tuple[dict, dict]:
    """The responses to two request ids, once both are in, checking that they arrived in this order."""
    def index(msg_id) -> int | None:
        return next((i for i, m in enumerate(srv.messages) if m.get("id") == msg_id and "method" not in m), None)

    deadline = time.monotonic() + timeout
    with srv.cond:
        while index(first) is None or index(second) is None:
            assert time.monotonic() < deadline and not srv.eof, f"no answers to {first} and {second}: {srv.messages[-4:]}"
            srv.cond.wait(0.1)
        assert index(first) < index(second), srv.messages
    return srv.response(first), srv.response(second)


def test_a_tab_is_answered_from_memory_with_what_a_fresh_computation_gives():
    srv = copy_server()
    fresh = None
    try:
        first = srv.result("textDocument/inlineCompletion", inline(1, 8))["items"][0]
        assert first["insertText"] == "compute_total(items, tax)"
        word, item_id = "compute_total", first["command"]["arguments"][0]  # the next-word accept (Ctrl+Right)
        until_stats(srv, lambda s: s["prefetch"]["finished"] >= 1, "the prefetch after the suggestion")
        edit = {"textDocument": {"uri": URI, "version": 2}, "contentChanges": [
            {"range": {"start": {"line": 1, "character": 8}, "end": {"line": 1, "character": 8}}, "text": word}]}
        at = {"line": 1, "character": 8 + len(word)}
        tab = frame({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": edit})
        tab += frame({"jsonrpc": "2.0", "id": 501, "method": "workspace/executeCommand",
                      "params": {"command": "tabd.accept", "arguments": [item_id, {"chars": len(word), "partial": True}]}})
        tab += frame({"jsonrpc": "2.0", "id": 502, "method": "textDocument/inlineCompletion", "params": inline(**at)})
        srv.send_bytes(tab)  # one write, as a fast client's accept reaches the server
        accepted, answered = arrived_in_order(srv, 501, 502)
        assert accepted["result"] == {"accepted": True}
        stats = srv.result("tabd/stats", {})
        assert stats["last"]["source"] in ("cache", "typed")  # from memory
        assert stats["accepts"] == 1 and stats["accepts_by"] == {"edit": 1}  # the edit and the command: one accept
        assert stats["after_accept"] == {**stats["after_accept"], "requests": 1, "from_cache": 1}
        item = answered["result"]["items"][0]
        assert item["range"] == {"start": at, "end": at} and item["command"]["command"] == "tabd.accept"

        fresh = copy_server("--no-cache")  # the same state, computed: what memory must have answered
        fresh.notify("textDocument/didChange", edit)
        computed = fresh.result("textDocument/inlineCompletion", inline(**at))["items"][0]
        assert item["insertText"] == computed["insertText"] == "(items, tax)"
        assert item["range"] == computed["range"]
    finally:
        srv.close()
        if fresh is not None:
            fresh.close()


def test_an_accept_whose_answer_waits_is_still_answered_alone():
    srv = copy_server()
    try:
        reply = srv.call("workspace/executeCommand", {"command": "tabd.dismiss", "arguments": ["never-shown"]})
        assert reply["result"] == {"dismissed": False}
        reply = srv.call("workspace/executeCommand", {"command": "tabd.accept", "arguments": ["never-shown"]})
        assert reply["result"] == {"accepted": False}
    finally:
        srv.close()


def test_a_waiting_accept_answer_goes_out_before_the_server_exits():
    srv = copy_server()
    try:
        srv.send_bytes(frame({"jsonrpc": "2.0", "id": 601, "method": "workspace/executeCommand",
                              "params": {"command": "tabd.accept", "arguments": ["never-shown"]}})
                       + frame({"jsonrpc": "2.0", "method": "exit"}))
        assert srv.proc.wait(30) == 1  # exit without shutdown
        assert srv.response(601, timeout=5)["result"] == {"accepted": False}
    finally:
        srv.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads have nice values of their own on Linux")
def test_the_model_worker_runs_below_the_thread_that_answers_the_editor():
    """On taken cores a cache hit must not wait behind a prefetch: the model worker (and the threads torch or OpenMP
    start from it) runs at a lower OS priority than the LSP thread, as the server says and the OS shows."""
    srv = copy_server()
    try:
        assert srv.result("textDocument/inlineCompletion", inline(1, 8))["items"]  # the worker has run a job
        nice = srv.result("tabd/stats", {})["nice"]
        assert nice["model"] > nice["lsp"], nice
        task = f"/proc/{srv.proc.pid}/task"
        by_name = {}
        for tid in os.listdir(task):
            with open(f"{task}/{tid}/comm") as f:
                by_name.setdefault(f.read().strip(), []).append(int(tid))
        (worker,) = by_name["tabd-model-0"]  # named for top -H and py-spy
        assert os.getpriority(os.PRIO_PROCESS, worker) == nice["model"]
        assert os.getpriority(os.PRIO_PROCESS, srv.proc.pid) == nice["lsp"]  # the main thread: the LSP loop
    finally:
        srv.close()

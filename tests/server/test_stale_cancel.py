"""An edit cancels the model call its request had started: the call is stopped, the request answered empty.

A real `tabd serve` whose model is a stub OpenAI-compatible server in this
process (tests/support/stub_model.py, mode "hold"): it takes the call and holds
it open until the daemon hangs up. So the call is seen to begin (the stub got
the POST) before the edit that makes it stale is sent, however fast or slow the
machine, and a daemon that did not cancel it would be left waiting for the
answer the stub gives only when the test releases it.
"""
from __future__ import annotations

from support.lspclient import read_log
from support.rawserver import RawServer
from support.stub_model import HELD_ANSWER, stub_model

URI = "file:///w/stale.py"
TEXT = "def total(items):\n    return "
CANCEL_WITHIN_S = 15  # generous, for a loaded machine (an idle one hangs up within ~10 ms); under the daemon's own 30 s


def test_an_edit_cancels_the_model_call_it_made_stale(tmp_path):
    log = tmp_path / "tabd.jsonl"
    with stub_model("hold") as (model, url):
        s = RawServer("--backend", "openai", "--url", url, "--fim", "tabd", "--log", str(log),
                      stderr=tmp_path / "stderr.txt")
        try:
            # no debounce, no speculation, no warm-up: the one call the model gets is this request's
            s.initialize({"debounceMs": 0, "speculation": False, "warmup": False, "minConfidence": 0})
            s.open(URI, TEXT)
            request = s.request("textDocument/inlineCompletion", {
                "textDocument": {"uri": URI}, "position": {"line": 1, "character": 11}, "context": {"triggerKind": 2}})
            assert model.started.wait(60), "the request never reached the model"
            running = s.result("tabd/stats", {})["requests_to_model"]
            s.change(URI, 2, [{"range": {"start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 11}},
                               "text": "s"}])
            hung_up = model.closed.wait(CANCEL_WITHIN_S)
            model.release.set()  # a daemon that did not hang up gets its answer now, and the asserts below say so
            reply = s.response(request, timeout=60)
            after = s.result("tabd/stats", {})["requests_to_model"]
            assert s.shutdown_exit() == 0
        finally:
            s.close()
    events = [e for e in read_log(log) if e["event"] in ("completion", "cancel", "error")]

    assert running == {"started": 1, "finished": 0, "cancelled": 0}  # the call was under way when the edit came
    assert reply["result"] == {"items": [], "tabd": {"reason": "superseded"}}, f"the stale request was answered with {reply['result']} (the stub's {HELD_ANSWER!r})"
    assert after == {"started": 1, "finished": 0, "cancelled": 1}
    assert hung_up is True  # the model's connection was closed: its work stopped, not only its answer dropped
    assert len(model.hits) == 1
    request_id = [e["id"] for e in events if e["event"] == "completion"]
    assert [(e["event"], e.get("id"), e.get("reason"), e.get("source")) for e in events] == [
        ("cancel", *request_id, "stale", None), ("completion", *request_id, "superseded", "none")]

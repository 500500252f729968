"""A real next-edit model for users who serve one: `tabd serve --backend openai --edit-format sweep|zeta` in front of
a scripted engine on 127.0.0.1 that speaks llama-server's OpenAI /v1/completions. The engine answers only the exact
prompt the model's card documents for the user's rename (anything else gets an empty answer, as a model would give
nothing useful), with the answer the card documents; what the user sees is the edit that answer implies, at the
right place, and after Tab the next one from memory."""
from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from support.edits import apply
from support.rawserver import RawServer

URI = "file:///w/size.py"
CODE = "import os\n\ndef size(n):\n    total = n + 1\n    return n\n"
TEXT = CODE.replace("(n)", "(count)")
RENAMED = TEXT.replace("n + 1", "count + 1").replace("return n", "return count")

SWEEP_PROMPT = """<|file_sep|>size.py.diff
original:
def size(n):
updated:
def size(count):
<|file_sep|>original/size.py
import os

def size(n):
    total = n + 1
    return n
<|file_sep|>current/size.py
import os

def size(count):
    total = n + 1
    return n
<|file_sep|>updated/size.py
"""
# what the model writes after `updated/size.py`: the window as it will be; the engine stops at the next separator
SWEEP_ANSWER = RENAMED

ZETA_PROMPT = """### Instruction:
You are a code completion assistant and your task is to analyze user edits and then rewrite an excerpt that the user \
provides, suggesting the appropriate edits within the excerpt, taking into account the cursor location.

### User Edits:

User edited size.py:
```diff
@@ -3,1 +3,1 @@
-def size(n):
+def size(count):
```

### User Excerpt:

```size.py
<|start_of_file|>
<|editable_region_start|>
import os

def size(count<|user_cursor_is_here|>):
    total = n + 1
    return n
<|editable_region_end|>
```

### Response:
"""
# the excerpt written again, region rewritten, cursor kept; the engine stops at the end marker
ZETA_ANSWER = "```size.py\n<|editable_region_start|>\n" + RENAMED.replace("(count)", "(count<|user_cursor_is_here|>)")

CASES = {"sweep": (SWEEP_PROMPT, SWEEP_ANSWER, ["<|file_sep|>", "</s>"]),
         "zeta": (ZETA_PROMPT, ZETA_ANSWER, ["<|editable_region_end|>"])}


class Engine(BaseHTTPRequestHandler):
    """llama-server as tabd finds it (/v1/models, /props, so tabd would pick its /infill route for completions),
    answering /v1/completions: the documented answer to the expected prompt, streamed a line a chunk; nothing to any
    other prompt."""

    expected = ""
    answer = ""
    cut_at = 0  # > 0: the answer ends there, cut by the token budget
    bodies: list[dict] = []

    def log_message(self, *args) -> None:
        pass

    def _json(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            model = {"id": "sweep-next-edit-1.5b.q8_0.v2.gguf", "owned_by": "llamacpp"}
            self._json({"object": "list", "data": [model]})
        elif self.path == "/props":
            self._json({"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1})
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append({"path": self.path, **body})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        if self.path == "/infill":  # an inline completion: none here
            self._event({"content": "", "stop": True})
            return
        text = self.answer if body.get("prompt") == self.expected else ""
        if self.cut_at:  # the model wrote on past the budget: llama-server ends at max_tokens and says so
            text = text[:self.cut_at]
        for piece in text.splitlines(keepends=True):
            self._event({"choices": [{"text": piece, "index": 0, "finish_reason": None}]})
        last = {"text": "", "index": 0, "finish_reason": "length" if self.cut_at else "stop"}
        used = body["max_tokens"] if self.cut_at else len(text.splitlines())
        self._event({"choices": [last], "timings": {"prompt_n": 100, "cache_n": 0, "predicted_n": used,
                                                    "prompt_ms": 10.0, "predicted_ms": 10.0}})
        self._event("[DONE]")

    def _event(self, event: dict | str) -> None:
        self.wfile.write(f"data: {event if isinstance(event, str) else json.dumps(event)}\n\n".encode())
        self.wfile.flush()


@contextmanager
def engine(expected: str, answer: str, cut_at: int = 0) -> Iterator[tuple[type[Engine], str]]:
    handler = type("Scripted", (Engine,), {"expected": expected, "answer": answer, "cut_at": cut_at, "bodies": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield handler, f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def rng(line: int, a: int, b: int) -> dict:
    return {"start": {"line": line, "character": a}, "end": {"line": line, "character": b}}


def inline_edit(server: RawServer, version: int, line: int, character: int) -> dict:
    reply = server.call("textDocument/copilotInlineEdit", {
        "textDocument": {"uri": URI, "version": version}, "position": {"line": line, "character": character}})
    assert "error" not in reply, reply
    return reply["result"]


@pytest.mark.parametrize("fmt", ["sweep", "zeta"])
def test_the_engine_gets_the_model_s_own_prompt_and_its_answer_is_the_edit_shown(fmt):
    prompt, answer, stops = CASES[fmt]
    with engine(prompt, answer) as (scripted, url):
        server = RawServer("--backend", "openai", "--url", url, "--edit-format", fmt, "--edit-sources", "model",
                           "--no-warmup", "--debounce-ms", "0")
        try:
            server.initialize()
            server.open(URI, CODE)
            server.change(URI, 2, [{"range": rng(2, 9, 10), "text": "count"}])  # the user renames the parameter
            time.sleep(1.2)  # and pauses, the cursor after the new name
            edits = inline_edit(server, 2, 2, 14)["edits"]
            asked = [b for b in scripted.bodies if b["path"] == "/v1/completions"]
            assert len(asked) == 1, scripted.bodies
            # exactly the card's prompt, as a plain completion (no FIM around it, no suffix) with the format's stops
            assert asked[0]["prompt"] == prompt
            assert asked[0]["stop"] == stops and "suffix" not in asked[0] and asked[0]["temperature"] == 0
            # the edit the answer implies: the old name in the next line, nearest the cursor first
            assert len(edits) == 1 and edits[0]["range"] == rng(3, 12, 13) and edits[0]["text"] == "count", edits
            # Tab: the next use is renamed too, from memory (the model is not asked again)
            text = apply(TEXT, edits[0])
            server.change(URI, 3, [{"range": edits[0]["range"], "text": edits[0]["text"]}])
            server.result("workspace/executeCommand", edits[0]["command"])  # as VS Code does (copilot-lsp does not)
            second = inline_edit(server, 3, 3, 17)["edits"]
            assert len(second) == 1 and second[0]["range"] == rng(4, 11, 12) and second[0]["text"] == "count", second
            assert apply(text, second[0]) == RENAMED
            assert len([b for b in scripted.bodies if b["path"] == "/v1/completions"]) == 1
        finally:
            server.close()


def test_an_answer_the_budget_cut_short_deletes_nothing():
    """The model rambled and the engine stopped it at max_tokens after whole lines: the window it wrote lacks its
    last lines, which read as the user's code deleted. No edit is shown instead."""
    cut = SWEEP_ANSWER.index("    total")  # the first three lines only
    with engine(SWEEP_PROMPT, SWEEP_ANSWER, cut_at=cut) as (scripted, url):
        server = RawServer("--backend", "openai", "--url", url, "--edit-format", "sweep", "--edit-sources", "model",
                           "--no-warmup", "--debounce-ms", "0")
        try:
            server.initialize()
            server.open(URI, CODE)
            server.change(URI, 2, [{"range": rng(2, 9, 10), "text": "count"}])
            time.sleep(1.2)
            assert inline_edit(server, 2, 2, 14)["edits"] == []
            assert [b["prompt"] for b in scripted.bodies if b["path"] == "/v1/completions"] == [SWEEP_PROMPT]
        finally:
            server.close()


def test_a_format_the_local_engine_cannot_serve_is_refused_at_start():
    server = RawServer("--edit-format", "sweep")
    try:
        assert server.proc.wait(60) == 2
    finally:
        server.close()

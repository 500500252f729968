"""Faults of a shared engine, survived: a real `tabd serve --backend openai` against a real engine process on
127.0.0.1 (`tabd serve-model`, killed, paused and restarted; a small HTTP server for the garbage an engine may
send). Each test counts its requests: every one answered, the daemon alive at the end, the document in sync.

What a user would notice is what is asserted: each answer during a fault is empty and says why (`unreachable`,
`slow`, `error`), and suggestions come back by themselves once the engine does, within a bounded number of
keystrokes (typed 0.1 s apart). How many seconds that took after the engine was back is printed (README, "Faults").
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from support.engines import ServeModel
from support.lspclient import end_of, read_log
from support.ports import free_port
from tabd.lsp.client import Client

pytestmark = [pytest.mark.server, pytest.mark.slow]

DOC = ('import os\n\n\ndef read_config(path):\n    """Read KEY=VALUE lines into a dict."""\n    config = {}\n'
       '    with open(path) as handle:\n        for line in handle:\n')
TYPED = ("            key, _, value = line.partition('=')\n            config[key.strip()] = value.strip()\n"
         "    return config\n\n\ndef main(argv):\n    config = read_config(argv[1])\n    for key in sorted(config):\n"
         "        print(key, config[key])\n")
FAILED = ("unreachable", "slow", "error")  # the engine was not heard from
EVERY_KEYSTROKE = ["--no-cache", "--debounce-ms", "0", "--min-confidence", "0", "--min-chars", "1"]
BACK_WITHIN = 40  # keystrokes, 0.1 s apart, for the first answer from an engine that is back


class Typist:
    """A user typing into one document through a real `tabd serve`, asking after each keystroke; every answer kept."""

    def __init__(self, client: Client, uri: str = "file:///w/config.py", text: str = DOC) -> None:
        self.client, self.uri, self.text, self.version = client, uri, text, 1
        self.typed = iter(TYPED * 20)
        self.sent = 0
        self.answers: list[dict] = []

    def open(self) -> None:
        self.client.open(self.uri, "python", 1, self.text)

    def key(self) -> None:
        ch = next(self.typed)
        line, character = end_of(self.text)
        at = {"line": line, "character": character}
        self.version += 1
        self.client.change(self.uri, self.version, {"start": at, "end": at}, ch)
        self.text += ch

    async def ask(self) -> dict:
        """One keystroke, then a suggestion at the cursor: its text, its reason, where it came from."""
        self.key()
        line, character = end_of(self.text)
        self.sent += 1
        sent_at = time.monotonic()
        result = await asyncio.wait_for(asyncio.wrap_future(
            self.client.inline_completion(self.uri, {"line": line, "character": character})), 60)
        items = (result or {}).get("items") or []
        text = items[0].get("insertText") if items else ""
        stats = await self.client.call("tabd/stats", {})
        answer = {"text": text if isinstance(text, str) else "", "reason": ((result or {}).get("tabd") or {}).get("reason", ""),
                  "source": stats["last"]["source"], "sent": sent_at, "at": time.monotonic()}
        self.answers.append(answer)
        return answer

    async def until_engine_answers(self, limit: int = BACK_WITHIN) -> tuple[int, dict]:
        """Keystrokes 0.1 s apart until an answer the engine computed: (how many it took, that answer)."""
        for n in range(1, limit + 1):
            answer = await self.ask()
            if answer["reason"] not in FAILED:
                return n, answer
            await asyncio.sleep(0.1)
        raise AssertionError(f"no answer from the engine within {limit} keystrokes: {self.answers[-5:]}")

    async def in_sync(self) -> bool:
        result = await self.client.call("tabd/document", {"uri": self.uri})
        return result["text"] == self.text


async def start_tabd(url: str, *flags: str, env: dict | None = None) -> Client:
    client = Client("test-faults")
    await client.start([sys.executable, "-m", "tabd.daemon", "serve", "--backend", "openai", "--url", url, *flags],
                       env={**os.environ, **(env or {})})
    await client.initialize()
    return client


async def ended_well(client: Client, typist: Typist) -> None:
    """Every request answered, the document in sync, the daemon alive (it answers, and exits cleanly when asked)."""
    assert len(typist.answers) == typist.sent
    assert await typist.in_sync()
    assert client.process is not None and client.process.returncode is None
    await client.shutdown()
    assert await asyncio.wait_for(client.process.wait(), 30) == 0


def report(what: str, figures: dict) -> None:
    print(f"\n[faults] {what}: {json.dumps(figures)}")


# -- killed and restarted ---------------------------------------------------------------------------------------

async def test_engine_killed_and_restarted_every_request_answered_and_suggestions_come_back(tmp_path):
    engine = ServeModel(free_port()).start()
    log = tmp_path / "serve.jsonl"
    client = await start_tabd(engine.url, *EVERY_KEYSTROKE, "--log", str(log))
    typist = Typist(client)
    try:
        typist.open()
        n, _ = await typist.until_engine_answers()  # the engine is up: the first keystroke's answer is the engine's
        assert n == 1
        # killed with a request in flight: paused first, so the request is surely inside the engine when it dies
        engine.pause()
        started = (await client.call("tabd/stats", {}))["requests_to_model"]["started"]
        in_flight = asyncio.create_task(typist.ask())
        while (await client.call("tabd/stats", {}))["requests_to_model"]["started"] == started:
            await asyncio.sleep(0.01)
        engine.kill()
        engine.back_at = 0.0
        assert (await in_flight)["reason"] == "unreachable"
        down = [await typist.ask() for _ in range(8)]
        assert [a["reason"] for a in down] == ["unreachable"] * 8 and not any(a["text"] for a in down)
        assert (await client.call("tabd/stats", {}))["last"]["reason"] == "unreachable"
        # the user types on, 0.1 s apart, while the engine restarts (it loads its model again: seconds)
        restart = asyncio.create_task(asyncio.to_thread(engine.start))
        while not restart.done():
            answer = await typist.ask()
            assert answer["reason"] == "unreachable" or engine.back_at, answer  # only the engine back may answer
            await asyncio.sleep(0.1)
        await restart
        outage = [a for a in typist.answers[len(down) + 2:] if a["at"] < engine.back_at]
        assert outage and {a["reason"] for a in outage} == {"unreachable"}

        def since_back() -> list[dict]:
            return [a for a in typist.answers if a["at"] >= engine.back_at]

        while not any(a["reason"] not in FAILED for a in since_back()):
            assert len(since_back()) < BACK_WITHIN, typist.answers[-5:]
            await typist.ask()
            await asyncio.sleep(0.1)
        first = next(i for i, a in enumerate(since_back()) if a["reason"] not in FAILED)
        good = since_back()[first]
        n, seconds = first + 1, good["at"] - engine.back_at
        report("kill and restart", {"keystrokes_in_outage": 1 + len(down) + len(outage), "keystrokes_until_back": n,
                                    "seconds_after_engine_back": round(seconds, 3),
                                    "that_request_s": round(good["at"] - good["sent"], 3)})
        after = [await typist.ask() for _ in range(3)]
        assert not [a for a in after if a["reason"] in FAILED]
        errors = [e for e in read_log(log) if e.get("event") == "error"]
        assert errors and all("cannot reach" in e["message"] or "127.0.0.1" in e["message"] for e in errors)
        assert any(e.get("reason") == "unreachable" for e in read_log(log) if e.get("event") == "completion")
        await ended_well(client, typist)
    finally:
        await client.stop()
        engine.stop()


async def test_a_model_renamed_by_a_restart_is_picked_up_or_reported(tmp_path):
    """tabd chose the name (the first the engine listed): it takes the new one. The user chose it (--remote-model):
    it says the engine no longer serves it, answers empty, and goes on."""
    engine = ServeModel(free_port()).start("--name", "first")
    chosen_log = tmp_path / "chosen.jsonl"
    picked = await start_tabd(engine.url, *EVERY_KEYSTROKE)
    chosen = await start_tabd(engine.url, *EVERY_KEYSTROKE, "--remote-model", "first", "--log", str(chosen_log))
    typists = Typist(picked), Typist(chosen)
    try:
        for typist in typists:
            typist.open()
            assert (await typist.until_engine_answers())[0] == 1
        assert ":first|" in (await picked.call("tabd/stats", {}))["model"]
        engine.kill()
        engine.start("--name", "second")
        n, _ = await typists[0].until_engine_answers()
        report("model renamed", {"keystrokes_until_back": n})
        assert ":second|" in (await picked.call("tabd/stats", {}))["model"]
        refused = [await typists[1].ask() for _ in range(3)]
        assert {a["reason"] for a in refused} <= {"error", "unreachable"} and refused[-1]["reason"] == "error"
        messages = [e["message"] for e in read_log(chosen_log) if e.get("event") == "error"]
        assert any("model 'first' is not served there" in m and "second" in m for m in messages), messages
        for client, typist in zip((picked, chosen), typists):
            await ended_well(client, typist)
    finally:
        for client in (picked, chosen):
            await client.stop()
        engine.stop()


# -- slow, then recovered ---------------------------------------------------------------------------------------

async def test_an_engine_slower_than_the_timeout_answers_empty_then_recovers(tmp_path):
    engine = ServeModel(free_port()).start()
    log = tmp_path / "serve.jsonl"
    client = await start_tabd(engine.url, *EVERY_KEYSTROKE, "--remote-timeout", "1", "--log", str(log))
    typist = Typist(client)
    try:
        typist.open()
        assert (await typist.until_engine_answers())[0] == 1
        engine.pause()
        slow = [await typist.ask() for _ in range(4)]
        assert [a["reason"] for a in slow] == ["slow"] * 4 and not any(a["text"] for a in slow)
        engine.resume()
        resumed_at = time.monotonic()
        n, answer = await typist.until_engine_answers()
        report("slow then recovered", {"keystrokes_until_back": n,
                                       "seconds_after_engine_back": round(answer["at"] - resumed_at, 3)})
        assert not [a for a in [await typist.ask() for _ in range(3)] if a["reason"] in FAILED]
        messages = [e["message"] for e in read_log(log) if e.get("event") == "error"]
        assert messages and all("within 1 s (timeout)" in m or "went silent" in m for m in messages), messages
        await ended_well(client, typist)
    finally:
        await client.stop()
        engine.stop()


# -- garbage ----------------------------------------------------------------------------------------------------

GOOD = "config[key] = value"


class Garbage(BaseHTTPRequestHandler):
    """An engine on 127.0.0.1 that answers what `mode` says: garbage, or a good stream."""

    protocol_version = "HTTP/1.1"
    mode = "good"

    def log_message(self, *args) -> None:
        pass

    def _head(self, code: int, kind: str, length: int | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        if length is not None:
            self.send_header("Content-Length", str(length))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()

    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": "garbage", "owned_by": "test"}]}).encode()
        self._head(200, "application/json", len(body))
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        event = json.dumps({"choices": [{"text": GOOD, "index": 0}]})
        mode = type(self).mode
        if mode == "good":
            self._head(200, "text/event-stream")
            self.wfile.write(f"data: {event}\n\ndata: [DONE]\n\n".encode())
        elif mode == "malformed":
            self._head(200, "text/event-stream")
            self.wfile.write(b'data: {"choices": [{"text": "con\n\n')
        elif mode == "truncated":  # says 4 KB, sends a few bytes of the stream, then hangs up
            self._head(200, "text/event-stream", 4096)
            self.wfile.write(f"data: {event}\n\n".encode()[:30])
            self.close_connection = True
        elif mode == "cut-stream":  # a stream that stops mid-answer: no finish_reason, no [DONE], the end
            self._head(200, "text/event-stream")
            self.wfile.write(f"data: {json.dumps({'choices': [{'text': GOOD[:9], 'index': 0}]})}\n\n".encode())
        elif mode == "empty-200":  # headers, then the end: not one event
            self._head(200, "text/event-stream")
        elif mode == "error-200":
            body = json.dumps({"error": {"message": "the engine is overloaded", "type": "server_error"}}).encode()
            self._head(200, "application/json", len(body))
            self.wfile.write(body)
        elif mode == "html-200":
            body = b"<html><body>502 Bad Gateway</body></html>"
            self._head(200, "text/html", len(body))
            self.wfile.write(body)
        self.wfile.flush()


GARBAGE = {"malformed": "not JSON", "truncated": "/v1/completions", "cut-stream": "ended mid-answer", "empty-200": "ended before any answer", "error-200": "HTTP 200: the engine is overloaded",
           "html-200": "not an answer"}


async def test_garbage_from_the_engine_is_an_empty_answer_and_a_clear_error(tmp_path):
    handler = type("G", (Garbage,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    log = tmp_path / "serve.jsonl"
    client = await start_tabd(url, *EVERY_KEYSTROKE, "--fim", "tabd", "--log", str(log))
    typist = Typist(client)
    try:
        typist.open()
        assert (await typist.ask())["text"] == GOOD
        for mode, words in GARBAGE.items():
            handler.mode = mode
            bad = [await typist.ask() for _ in range(2)]
            assert [a["reason"] for a in bad] == ["error", "error"] and not any(a["text"] for a in bad), mode
            message = [e for e in read_log(log) if e.get("event") == "error"][-1]["message"]
            assert words in message and "\n" not in message, (mode, message)
            handler.mode = "good"
            assert (await typist.ask())["text"] == GOOD, mode  # and on it goes, with no restart
        await ended_well(client, typist)
    finally:
        await client.stop()
        server.shutdown()
        server.server_close()

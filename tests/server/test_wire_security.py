"""Security on the wire, through a real `tabd serve --backend openai`: prompts are source code, so plain http goes
to loopback only unless the user says otherwise; the API key reaches the engine and nothing else (not the command
line, the log, tabd/stats, stderr or an error message, even when the engine echoes it back)."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tabd.lsp.client import Client

pytestmark = pytest.mark.server

KEY = "sk-tabd-K3Y-5e7c1d9a0b"  # distinctive: found anywhere, it leaked
NOT_LOOPBACK = "http://192.0.2.10:8000"  # TEST-NET-1: documentation only, never routed


def serve(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tabd.daemon", "serve", *flags], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def test_plain_http_to_a_host_that_is_not_loopback_is_refused_at_start():
    refused = serve("--backend", "openai", "--url", NOT_LOOPBACK)
    assert refused.returncode == 2
    assert "--url http://192.0.2.10:8000" in refused.stderr and "clear text" in refused.stderr
    assert "--allow-insecure-url" in refused.stderr and "https://" in refused.stderr
    hidden = serve("--backend", "openai", "--url", "http://user:pa55word-x@192.0.2.10:8000")
    assert hidden.returncode == 2 and "user:***@" in hidden.stderr and "pa55word-x" not in hidden.stderr


async def test_allow_insecure_url_lets_it_start_and_a_client_cannot_set_the_url():
    client = Client("test-security")
    await client.start([sys.executable, "-m", "tabd.daemon", "serve", "--backend", "openai", "--url", NOT_LOOPBACK,
                        "--allow-insecure-url", "--fim", "tabd"], env=dict(os.environ))
    try:
        await client.call("initialize", {"processId": os.getpid(), "rootUri": None, "capabilities": {},
                                         "initializationOptions": {"url": "http://203.0.113.5:80"}})
        client.notify("initialized", {})
        stats = await client.call("tabd/stats", {})
        for _ in range(600):  # the load looks at the engine, which is not there: a connect timeout
            if stats["model"] != "loading":
                break
            await asyncio.sleep(0.05)
            stats = await client.call("tabd/stats", {})
        assert stats["model"].startswith(f"remote:{NOT_LOOPBACK}:")  # the command line's URL, not the client's
        shown = [n["params"]["message"] for n in client.notifications if n.get("method") == "window/showMessage"]
        assert any("'url'" in m and "ignored" in m for m in shown), shown
        await client.shutdown()
        assert await asyncio.wait_for(client.process.wait(), 30) == 0
    finally:
        await client.stop()


class Echoing(BaseHTTPRequestHandler):
    """An engine that takes the key, then refuses it, quoting it back (as some OpenAI-compatible servers do)."""

    protocol_version = "HTTP/1.1"
    seen: list[str] = []

    def log_message(self, *args) -> None:
        pass

    def _json(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Authorization", ""))
        self._json(200, {"object": "list", "data": [{"id": "echo", "owned_by": "test"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        auth = self.headers.get("Authorization", "")
        self.seen.append(auth)
        self._json(401, {"error": {"message": f"Incorrect API key provided: {auth.removeprefix('Bearer ')}.",
                                   "type": "invalid_request_error", "code": "invalid_api_key"}})


async def test_the_api_key_reaches_the_engine_and_nothing_else(tmp_path: Path):
    handler = type("E", (Echoing,), {"seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    log = tmp_path / "serve.jsonl"
    client = Client("test-key")
    await client.start([sys.executable, "-m", "tabd.daemon", "serve", "--backend", "openai",
                        "--url", f"http://127.0.0.1:{server.server_address[1]}", "--fim", "tabd", "--debounce-ms", "0",
                        "--api-key-env", "TABD_TEST_KEY", "--log", str(log), "--verbose"],
                       env={**os.environ, "TABD_TEST_KEY": KEY})
    try:
        await client.initialize()
        cmdline = Path(f"/proc/{client.process.pid}/cmdline").read_bytes()
        assert b"TABD_TEST_KEY" in cmdline and KEY.encode() not in cmdline
        uri = "file:///w/key.py"
        client.open(uri, "python", 1, "def main():\n    ")
        answer = await asyncio.wait_for(asyncio.wrap_future(client.inline_completion(uri, {"line": 1, "character": 4})), 60)
        assert answer == {"items": [], "tabd": {"reason": "error"}}
        assert f"Bearer {KEY}" in handler.seen  # the key did go where it belongs: the test can see a leak
        stats = json.dumps(await client.call("tabd/stats", {}))
        errors = [e["message"] for e in json.loads("[" + ",".join(log.read_text().splitlines()) + "]")
                  if e.get("event") == "error"]
        assert any("HTTP 401, not authorised (Incorrect API key provided: ***.)" in m for m in errors), errors
        await client.shutdown()
        await asyncio.wait_for(client.process.wait(), 30)
        stderr = (await client.process.stderr.read()).decode(errors="replace")
        for where, text in (("tabd/stats", stats), ("the log", log.read_text()), ("stderr", stderr)):
            assert KEY not in text, f"the API key leaked into {where}"
        assert stderr  # --verbose wrote something there (httpx's debug lines): the grep above read real output
    finally:
        await client.stop()
        server.shutdown()
        server.server_close()

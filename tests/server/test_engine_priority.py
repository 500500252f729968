"""Priorities on a shared engine: a keystroke runs before prefetches and warm-ups.

`tabd serve-model` queues by vLLM's `priority` field (lower sooner) and says in GET /tabd/stats in which order it
served what (priority, arrival number): the order is asserted, never a time. tabd sends 0 for a request the user
waits for and a prefetch's depth for a prefetch; on vLLM without priority scheduling (which refuses a non-zero
priority) it drops the field at the first refusal and asks again.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from support.engines import ServeModel
from support.ports import free_port
from tabd.lsp.client import Client
from tabd.predictor.backends.backend_settings import RemoteSettings
from tabd.predictor.backends.remote import RemoteBackend
from tabd.predictor.types import GenSettings, Query

pytestmark = pytest.mark.server

HEAD = "".join(f"def step_{i}(x):\n    return x * {i} + {i % 7}\n\n\n" for i in range(60))


def prompt(n: int) -> str:
    """A long FIM prompt (tabd's template: suffix first), different from the start for each n: no KV reuse."""
    return f"<tabd_suf>\n<tabd_pre># job {n}\n{HEAD}def parse_{n}(line):\n    "


def queue_of(url: str) -> dict:
    return httpx.get(url + "/tabd/stats", timeout=10).json()["queue"]


def until(check, what: str) -> None:
    deadline = time.monotonic() + 120
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


@pytest.fixture(scope="module")
def engine():
    served = ServeModel(free_port()).start()
    yield served
    served.stop()


def test_serve_model_serves_a_keystroke_ahead_of_queued_prefetches(engine):
    url = engine.url
    before = len(queue_of(url)["order"])

    def post(n: int, priority: int) -> None:
        body = {"model": "tabd", "prompt": prompt(n), "max_tokens": 48, "priority": priority, "user": f"u{n}",
                "tabd": {"multiline": True, "max_lines": 40}}
        assert httpx.post(url + "/v1/completions", json=body, timeout=300).status_code == 200

    prefetches = [threading.Thread(target=post, args=(n, 3)) for n in range(4)]
    for thread in prefetches:
        thread.start()
    until(lambda: queue_of(url)["waiting"] >= 3, "three prefetches queued behind the running one")
    post(100, 0)  # the keystroke: answered while prefetches that came before it still wait
    for thread in prefetches:
        thread.join(300)
    stats = queue_of(url)
    order = [tuple(entry) for entry in stats["order"][before:]]
    keystroke = next(i for i, (priority, _) in enumerate(order) if priority == 0)
    arrived = order[keystroke][1]
    overtaken = {a for p, a in order[keystroke + 1:] if p == 3 and a < arrived}
    print(f"\n[priority] served (priority, arrival): {order}; preempted {stats['preempted']}")
    assert len(overtaken) >= 2, order  # it went ahead of the prefetches queued before it
    assert stats["served"].get("0", 0) >= 1 and stats["dropped"] == 0


def test_tabd_sends_its_requests_at_priority_0_and_its_prefetches_below(engine):
    """Through a real `tabd serve`: the keystroke's request reaches the engine at priority 0, the prefetch of the
    state after accepting it at its depth (serve-model counts what it served by priority)."""
    before = queue_of(engine.url)["served"]

    async def session() -> None:
        client = Client("test-priority")
        await client.start([sys.executable, "-m", "tabd.daemon", "serve", "--backend", "openai", "--url", engine.url,
                            "--debounce-ms", "0", "--min-confidence", "0"], env=dict(os.environ))
        try:
            await client.initialize()
            uri = "file:///w/p.py"
            text = ("import os\nimport sys\n\n\ndef main(argv):\n    config = read_config(argv[1])\n"
                    "    for key in sorted(config):\n        ")
            client.open(uri, "python", 1, text)
            lines = text.split("\n")
            answer = await asyncio.wait_for(asyncio.wrap_future(
                client.inline_completion(uri, {"line": len(lines) - 1, "character": len(lines[-1])})), 120)
            assert answer["items"], answer  # a suggestion: the state after it is prefetched
            deadline = time.monotonic() + 120
            while (await client.call("tabd/stats", {}))["prefetch"]["finished"] < 1:
                assert time.monotonic() < deadline, "no prefetch finished"
                await asyncio.sleep(0.05)
            await client.shutdown()
        finally:
            await client.stop()

    asyncio.run(session())
    after = queue_of(engine.url)["served"]
    gained = {p: after.get(p, 0) - before.get(p, 0) for p in after}
    assert gained.get("0", 0) >= 1 and sum(n for p, n in gained.items() if int(p) >= 1) >= 1, gained


# -- vLLM's field, on an engine that refuses it ------------------------------------------------------------------

class Vllm(BaseHTTPRequestHandler):
    """A vLLM started without --scheduling-policy priority: a non-zero priority is a 400 (vLLM's own words)."""

    protocol_version = "HTTP/1.1"
    bodies: list[dict] = []
    policy = "fcfs"

    def log_message(self, *args) -> None:
        pass

    def _reply(self, code: int, kind: str, data: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        models = {"object": "list", "data": [{"id": "tabd-embedded", "owned_by": "vllm"}]}
        self._reply(200 if self.path.startswith("/v1/models") else 404, "application/json", json.dumps(models).encode())

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.bodies.append(body)
        priority = body.get("priority", 0)
        if priority != 0 and self.policy != "priority":
            error = {"object": "error", "type": "BadRequestError", "code": 400,
                     "message": f"Got priority {priority} but Priority scheduling is not enabled."}
            self._reply(400, "application/json", json.dumps(error).encode())
            return
        event = json.dumps({"choices": [{"text": "value", "index": 0}]})
        self._reply(200, "text/event-stream", f"data: {event}\n\ndata: [DONE]\n\n".encode())


@pytest.fixture
def vllm():
    handler = type("V", (Vllm,), {"bodies": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield handler, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_auto_sends_vllm_the_priority_and_drops_it_at_the_first_refusal(vllm):
    handler, url = vllm
    remote = RemoteBackend(RemoteSettings(url))
    assert remote.orders_by_priority  # vLLM may order by it: tabd tries
    assert remote.predict(Query("x = ", "", GenSettings(8), priority=0)).text == "value"
    assert handler.bodies[-1]["priority"] == 0
    assert remote.predict(Query("x = ", "", GenSettings(8), priority=2)).text == "value"  # refused, asked again without it
    assert [b.get("priority") for b in handler.bodies[-2:]] == [2, None]
    assert not remote.orders_by_priority and "Priority scheduling is not enabled" in remote.priority_refused
    remote.predict(Query("y = ", "", GenSettings(8), priority=1))
    assert "priority" not in handler.bodies[-1]


def test_on_keeps_the_field_and_says_what_to_do_off_never_sends_it(vllm):
    from tabd.predictor.backends.wire import RemoteError

    handler, url = vllm
    with pytest.raises(RemoteError, match="--scheduling-policy priority"):
        RemoteBackend(RemoteSettings(url, priority="on")).predict(Query("x = ", "", GenSettings(8), priority=1))
    handler.policy = "priority"
    assert RemoteBackend(RemoteSettings(url, priority="on")).predict(Query("x = ", "", GenSettings(8), priority=1)).text
    assert handler.bodies[-1]["priority"] == 1
    off = RemoteBackend(RemoteSettings(url, priority="off"))
    assert not off.orders_by_priority
    off.predict(Query("x = ", "", GenSettings(8), priority=1))
    assert "priority" not in handler.bodies[-1]
